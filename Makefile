# Two commands do all set-up: `make lab` and `make test` (see README.md).
# Every target creates the virtual environment first if it is missing or out of date.

PYTHON      ?= python3
VENV        ?= .venv
TORCH_SPEC  ?= torch==2.13.0
# Extra pip arguments for the torch install only, e.g. a CPU-only index on a laptop:
#   make lab TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_PIP_ARGS ?=
EXTRAS      ?= lab,test
PORT        ?= 8888
# JupyterLab refuses to run as root unless told (containers, CI machines)
LAB_ARGS    ?= $(if $(filter 0,$(shell id -u)),--allow-root,)
PYTEST_WORKERS ?= 2

BIN   := $(VENV)/bin
PY    := $(BIN)/python
STAMP := $(VENV)/.installed

# Threads that cannot stall on small machines (see course_utils/runtime.py).
export OMP_WAIT_POLICY ?= PASSIVE
export PYTHONHASHSEED ?= 0
export HF_HUB_OFFLINE = 1
export TRANSFORMERS_OFFLINE = 1

.PHONY: install lab test unit nbval notebooks data clean distclean

install: $(STAMP)

# 1. the venv, 2. torch first and pinned, 3. the package and its extras under the
# constraints file, so that nothing can move torch, 4. a check that nothing did.
$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), f"Python >= 3.11 needed, found {sys.version.split()[0]}"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -c constraints.txt -e ".[$(EXTRAS)]"
	$(PY) -m pip check
	$(PY) -c 'import torch; print("torch", torch.__version__)'
	touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(PORT) $(LAB_ARGS)

# Unit tests and strict nbval over every notebook, in the fast profile.
# pytest's exit status 5 (no tests collected) is reported but does not fail the target.
NBVAL_ARGS = --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
test: $(STAMP)
	@start=$$(date +%s); COURSE_PROFILE=fast COURSE_NUM_THREADS=1 $(PY) -m pytest \
	    -n $(PYTEST_WORKERS) --dist loadfile $(NBVAL_ARGS) tests notebooks; rc=$$?; \
	echo "make test: pytest exit status $$rc after $$(( $$(date +%s) - start )) s"; \
	if [ $$rc -eq 5 ]; then echo "WARNING: no tests were collected"; rc=0; fi; exit $$rc

unit: $(STAMP)
	COURSE_PROFILE=fast COURSE_NUM_THREADS=1 $(PY) -m pytest -n $(PYTEST_WORKERS) tests

nbval: $(STAMP)
	COURSE_PROFILE=fast COURSE_NUM_THREADS=1 $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile \
	    $(NBVAL_ARGS) notebooks

# Re-execute every notebook in place (fast profile, CPU) and store its outputs.
notebooks: $(STAMP)
	COURSE_PROFILE=fast COURSE_NUM_THREADS=1 $(PY) scripts/execute_notebooks.py notebooks/*.ipynb

# Rebuild the shipped corpora from Debian packages (needs apt-get; see data/*.md).
data: $(STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[data]"
	$(PY) scripts/build_es_en_corpus.py
	$(PY) scripts/build_english_text.py

# Home assignments (README: "For lecturers: assignments").
# `make assignments`: student versions of assignments/source/ into assignments/release/
# (never overwrites a release file changed by hand unless FORCE=1).
# `make grade SUBMISSION=path/to/notebook.ipynb`: points per question, offline, on CPU.
.PHONY: assignments grade
assignments: $(STAMP)
	$(PY) scripts/assignments.py release $(if $(filter 1 yes true,$(FORCE)),--force,)

grade: $(STAMP)
	@if [ -z "$(SUBMISSION)" ]; then echo "usage: make grade SUBMISSION=path/to/notebook.ipynb" >&2; exit 2; fi
	COURSE_PROFILE=fast COURSE_NUM_THREADS=1 $(PY) scripts/assignments.py grade "$(SUBMISSION)"

clean:
	rm -rf build .pytest_cache checkpoints notebooks/checkpoints
	find . -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)

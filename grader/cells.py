"""The assignments' source notebooks and their cells: where they are, and what nbgrader's
metadata says a cell is (an answer, a test and its points).

Every other module of the grader reads cells through these functions; ``AssignmentError`` is
the grader's one error for bad input (the message says what was expected and what was given).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the source notebooks (solutions, hidden tests, checks.py, reference checkpoints); a lecturer
# grading for credit keeps a private copy and points COURSE_ASSIGNMENTS_SOURCE at it
SOURCE = Path(os.environ.get("COURSE_ASSIGNMENTS_SOURCE") or ROOT / "assignments" / "source").resolve()
RELEASE = ROOT / "assignments" / "release"
SKIP_TRAINING_ID = "skip_training"  # grade_id of the cell that holds the flag
# the hidden part of a test cell: cut from feedback, and from the test cells judged outside the sandbox
HIDDEN_TESTS = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS\n.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?", re.M | re.S)


class AssignmentError(Exception):
    """Bad input to ``release`` or ``grade``: the message says what was expected."""


def nbgrader_meta(cell) -> dict:
    """The cell's nbgrader metadata ({} for an ordinary cell, or for metadata that is not a dict)."""
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return meta if isinstance(meta, dict) else {}


def grade_id(cell) -> str | None:
    """The cell's nbgrader ``grade_id``, or None (also for one that is not a string)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    return gid if isinstance(gid, str) else None


def is_test_cell(cell) -> bool:
    """An autograder test cell (graded, not an answer)."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_answer_cell(cell) -> bool:
    """A cell the student writes (nbgrader ``solution``)."""
    return bool(nbgrader_meta(cell).get("solution"))


def source_notebooks(source_dir: Path = SOURCE) -> dict[str, Path]:
    """Assignment name -> its source notebook ``<source_dir>/<name>/<name>.ipynb``."""
    found = {p.parent.name: p for p in sorted(Path(source_dir).glob("*/*.ipynb"))
             if p.stem == p.parent.name}
    if not found:
        raise AssignmentError(f"no assignment found: expected {source_dir}/<name>/<name>.ipynb")
    return found


def reference_checkpoints(source_dir: Path, name: str) -> list[Path]:
    """The reference checkpoints (``*.pt``) shipped beside a source notebook."""
    return sorted((Path(source_dir) / name).glob("*.pt"))


def points(nb) -> dict[str, float]:
    """grade_id -> points of every test cell, in notebook order."""
    return {grade_id(c): float(nbgrader_meta(c)["points"]) for c in nb.cells if is_test_cell(c)}


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (shorter messages)."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


_AST_LOCK = __import__("threading").Lock()


def parse_python(source: str, filename: str = "<unknown>"):
    """``ast.parse`` of ``source``, one thread at a time: a folder is graded by several threads,
    and CPython 3.11's conversion of a parse tree to ``ast`` objects keeps its recursion count in
    shared state (two threads at once: ``SystemError: AST constructor recursion depth mismatch``,
    seen as a row that could not be graded)."""
    import ast
    with _AST_LOCK:
        return ast.parse(source, filename)

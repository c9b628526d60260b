"""What grading a class writes: ``grades.csv`` (one ``Row`` per student; cells a
spreadsheet would run escaped) and one feedback notebook per student (the executed notebook,
no hidden test in it, after a table of the points and why any were lost).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from typing import TYPE_CHECKING

from course_utils.files import write_atomic
from grader.cells import HIDDEN_TESTS, SOURCE, is_test_cell, points

if TYPE_CHECKING:  # for the reader: a Result is what grader.run.grade returns
    from grader.run import Result

GRADES_CSV = "grades.csv"
FEEDBACK = "feedback"


@dataclass
class Row:
    """One line of grades.csv."""
    student: str
    assignment: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    max_total: float = 0.0
    flags: list[str] = field(default_factory=list)
    error: str = ""


def grades_csv(rows: list[Row]) -> str:
    """The CSV text: student, assignment, one column of points per question (``assignment:
    question`` when several assignments are in the folder), total, max, flags, error."""
    names = sorted({r.assignment for r in rows if r.assignment})
    questions = []
    for name in names:
        source = nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)
        questions += [(name, gid) for gid in points(source)]
    header = [gid if len(names) == 1 else f"{name}:{gid}" for name, gid in questions]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", "assignment", *header, "total", "max", "flags", "error"])
    for r in sorted(rows, key=lambda r: r.student):
        cells = [f"{r.scores[gid]:g}" if r.assignment == name and gid in r.scores else ""
                 for name, gid in questions]
        graded = bool(r.assignment)
        writer.writerow([spreadsheet_safe(r.student), r.assignment, *cells, f"{r.total:g}" if graded else "",
                         f"{r.max_total:g}" if graded else "", spreadsheet_safe("; ".join(r.flags)),
                         spreadsheet_safe(r.error)])
    return out.getvalue()


def spreadsheet_safe(text: str) -> str:
    """``text`` with a leading ``'`` when a spreadsheet would read it as a formula (it starts
    with =, +, -, @, a tab or a carriage return)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def write_feedback(student: str, result: "Result", feedback_dir: Path) -> None:
    """``feedback_dir/<student>.ipynb``: the executed notebook (hidden tests and probes
    removed) after a table of the points and why any were lost."""
    feedback = result.executed
    for cell in feedback.cells:
        if is_test_cell(cell):
            cell.source = HIDDEN_TESTS.sub("", cell.source)
    summary = [f"# Feedback: {student}, {result.assignment}", "",
               f"**{result.total:g} / {result.max_total:g} points**"
               + (f" (flags: {'; '.join(result.flags)})" if result.flags else ""), "",
               "| question | points | why points were lost |", "|---|---:|---|"]
    for gid, (score, most) in result.scores.items():
        why = result.errors.get(gid, "").replace("|", "\\|").replace("\n", " ")
        summary.append(f"| {gid} | {score:g} / {most:g} | {why} |")
    summary += [""] + [f"- answer check: {line}" for line in result.findings]
    feedback.cells.insert(0, nbformat.v4.new_markdown_cell("\n".join(summary)))
    write_atomic(feedback_dir / f"{student}.ipynb", (nbformat.writes(feedback) + "\n").encode("utf-8"))

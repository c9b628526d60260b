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
from grader.cells import HIDDEN_TESTS, SOURCE, is_test_cell, parse_python, points
from grader.checkpoints import NEAR_REFERENCE_OUTPUTS, models_distance
from grader.inside import said_as_the_graders

if TYPE_CHECKING:  # for the reader: a Result is what grader.run.grade returns
    from grader.run import Result

GRADES_CSV = "grades.csv"
PAIRS_CSV = "similar_pairs.csv"  # pairs of submissions for the lecturer to compare (copying)
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
    review: list[str] = field(default_factory=list)   # what the reading of the answers found, for a person
    answers: str = ""                                 # the answer cells' code, as the grader read it
    models: dict = field(default_factory=dict)        # grade_id -> a sample of the trained model's outputs


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
    writer.writerow(["student", "assignment", *header, "total", "max", "flags", "error", "review"])
    for r in sorted(rows, key=lambda r: r.student):
        cells = [f"{r.scores[gid]:g}" if r.assignment == name and gid in r.scores else ""
                 for name, gid in questions]
        graded = bool(r.assignment)
        writer.writerow([spreadsheet_safe(r.student), r.assignment, *cells, f"{r.total:g}" if graded else "",
                         f"{r.max_total:g}" if graded else "", spreadsheet_safe("; ".join(r.flags)),
                         spreadsheet_safe(r.error), spreadsheet_safe("; ".join(r.review))])
    return out.getvalue()


#: answer code this alike (``difflib`` ratio of the normalised code, comments and layout gone)
#: is listed for review; two students who solved the same assignment independently rarely pass 0.9
SIMILAR_CODE = 0.9
MIN_CODE_CHARS = 400  # shorter answers (stubs, one-liners) say nothing about copying
#: two trained models whose outputs are nearer than this (grader.checkpoints.models_distance) are
#: one model: the distance below which a handed-in model counts as the reference one
SAME_MODEL = NEAR_REFERENCE_OUTPUTS


def normalised_code(sources: list[str]) -> str:
    """The answer cells' code without comments, docstrings or layout (``ast.unparse``); the
    text as it is where it does not parse (or is nested too deeply to be written back)."""
    import ast
    out = []
    for text in sources:
        try:
            tree = parse_python(text)
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                    body[0] = ast.Pass()
            out.append(ast.unparse(tree))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            out.append(text)
    return "\n".join(out)


def similar_pairs(feedback_dir: Path, rows: list[Row]) -> list[tuple[str, str, float | None, float | None]]:
    """(student, student, answer code similarity, trained model distance) of the pairs of graded
    rows of one assignment whose answer code is at least ``SIMILAR_CODE`` alike, or whose trained
    models agree far more closely than two independent trainings do (``models_distance`` under
    ``SAME_MODEL`` on every trained-model question both handed in: two students' runs differ by
    0.05-0.76, a copy with 1 % noise by under 0.03); the pairs with a shared model first, then the
    most alike code. A number that does not count is None (code too short; no model in common)."""
    import difflib
    graded = [r for r in rows if r.assignment]
    # compared line by line (the normalised code has one statement per line): characters made it
    # quadratic in the code's length per pair, minutes for a class of 30 near-identical answers
    lines = {r.student: r.answers.splitlines() for r in graded}
    found = []
    for i, a in enumerate(graded):
        for b in graded[i + 1:]:
            if a.assignment != b.assignment:
                continue
            ratio = None
            if min(len(a.answers), len(b.answers)) >= MIN_CODE_CHARS:
                m = difflib.SequenceMatcher(None, lines[a.student], lines[b.student], autojunk=False)
                if m.real_quick_ratio() >= SIMILAR_CODE and m.quick_ratio() >= SIMILAR_CODE:
                    ratio = round(m.ratio(), 3)
            shared = sorted(set(a.models) & set(b.models))
            distance = max((models_distance(a.models[g], b.models[g]) for g in shared), default=None)
            same_model = distance is not None and distance < SAME_MODEL
            if same_model or (ratio is not None and ratio >= SIMILAR_CODE):
                found.append((a.student, b.student, ratio if ratio is not None and ratio >= SIMILAR_CODE else None,
                               round(distance, 4) if same_model else None))
    return sorted(found, key=lambda x: (x[3] is None, x[3] or 0.0, -(x[2] or 0.0)))


def pairs_csv(pairs: list[tuple[str, str, float | None, float | None]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student_a", "student_b", "answer_code_similarity", "trained_model_distance"])
    for a, b, ratio, distance in pairs:
        writer.writerow([spreadsheet_safe(a), spreadsheet_safe(b), "" if ratio is None else f"{ratio:.3f}",
                         "" if distance is None else f"{distance:.4f}"])
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
        for output in cell.get("outputs", []):   # a traceback through the grader's own check (a refused
            if output.get("output_type") == "error":   # operation) names it as the grader's check, not its code
                output["traceback"] = [said_as_the_graders(line) for line in output["traceback"]]
            elif output.get("output_type") == "stream":   # (a thread's traceback is printed to stderr)
                output["text"] = said_as_the_graders(output.get("text", ""))
    summary = [f"# Feedback: {student}, {result.assignment}", "",
               f"**{result.total:g} / {result.max_total:g} points**"
               + (f" (flags: {'; '.join(result.flags)})" if result.flags else ""), "",
               "| question | points | why points were lost |", "|---|---:|---|"]
    for gid, (score, most) in result.scores.items():
        why = result.errors.get(gid, "").replace("|", "\\|").replace("\n", " ")
        summary.append(f"| {gid} | {score:g} / {most:g} | {why} |")
    summary += [""] + [f"- for the lecturer to review: {line}" for line in result.findings]
    feedback.cells.insert(0, nbformat.v4.new_markdown_cell("\n".join(summary)))
    write_atomic(feedback_dir / f"{student}.ipynb", (nbformat.writes(feedback) + "\n").encode("utf-8"))

"""Assembly: a submission read (or refused, saying why), recognised, and its answer cells
put into the lecturer's source notebook by grade_id; then read by ``grader.answer_checks``
(what an answer may not use) and the questions on the trained model found.

The grader trusts nothing of a submission but its answer cells: every other cell run is
the lecturer's copy.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from grader import answer_checks
from grader.cells import SKIP_TRAINING_ID, AssignmentError, grade_id, is_answer_cell, is_test_cell
from grader.release import student_version

MAX_NOTEBOOK_BYTES = 32 * 2**20     # a submitted notebook


def read_submission(path) -> "nbformat.NotebookNode":
    """The submitted notebook, or ``AssignmentError`` saying why it is not one."""
    path = Path(path)
    if not path.exists():
        raise AssignmentError(f"submission {path} does not exist")
    if path.is_dir():
        raise AssignmentError(f"submission {path} is a folder; give the notebook file (.ipynb) in it")
    if path.suffix != ".ipynb":
        raise AssignmentError(f"submission {path} is not a Jupyter notebook (expected a .ipynb file)")
    if path.is_symlink():
        raise AssignmentError(f"submission {path} is a symbolic link (expected the notebook file itself)")
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise AssignmentError(f"submission {path} is {path.stat().st_size / 2**20:.0f} MiB (expected at most "
                              f"{MAX_NOTEBOOK_BYTES // 2**20} MiB: clear the outputs before handing it in)")
    try:
        return nbformat.read(path, as_version=4)
    except Exception as err:  # nbformat raises several kinds (JSON, validation, encoding)
        raise AssignmentError(f"submission {path} is not a readable Jupyter notebook: "
                              f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None


def identify(nb, sources: dict[str, Path]) -> str:
    """Name of the assignment whose answer and test cells (by grade_id) ``nb`` shares most."""
    ids = {grade_id(c) for c in nb.cells if grade_id(c)}
    overlap = {}
    for name, path in sources.items():
        src = nbformat.read(path, as_version=4)
        overlap[name] = len(ids & {grade_id(c) for c in src.cells if grade_id(c)})
    best = max(overlap, key=overlap.get)
    if overlap[best] == 0:
        raise AssignmentError("the submission is not one of the assignments: none of its cells has "
                              "the nbgrader grade_id of a cell of " + ", ".join(sorted(sources))
                              + " (was it made from assignments/release/?)")
    return best


@dataclass
class Assembled:
    """The notebook that ``grade`` runs and what was taken from the submission."""
    nb: "nbformat.NotebookNode"
    answers: list[str] = field(default_factory=list)   # grade_ids taken from the student
    missing: list[str] = field(default_factory=list)   # answer cells the student deleted
    ignored: int = 0                                   # student code cells not run


def assemble(submission, source) -> Assembled:
    """The source notebook (visible and hidden tests, read-only cells) with the student's
    answer cells put in by grade_id; answers the student deleted become stubs; the
    training flag is set to ``skip_training = True``; outputs cleared."""
    from nbgrader.preprocessors import ClearSolutions
    student = {grade_id(c): c for c in submission.cells if is_answer_cell(c)}
    stubbed = ClearSolutions(enforce_metadata=True).preprocess(copy.deepcopy(source), {})[0]
    stubs = {grade_id(c): c for c in stubbed.cells if is_answer_cell(c)}
    nb = copy.deepcopy(source)
    out = Assembled(nb)
    for i, cell in enumerate(nb.cells):
        gid = grade_id(cell)
        if is_answer_cell(cell):
            if gid in student and student[gid].cell_type == cell.cell_type:
                cell.source = student[gid].source
                out.answers.append(gid)
            else:
                cell.source = stubs[gid].source
                out.missing.append(gid)
        if gid == SKIP_TRAINING_ID:
            cell.source = "skip_training = True  # set by the grader: load the checkpoint, do not train"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    # the student's own code outside answer cells (added, or read-only cells edited) is not run
    known = {c.source for c in source.cells} | {c.source for c in student_version(source).cells}
    out.ignored = sum(1 for c in submission.cells if c.cell_type == "code" and c.source.strip()
                      and not is_answer_cell(c) and grade_id(c) != SKIP_TRAINING_ID
                      and c.source not in known)
    return out


def answer_rules(source, references=None) -> answer_checks.Rules:
    """The reference answers of an assignment (see ``grader.answer_checks``): the course names the
    sandbox replaces by tripwires (``references``, default: those the solutions define, see
    ``grader.student_side.reference_names``) and ``metadata.course.reference_answers``."""
    from grader import student_side
    listed = source.metadata.get("course", {}).get("reference_answers", [])
    if references is None:
        references = student_side.reference_names(source)
    return answer_checks.Rules(listed, references)


def answer_names(source) -> set[str]:
    """The names the lecturer's solutions bind (what the answer cells are expected to define)."""
    names = set()
    for cell in source.cells:
        tree = answer_checks.parse(cell.source) if is_answer_cell(cell) else None
        if tree is not None:
            names |= {n for stmt in tree.body for n in answer_checks.bound_names(stmt)}
    return names


def check_answers(nb, source, references=None) -> answer_checks.Report:
    """The findings of the answer cells of ``nb`` (the notebook the grader runs)."""
    return answer_checks.check(nb.cells, answer_rules(source, references), is_answer=is_answer_cell,
                               is_test=is_test_cell, grade_id=grade_id, answer_names=answer_names(source))


def answer_check_summary(nb, source, references=None) -> dict:
    """``check_answers`` as plain data: flags, zeroed (test grade_id -> reason), findings."""
    report = check_answers(nb, source, references)
    return {"flags": report.flags, "zeroed": report.zeroed, "findings": [f.reason() for f in report.findings]}


def trained_model_questions(source) -> list[str]:
    """grade_ids of the test cells that grade the trained model: those after the read-only
    cell that reads ``skip_training`` (it trains the model or loads the checkpoint)."""
    cells = source.cells
    for i, cell in enumerate(cells):
        tree = answer_checks.parse(cell.source) if cell.cell_type == "code" else None
        if tree is not None and not is_answer_cell(cell) and "skip_training" in answer_checks.loaded_names(tree):
            return [grade_id(c) for c in cells[i:] if is_test_cell(c)]
    return []

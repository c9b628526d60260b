"""A folder of submissions graded: several at a time, each in a sandbox of its own on a CPU
of its own, each stopped at a time limit; whatever goes wrong with one is that row's error,
never the class's (only a machine that cannot sandbox stops the batch).
"""
from __future__ import annotations

import os
import queue
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from course_utils.files import write_atomic
from grader import sandbox as grader_sandbox
from grader.assemble import identify, read_submission
from grader.cells import ROOT, SOURCE, AssignmentError, grade_id, is_answer_cell, source_notebooks
from grader.report import (FEEDBACK, GRADES_CSV, PAIRS_CSV, Row, grades_csv, normalised_code, pairs_csv,
                           similar_pairs, write_feedback)
from grader.run import grade
from grader.sandbox import NO_SANDBOX_FLAG, SandboxError

DEFAULT_TIME_LIMIT = 300  # seconds per submission


def submissions(folder: Path) -> list[tuple[str, Path]]:
    """(student, entry) for every submission in ``folder``: a notebook ``name.ipynb`` (or any
    other file: it gets a row with an error) or a subfolder ``name/`` with the notebook and
    its checkpoint. Hidden entries and what grading writes (grades.csv, feedback/) are skipped."""
    folder = Path(folder)
    entries = [p for p in sorted(folder.iterdir()) if not p.name.startswith(".")
               and p.name not in (GRADES_CSV, FEEDBACK, PAIRS_CSV)]
    seen, out = {}, []
    for entry in entries:
        student = entry.name if entry.is_dir() else entry.stem
        if student in seen:
            raise AssignmentError(f"two submissions for {student!r} in {folder}: {seen[student].name} and "
                                  f"{entry.name} (one notebook per student: name.ipynb or name/)")
        seen[student] = entry
        out.append((student, entry))
    return out


def _prepare(entry: Path, workdir: Path) -> Path:
    """Copy a submission into ``workdir`` (grading never touches the student's files) and
    return the notebook to grade; ``AssignmentError`` when a folder holds no single notebook."""
    if entry.is_symlink():
        raise AssignmentError(f"{entry.name} is a symbolic link (expected the file or folder itself)")
    if entry.is_dir():
        notebooks = sorted(p for p in entry.glob("*.ipynb"))
        if len(notebooks) != 1:
            raise AssignmentError(f"the folder {entry.name}/ holds {len(notebooks)} notebooks "
                                  "(expected exactly one .ipynb)")
        for item in [notebooks[0], *sorted(entry.glob("*.pt"))]:
            if item.is_symlink() or not item.is_file():  # a link could point at any file the grader may read
                raise AssignmentError(f"{entry.name}/{item.name} is a symbolic link or not a file "
                                      "(expected the file itself)")
            shutil.copy(item, workdir / item.name)
        return workdir / notebooks[0].name
    shutil.copy(entry, workdir / entry.name)  # a notebook alone: no checkpoint comes with it
    return workdir / entry.name


def _grade_one(student: str, entry: Path, feedback_dir: Path, time_limit: float, timeout: int,
               sandbox: bool = True, hide: list[Path] = (), cpus: "queue.Queue | None" = None,
               assignment: str | None = None) -> Row:
    """Grade one submission (its code in a sandbox of its own) and write its feedback
    notebook; whatever goes wrong (any ``BaseException``: ``SystemExit`` and
    ``KeyboardInterrupt`` included) becomes this row's error, never the class's."""
    row = Row(student, flags=[] if sandbox else [NO_SANDBOX_FLAG])
    try:
        with tempfile.TemporaryDirectory(prefix="submission-") as tmp:
            tmp = Path(tmp)
            (tmp / "in").mkdir()
            try:
                notebook = _prepare(entry, tmp / "in")
                cpu = cpus.get() if cpus is not None else None
                try:
                    result = grade(notebook, timeout=timeout, time_limit=time_limit, sandbox=sandbox, hide=hide,
                                   cpu=cpu, assignment=assignment)
                finally:
                    if cpus is not None:
                        cpus.put(cpu)
            except AssignmentError as err:
                row.error = str(err).replace(str(tmp / "in") + os.sep, "")
                return row
            row.assignment = result.assignment
            row.scores = {k: s for k, (s, _) in result.scores.items()}
            row.total, row.max_total, row.flags = result.total, result.max_total, result.flags
            row.review = list(result.findings)
            row.models = dict(result.models)
            row.answers = normalised_code([c.source for c in result.assembled.nb.cells
                                           if is_answer_cell(c) and grade_id(c) in result.assembled.answers])
            write_feedback(student, result, feedback_dir)
    except BaseException as err:  # noqa: BLE001  (one submission never stops the class)
        row.assignment, row.scores, row.total = "", {}, 0.0
        text = str(err).strip().splitlines()
        row.error = f"could not be graded: {type(err).__name__}: {text[0][:200] if text else ''}"
        if not sandbox and NO_SANDBOX_FLAG not in row.flags:
            row.flags = [*row.flags, NO_SANDBOX_FLAG]
    return row


def _printable(name: str, most: int = 40) -> str:
    """A student's name (a file name) as the terminal may show it: no control characters."""
    return "".join(c if c.isprintable() else "?" for c in name)[:most]


def class_assignment(todo: list[tuple[str, Path]], sources: dict[str, Path]) -> str | None:
    """The assignment most submissions of the folder are (read as data only: the answer cells'
    grade_ids); None when none is."""
    from collections import Counter
    found = Counter()
    for _, entry in todo:
        try:
            notebooks = sorted(entry.glob("*.ipynb")) if entry.is_dir() else [entry]
            if len(notebooks) == 1 and not notebooks[0].is_symlink():
                found[identify(read_submission(notebooks[0]), sources)] += 1
        except AssignmentError:
            pass
    return found.most_common(1)[0][0] if found else None


def grade_folder(folder, workers: int | None = None, time_limit: float = DEFAULT_TIME_LIMIT,
                 timeout: int = 900, source_dir: Path = SOURCE, sandbox: bool = True,
                 assignment: str | None = None, progress: bool = True) -> tuple[Path, list[Row]]:
    """Grade every submission in ``folder`` (see ``submissions``), ``workers`` at a time (default:
    the usable cores), and write ``folder/grades.csv`` and ``folder/feedback/<student>.ipynb``.
    The class is one assignment: ``assignment``, or the one most submissions are; a notebook
    of another is that row's error. A submission that cannot be graded gets a row with an
    error; nothing stops the batch, and the CSV is written whatever happens (a row not graded
    says so). Each submission runs in a sandbox of its own (``sandbox=False``: trusted
    submissions only; every row is flagged); a machine that cannot start one is found before
    the first submission (``SandboxError``). ``progress``: a bar on stderr (student n of N, time
    left)."""
    folder = Path(folder)
    if sandbox:
        grader_sandbox.bwrap()
    if not folder.is_dir():
        raise AssignmentError(f"{folder} is not a folder of submissions")
    if Path(source_dir).resolve() != SOURCE.resolve():
        raise AssignmentError("grading a folder uses the assignments in assignments/source/ "
                              "(or in COURSE_ASSIGNMENTS_SOURCE)")
    todo = submissions(folder)
    if not todo:
        raise AssignmentError(f"no submission in {folder}: expected name.ipynb files or name/ folders")
    sources = source_notebooks(source_dir)
    if assignment is not None and assignment not in sources:
        raise AssignmentError(f"no assignment {assignment!r} (expected one of {', '.join(sorted(sources))})")
    if sandbox:
        grader_sandbox.preflight(ROOT)  # the one failure that stops a class: no sandbox at all
    assignment = assignment or class_assignment(todo, sources)
    workers = workers or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                             else os.cpu_count() or 1)
    cpus = queue.Queue()  # each submission runs on one CPU of its own (while there are enough)
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    for i in range(workers):
        cpus.put(usable[i % len(usable)] if usable and workers <= len(usable) else None)
    rows: dict[str, Row] = {}
    path = folder / GRADES_CSV
    try:
        # progress on stderr: student n of N, the time so far and the time left (tqdm's estimate
        # from the submissions graded so far), the last one graded
        with ThreadPoolExecutor(max_workers=workers) as pool, \
                tqdm(total=len(todo), desc=f"grading {assignment or 'the class'}", unit="student",
                     file=sys.stderr, disable=not progress, dynamic_ncols=True) as bar:
            futures = {pool.submit(_grade_one, student, entry, folder / FEEDBACK, time_limit, timeout, sandbox,
                                   [folder], cpus, assignment): student for student, entry in todo}
            for future in as_completed(futures):
                row = rows[futures[future]] = future.result()
                bar.set_postfix_str(f"{_printable(row.student)}: {'error' if row.error else f'{row.total:g}/{row.max_total:g}'}",
                                    refresh=False)
                bar.update()
    finally:  # interrupted or not, every student has a row
        done = [rows.get(student) or Row(student, error="not graded: grading was stopped before this submission")
                for student, _ in todo]
        write_atomic(path, grades_csv(done).encode("utf-8"))
        pairs = similar_pairs(folder / FEEDBACK, done)
        write_atomic(folder / PAIRS_CSV, pairs_csv(pairs).encode("utf-8"))
    return path, done

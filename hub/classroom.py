"""Assignments out and back around `make grade` (docs/LECTURERS.md): nbgrader's collected
submissions into a grading folder, the grader's feedback back to each student through
nbgrader's exchange, and the grades as CSV files that Moodle and Canvas import.

Usage (the lecturer, in a shell where `nbgrader` runs, e.g. with the course's venv active):
  python hub/classroom.py collect a1_bahdanau --course ~/course --to ~/grading/a1_bahdanau
  make grade SUBMISSION=~/grading/a1_bahdanau/
  python hub/classroom.py return a1_bahdanau --graded ~/grading/a1_bahdanau --course ~/course
  python hub/classroom.py lms ~/grading/a1_bahdanau/grades.csv

`make grade` reads a folder of <student>/ subfolders (notebook and checkpoint) and writes
grades.csv and feedback/<student>.ipynb; this tool only moves files to and from that form.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: what nbgrader adds to a submission and the grader does not read
NBGRADER_FILES = {"timestamp.txt", "submission_secret.txt"}


def collect(assignment: str, course: Path, to: Path) -> list[str]:
    """Each student's collected submission (``course/submitted/<student>/<assignment>/``, as
    `nbgrader collect` leaves it) copied into ``to/<student>/``: the notebook and checkpoint,
    not nbgrader's own files. ``to`` should lie outside any git repository. Returns the students."""
    submitted = sorted(course.glob(f"submitted/*/{assignment}"))
    if not submitted:
        raise SystemExit(f"nothing in {course}/submitted/*/{assignment}: run `nbgrader collect {assignment}` first")
    to.mkdir(parents=True, exist_ok=True)
    students = []
    for folder in submitted:
        student = folder.parent.name
        target = to / student
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(folder, target, ignore=lambda d, names: [n for n in names if n in NBGRADER_FILES
                                                                   or n == ".ipynb_checkpoints"])
        students.append(student)
    print(f"{len(students)} submissions of {assignment} in {to}/ (next: make grade SUBMISSION={to}/)")
    return students


def _html(notebook: Path) -> str:
    from nbconvert import HTMLExporter
    import nbformat
    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    return body


def stage_feedback(assignment: str, graded: Path, course: Path) -> list[str]:
    """The grader's ``graded/feedback/<student>.ipynb`` as nbgrader's release_feedback reads it:
    ``course/feedback/<student>/<assignment>/<assignment>.html`` beside the submission's
    timestamp.txt and submission_secret.txt (which tie it to what the student handed in), and
    the notebook itself. Returns the students staged."""
    staged = []
    for notebook in sorted((graded / "feedback").glob("*.ipynb")):
        student = notebook.stem
        submission = course / "submitted" / student / assignment
        if not (submission / "timestamp.txt").exists():
            print(f"{student}: no nbgrader submission in {submission}; hand {notebook} back yourself")
            continue
        target = course / "feedback" / student / assignment
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{assignment}.html").write_text(_html(notebook), encoding="utf-8")
        for name in NBGRADER_FILES:
            if (submission / name).exists():
                shutil.copy2(submission / name, target / name)
        staged.append(student)
    return staged


def return_feedback(assignment: str, graded: Path, course: Path, release: bool = True) -> list[str]:
    """Stage the feedback (:func:`stage_feedback`) and run `nbgrader release_feedback` in
    ``course``: each student then fetches it (JupyterLab's Assignments tab, or
    `nbgrader fetch_feedback`) into ``~/<assignment>/feedback/<time>/``."""
    students = stage_feedback(assignment, graded, course)
    if release and students:
        nbgrader = shutil.which("nbgrader") or str(Path(sys.executable).parent / "nbgrader")
        subprocess.run([nbgrader, "release_feedback", assignment], cwd=course, check=True)
    print(f"feedback of {assignment} released to {len(students)} students")
    return students


def lms(grades: Path) -> tuple[Path, Path]:
    """grades.csv (the grader's: one row per student) as two imports: ``grades-moodle.csv``
    (``username`` and the assignment's total: Moodle's Grades > Import > CSV file) and
    ``grades-canvas.csv`` (Student, ID, SIS User ID, SIS Login ID, Section and the assignment:
    Canvas's Gradebook > Import, matched on the login). A row with an error gets no grade and is
    named on stderr."""
    with open(grades, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{grades}: no rows")
    assignment = rows[0]["assignment"]
    moodle, canvas = grades.with_name("grades-moodle.csv"), grades.with_name("grades-canvas.csv")
    with open(moodle, "w", newline="", encoding="utf-8") as m, open(canvas, "w", newline="", encoding="utf-8") as c:
        mw, cw = csv.writer(m), csv.writer(c)
        mw.writerow(["username", assignment])
        cw.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment])
        for row in rows:
            if row.get("error"):
                print(f"{row['student']}: not graded ({row['error']}); no grade written", file=sys.stderr)
                continue
            total = row["total"]
            mw.writerow([row["student"], total])
            cw.writerow([row["student"], "", "", row["student"], "", total])
    print(f"{moodle} and {canvas}")
    return moodle, canvas


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect", help="nbgrader's submitted/ into a folder for `make grade`")
    p.add_argument("assignment")
    p.add_argument("--course", type=Path, default=Path.cwd(), help="the nbgrader course directory")
    p.add_argument("--to", type=Path, help="default: ~/grading/<assignment>")
    p = sub.add_parser("return", help="the grader's feedback back through nbgrader's exchange")
    p.add_argument("assignment")
    p.add_argument("--graded", type=Path, required=True, help="the folder `make grade` graded")
    p.add_argument("--course", type=Path, default=Path.cwd())
    p.add_argument("--no-release", action="store_true", help="stage only; run release_feedback yourself")
    p = sub.add_parser("lms", help="grades.csv as Moodle and Canvas imports")
    p.add_argument("grades", type=Path)
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.assignment, args.course, args.to or Path(os.path.expanduser("~/grading")) / args.assignment)
    elif args.command == "return":
        return_feedback(args.assignment, args.graded, args.course, not args.no_release)
    else:
        lms(args.grades)
    return 0


if __name__ == "__main__":
    sys.exit(main())

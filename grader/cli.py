"""Home assignments: write the student versions and grade a submission, offline.

Usage:
    python -m grader release [--force]          # what `make assignments` runs
    python -m grader grade SUBMISSION.ipynb     # what `make grade` runs
    python -m grader grade FOLDER/              # a class: FOLDER/grades.csv, FOLDER/similar_pairs.csv
    python -m grader grade FOLDER/ --assignment a3_bpe   # the class's assignment, named

The modules of the package and how a submission is graded: ``grader/__init__.py``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import nbformat

from grader.batch import DEFAULT_TIME_LIMIT, grade_folder
from grader.cells import RELEASE, AssignmentError, shown
from grader.release import MANIFEST, release
from grader.report import FEEDBACK, grades_csv
from grader.run import GRADING_ENV, grade
from grader.sandbox import NO_SANDBOX_FLAG, SandboxError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rel = sub.add_parser("release", help="write the student versions to assignments/release/")
    rel.add_argument("--force", action="store_true", help="overwrite release files changed by hand")
    gr = sub.add_parser("grade", help="grade a submitted notebook, or every submission in a folder")
    gr.add_argument("submission", nargs="?", default="",
                    help="the student's .ipynb, or a folder of name.ipynb files and name/ folders")
    gr.add_argument("--checkpoint", default="auto", choices=("auto", "submitted", "reference"),
                    help="which trained model the training questions are graded with (one notebook)")
    gr.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    gr.add_argument("--time-limit", type=float, default=None,
                    help=f"seconds per submission (default for a folder: {DEFAULT_TIME_LIMIT})")
    gr.add_argument("--workers", type=int, default=None, help="submissions graded at once (a folder)")
    gr.add_argument("--assignment", default=None,
                    help="the assignment expected (default for a folder: the one most notebooks are); "
                         "a notebook of another is that row's error")
    gr.add_argument("--json", type=Path, help="also write the points as JSON here (one notebook)")
    gr.add_argument("--executed", type=Path, help="also write the executed notebook here (one notebook)")
    gr.add_argument("--no-sandbox", action="store_true",
                    help="run the students' code without bubblewrap (trusted submissions only; "
                         f"every row is flagged '{NO_SANDBOX_FLAG}')")
    args = parser.parse_args(argv)
    try:
        if args.command == "release":
            for line in release(force=args.force):
                print(line)
            print(f"manifest: {shown(RELEASE / MANIFEST)}")
            return 0
        if not args.submission:
            raise AssignmentError("no submission given: make grade SUBMISSION=path/to/notebook.ipynb "
                                  "(or SUBMISSION=path/to/folder/)")
        import torch
        # the grader's own torch work (reference answers, trained-model verdicts) on one thread,
        # as the submissions run: a folder's threads share the cores, and on a busy 2-core
        # machine one reference answer took 38 s on the default threads against 2.5 s on one
        torch.set_num_threads(int(GRADING_ENV["COURSE_NUM_THREADS"]))
        if Path(args.submission).is_dir():
            start = time.perf_counter()
            path, rows = grade_folder(args.submission, args.workers, args.time_limit or DEFAULT_TIME_LIMIT,
                                      args.timeout, sandbox=not args.no_sandbox, assignment=args.assignment)
            print(grades_csv(rows), end="")
            print(f"graded {len(rows)} submission(s) in {time.perf_counter() - start:.0f} s: {shown(path)}, "
                  f"feedback in {shown(path.parent / FEEDBACK)}/")
            return 0
        result = grade(args.submission, timeout=args.timeout, checkpoint=args.checkpoint,
                       time_limit=args.time_limit, sandbox=not args.no_sandbox,
                       hide=[Path(args.submission).resolve().parent], assignment=args.assignment)
        print(f"grading {args.submission}")
        print(result.report())
        if args.json:
            args.json.write_text(json.dumps(result.as_dict(), indent=1) + "\n")
        if args.executed:
            nbformat.write(result.executed, args.executed)
        return 0
    except (AssignmentError, SandboxError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

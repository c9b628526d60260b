"""Home assignments: write the student versions and grade a submission, offline.

Usage:
    python -m grader release [--force]          # what `make assignments` runs
    python -m grader grade SUBMISSION.ipynb     # what `make grade` runs
    python -m grader grade FOLDER/              # a class: FOLDER/grades.csv

Each assignment is one nbgrader *source* notebook, ``assignments/source/<name>/<name>.ipynb``,
whose cells carry nbgrader metadata (``grade``, ``solution``, ``locked``, ``grade_id``,
``points``): answer cells hold the solution between ``### BEGIN SOLUTION`` and ``### END
SOLUTION``; test cells hold visible ``assert``s and, between ``### BEGIN HIDDEN TESTS`` and
``### END HIDDEN TESTS``, the hidden ones. The notebooks therefore also work in a full
nbgrader course (``nbgrader generate_assignment`` / ``autograde``).

``release`` runs nbgrader's own preprocessors (ClearSolutions, ClearHiddenTests,
ClearOutput, LockCells, ComputeChecksums), which need no course directory or database,
and writes ``assignments/release/<name>/<name>.ipynb``. ``assignments/release/MANIFEST.sha256``
records what it wrote; a release file that differs from it (a student or a lecturer edited
it) is never overwritten: the command names the file and stops, unless ``--force``.

``grade`` trusts nothing of the submission but its answer cells: it takes the source
notebook (hidden tests included), puts the student's answer cells into it by
``grade_id``, sets ``skip_training = True`` (the model is loaded from a checkpoint instead
of trained: ``<checkpoint>.pt`` beside the submission if the student handed one in, else
the reference one shipped in ``assignments/source/<name>/``, and the questions on the
trained model score 0), runs it offline with nbclient (fast profile, one CPU thread) in a
bubblewrap sandbox of its own (``grader.sandbox``: no view of the repository, the
other submissions or the grader; limits on memory, processes, files, output and time).
The questions an assignment's ``checks.py`` lists are judged outside the sandbox
(``grader.verdicts``): their test cells run only their visible part, a probe calls
the student's functions on the grader's inputs and sends back plain data, and the grader
compares it with the reference answers it computes itself. The other test cells count as
nbgrader counts them: a test cell that raises (or writes to stderr) scores 0, one that
runs scores its points. Before that, ``answer_checks`` reads the answer cells: an answer
cell that uses a reference answer (``course_utils`` beyond what the read-only cells hand out,
or a library implementation the source's metadata lists), imports a module outside its
allow-list, hides code or monkeypatches what the tests use costs its question and every later one.
A folder is graded several submissions at a time, each in its sandbox, each stopped at a
time limit; whatever goes wrong with one is that row's error; the result is ``grades.csv``
(cells a spreadsheet would run escaped) and one feedback notebook per student (no hidden
test in it). A handed-in checkpoint with the reference weights, or one whose model computes
the reference model's function (``output_distance`` under ``NEAR_REFERENCE_OUTPUTS``: noise
added, units permuted, a temperature), scores 0 on its question.

Leaves out: the nbgrader gradebook database, late penalties, manual grading, feedback
HTML (use a full nbgrader course for those; the notebooks are compatible).
"""

from __future__ import annotations

import argparse
import copy
import csv
import hashlib
import io
import json
import os
import queue
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

import course_utils  # KERNEL_ENV
from course_utils.files import write_atomic

from grader import answer_checks
from grader import sandbox as grader_sandbox
from grader import verdicts as grader_verdicts
from grader.sandbox import NO_SANDBOX_FLAG, SandboxError, TIME_LIMIT_ERROR  # noqa: F401  (names of the grader's API)

ROOT = Path(__file__).resolve().parent.parent
# the source notebooks (solutions, hidden tests, checks.py, reference checkpoints); a lecturer
# grading for credit keeps a private copy and points COURSE_ASSIGNMENTS_SOURCE at it
SOURCE = Path(os.environ.get("COURSE_ASSIGNMENTS_SOURCE") or ROOT / "assignments" / "source").resolve()
RELEASE = ROOT / "assignments" / "release"
MANIFEST = "MANIFEST.sha256"
SKIP_TRAINING_ID = "skip_training"  # grade_id of the cell that holds the flag
# grading runs on the CPU on every machine: a lecturer's GPU would otherwise be picked outside the
# sandbox (the sandbox shows no GPU) and the grader's CPU reference models would meet it
GRADING_ENV = {"COURSE_PROFILE": "fast", "COURSE_DEVICE": "cpu", "COURSE_NUM_THREADS": "1",
               **course_utils.KERNEL_ENV}


class AssignmentError(Exception):
    """Bad input to ``release`` or ``grade``: the message says what was expected."""


# --------------------------------------------------------------------------------------
# Source notebooks
# --------------------------------------------------------------------------------------

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


def checkpoints(source_dir: Path, name: str) -> list[Path]:
    """The reference checkpoints (``*.pt``) shipped beside a source notebook."""
    return sorted((Path(source_dir) / name).glob("*.pt"))


def points(nb) -> dict[str, float]:
    """grade_id -> points of every test cell, in notebook order."""
    return {grade_id(c): float(nbgrader_meta(c)["points"]) for c in nb.cells if is_test_cell(c)}


# --------------------------------------------------------------------------------------
# Release: the student version, made by nbgrader's own preprocessors
# --------------------------------------------------------------------------------------

def student_version(nb):
    """A copy of source notebook ``nb`` with solutions replaced by stubs (``raise
    NotImplementedError()``), hidden tests removed, outputs cleared, test and read-only
    cells locked and nbgrader checksums recorded."""
    from nbgrader.preprocessors import (ClearHiddenTests, ClearOutput, ClearSolutions,
                                        ComputeChecksums, LockCells)
    nb = copy.deepcopy(nb)
    resources: dict = {}
    for pre in (ClearSolutions(enforce_metadata=True), ClearHiddenTests(enforce_metadata=True),
                ClearOutput(), LockCells(), ComputeChecksums()):
        nb, resources = pre.preprocess(nb, resources)
    return nb


def render(nb) -> bytes:
    """The bytes of a notebook file (stable: the same notebook gives the same bytes)."""
    return (nbformat.writes(nb) + "\n").encode("utf-8")


def release_files(source_dir: Path = SOURCE) -> dict[str, bytes]:
    """Relative path under the release folder -> content, for every assignment."""
    files = {}
    for name, path in source_notebooks(source_dir).items():
        nb = nbformat.read(path, as_version=4)
        files[f"{name}/{name}.ipynb"] = render(student_version(nb))
    return files


def _show(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (shorter messages)."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_manifest(release_dir: Path) -> dict[str, str]:
    """Relative path -> sha256 of what ``release`` last wrote (empty if never run)."""
    path = Path(release_dir) / MANIFEST
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, rel = line.split(maxsplit=1)
            out[rel.strip()] = digest
    return out


def release(source_dir: Path = SOURCE, release_dir: Path = RELEASE, force: bool = False) -> list[str]:
    """Write the student versions to ``release_dir``; return one line per file.

    A file that exists and differs both from the new version and from what the manifest
    says was written last has been changed by someone: nothing is written and
    ``AssignmentError`` names it, unless ``force``.
    """
    release_dir = Path(release_dir)
    files = release_files(source_dir)
    manifest = read_manifest(release_dir)
    status, changed = {}, []
    for rel, content in files.items():
        path = release_dir / rel
        if not path.exists():
            status[rel] = "new"
            continue
        current = sha256(path.read_bytes())
        if current == sha256(content):
            status[rel] = "unchanged"
        elif manifest.get(rel) == current:
            status[rel] = "updated"
        else:
            status[rel] = "overwritten (FORCE)" if force else "changed by hand"
            changed.append(rel)
    if changed and not force:
        names = "\n".join(f"  {_show(release_dir / rel)}" for rel in changed)
        raise AssignmentError(
            f"refusing to overwrite {len(changed)} file(s) that differ from what `make assignments` "
            f"last wrote (edited by a student or by hand?):\n{names}\n"
            "move them away, or run `make assignments FORCE=1` to overwrite them")
    for rel, content in files.items():
        path = release_dir / rel
        if status[rel] != "unchanged":
            write_atomic(path, content)
    manifest.update({rel: sha256(content) for rel, content in files.items()})
    write_atomic(release_dir / MANIFEST,
                  "".join(f"{digest}  {rel}\n" for rel, digest in sorted(manifest.items())).encode())
    return [f"{status[rel]:>20}  {_show(release_dir / rel)}" for rel in files]


# --------------------------------------------------------------------------------------
# Grading
# --------------------------------------------------------------------------------------

MAX_NOTEBOOK_BYTES = 32 * 2**20     # a submitted notebook
MAX_CHECKPOINT_BYTES = 64 * 2**20   # a submitted checkpoint
MAX_ANSWER_BYTES = 32 * 2**20       # what one probe sends back


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


# --------------------------------------------------------------------------------------
# What an answer may not do, and the questions that need the student's trained model
# --------------------------------------------------------------------------------------

def answer_rules(source) -> answer_checks.Rules:
    """The allowed and forbidden names of an assignment, from its source notebook: its
    read-only cells and ``metadata.course.reference_answers`` (see ``grader.answer_checks``)."""
    listed = source.metadata.get("course", {}).get("reference_answers", [])
    return answer_checks.Rules(source.cells, listed, is_answer=is_answer_cell, is_test=is_test_cell)


def answer_names(source) -> set[str]:
    """The names the lecturer's solutions bind (what the answer cells are expected to define)."""
    names = set()
    for cell in source.cells:
        tree = answer_checks.parse(cell.source) if is_answer_cell(cell) else None
        if tree is not None:
            names |= {n for stmt in tree.body for n in answer_checks.bound_names(stmt)}
    return names


def check_answers(nb, source) -> answer_checks.Report:
    """The findings of the answer cells of ``nb`` (the notebook the grader runs)."""
    return answer_checks.check(nb.cells, answer_rules(source), is_answer=is_answer_cell,
                               is_test=is_test_cell, grade_id=grade_id, answer_names=answer_names(source))


def trained_model_questions(source) -> list[str]:
    """grade_ids of the test cells that grade the trained model: those after the read-only
    cell that reads ``skip_training`` (it trains the model or loads the checkpoint)."""
    cells = source.cells
    for i, cell in enumerate(cells):
        tree = answer_checks.parse(cell.source) if cell.cell_type == "code" else None
        if tree is not None and not is_answer_cell(cell) and "skip_training" in answer_checks.loaded_names(tree):
            return [grade_id(c) for c in cells[i:] if is_test_cell(c)]
    return []


# --------------------------------------------------------------------------------------
# Running and counting
# --------------------------------------------------------------------------------------

NO_CHECKPOINT = "no checkpoint: reference weights used"


@dataclass
class Result:
    """Points per test cell of one graded submission."""
    assignment: str
    scores: dict[str, tuple[float, float]]  # grade_id -> (score, max)
    errors: dict[str, str]                  # grade_id -> why it lost points
    seconds: float
    checkpoint: str
    assembled: Assembled
    executed: "nbformat.NotebookNode"
    flags: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # what the answer check found

    @property
    def total(self) -> float:
        return sum(s for s, _ in self.scores.values())

    @property
    def max_total(self) -> float:
        return sum(m for _, m in self.scores.values())

    def report(self) -> str:
        """The per-question table that ``make grade`` prints."""
        width = max(len(k) for k in self.scores) + 2
        lines = [f"assignment {self.assignment}; {self.checkpoint}"]
        if self.flags:
            lines.append("flags: " + "; ".join(self.flags))
        lines += [f"answer check: {line}" for line in self.findings]
        if self.assembled.missing:
            lines.append("answer cells missing from the submission (graded as stubs): "
                         + ", ".join(self.assembled.missing))
        if self.assembled.ignored > 0:
            lines.append(f"{self.assembled.ignored} code cell(s) of the submission outside the answer "
                         "cells were ignored (the lecturer's copy of every other cell is run)")
        for gid, (score, most) in self.scores.items():
            note = f"   {self.errors[gid]}" if gid in self.errors else ""
            lines.append(f"  {gid:<{width}} {score:4.1f} / {most:4.1f}{note}")
        lines.append(f"  {'total':<{width}} {self.total:4.1f} / {self.max_total:4.1f}")
        lines.append(f"graded in {self.seconds:.1f} s (offline, CPU, profile fast, 1 thread)")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"assignment": self.assignment, "total": self.total, "max_total": self.max_total,
                "scores": {k: {"score": s, "max": m} for k, (s, m) in self.scores.items()},
                "errors": self.errors, "seconds": round(self.seconds, 1), "flags": self.flags,
                "findings": self.findings, "checkpoint": self.checkpoint,
                "missing_answers": self.assembled.missing}


def _error_line(cell) -> str:
    for out in cell.get("outputs", []):
        if out.output_type == "error":
            value = (out.evalue or "").strip().splitlines()
            return f"{out.ename}: {value[0][:120]}" if value else out.ename
        if out.output_type == "stream" and out.name == "stderr":
            return f"wrote to stderr: {out.text.strip().splitlines()[0][:120] if out.text.strip() else ''}"
    return ""


def execute(nb, workdir: Path, timeout: int = 900, time_limit: float | None = None) -> bool:
    """Run ``nb`` in place in ``workdir`` with the course kernel, offline, on one CPU thread,
    in this process's own user (for the lecturer's notebooks: the sources' own tests);
    see ``grader_sandbox.execute``. Returns whether the time limit was reached."""
    return grader_sandbox.execute(nb, workdir, timeout, time_limit, env=GRADING_ENV)


def answer_check_summary(nb, source) -> dict:
    """``check_answers`` as plain data: flags, zeroed (test grade_id -> reason), findings."""
    report = check_answers(nb, source)
    return {"flags": report.flags, "zeroed": report.zeroed, "findings": [f.reason() for f in report.findings]}


HIDDEN_TESTS = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS\n.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?", re.M | re.S)
PROBE = grader_sandbox.PROBE_KEY  # metadata key of the cells the grader adds
WATCH = grader_sandbox.WATCH_KEY  # ... and of its first look at torch (before the first answer)
TAMPERED_FLAG = "torch or the course package changed at run time"
REFERENCE_CHECKPOINT = "reference checkpoint handed in"


def to_run(nb, questions: dict, work: str, code: str, skip: dict[str, str] | None = None):
    """The notebook the sandbox runs: ``nb`` with every test cell judged outside (``questions``)
    cut to its visible part and followed by a probe cell that makes the grader's calls; the
    test cells in ``skip`` (grade_id -> why) are not run (they score 0 whatever happens)."""
    out = copy.deepcopy(nb)
    cells, watched = [], False
    for cell in out.cells:
        gid = grade_id(cell)
        if is_answer_cell(cell) and not watched:
            watch = nbformat.v4.new_code_cell(grader_sandbox.watch_source(code))
            watch.metadata[WATCH] = watched = True  # torch and the course as the answers find them
            cells.append(watch)
        if is_test_cell(cell) and gid in (skip or {}):
            cell.source = f"# not run by the grader: {skip[gid]}"
            cells.append(cell)
        elif is_test_cell(cell) and gid in questions:
            cell.source = HIDDEN_TESTS.sub("", cell.source)
            cells.append(cell)
            probe = nbformat.v4.new_code_cell(grader_sandbox.probe_source(gid, work, code))
            probe.metadata[PROBE] = gid
            cells.append(probe)
        else:
            cells.append(cell)
    out.cells = cells
    return out


_checks_cache: dict[str, dict] = {}


def questions_judged_outside(source_path: Path) -> dict[str, grader_verdicts.Question]:
    """The assignment's ``checks.py`` questions (loaded once per process: their reference
    answers are computed once for a whole class)."""
    key = str(Path(source_path).resolve())
    if key not in _checks_cache:
        _checks_cache[key] = grader_verdicts.load_checks(Path(source_path))
    return _checks_cache[key]


NEAR_REFERENCE = 1e-3  # relative distance of weights below which a checkpoint is the reference one


def same_weights(theirs: Path, ref: Path) -> bool:
    """Whether a handed-in checkpoint is the reference one: the same bytes, or weights under
    the same names within ``NEAR_REFERENCE`` of it (relative L2 distance over all of them:
    a re-saved copy, or a copy with noise added). Read with ``weights_only``: no code runs."""
    if theirs.stat().st_size == ref.stat().st_size and sha256(theirs.read_bytes()) == sha256(ref.read_bytes()):
        return True
    import torch
    try:
        a = torch.load(theirs, map_location="cpu", weights_only=True)
        b = torch.load(ref, map_location="cpu", weights_only=True)
        ta, tb = (x.get("model") if isinstance(x, dict) else None for x in (a, b))
        if not isinstance(ta, dict) or not isinstance(tb, dict):
            return False
        names = [k for k, v in tb.items() if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() > 1]
        if not names or not all(isinstance(ta.get(k), torch.Tensor) and ta[k].shape == tb[k].shape for k in names):
            return False
        diff = sum(float((ta[k].double() - tb[k].double()).pow(2).sum()) for k in names) ** 0.5
        size = sum(float(tb[k].double().pow(2).sum()) for k in names) ** 0.5
        return diff <= NEAR_REFERENCE * size
    except Exception:  # noqa: BLE001  (not a checkpoint at all: its question says so)
        return False


NEAR_REFERENCE_OUTPUTS = 0.035  # output distance (see output_distance) below which a model is the reference one


def _floats(value) -> list:
    """The floating-point tensors in an output (a tensor, or tuples, lists and dicts of them), in
    order, each centred over its last dimension (logits: a softmax ignores a constant added to a
    row, and a1's rows share an offset of about -15 that would hide every difference)."""
    import torch
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            return []
        x = value.double()
        if x.dim() >= 1 and x.shape[-1] > 1:
            x = x - x.mean(-1, keepdim=True)
        return [x.reshape(-1)]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _floats(v)]
    return []


def output_distance(theirs, ref) -> float:
    """mean |s * theirs - ref| / mean |ref| over the floating-point tensors of two outputs of
    the same calls, centred per row, with ``s`` the least-squares scale (a copy whose logits
    are only multiplied, a temperature, is as near as the copy itself); inf when they do not
    line up."""
    import torch
    a, b = _floats(theirs), _floats(ref)
    if not b or len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return float("inf")
    a, b = torch.cat(a), torch.cat(b)
    size = b.abs().mean().item()
    if not size > 0 or not torch.isfinite(a).all():
        return float("inf")
    s = float((a * b).sum() / (a * a).sum()) if float((a * a).sum()) > 0 else 0.0
    return (s * a - b).abs().mean().item() / size


_reference_outputs: dict = {}
_reference_outputs_lock = __import__("threading").Lock()


def reference_outputs(question, reference: Path) -> list:
    """What the reference class holding the reference weights (``reference``, a checkpoint)
    gives on the trained-model question's calls: computed once per class."""
    import torch
    key = (str(Path(reference).resolve()), id(question))
    with _reference_outputs_lock:
        if key not in _reference_outputs:
            state = torch.load(reference, map_location="cpu", weights_only=True)
            _reference_outputs[key] = question.expected_for(question.calls(state))
        return _reference_outputs[key]


def _student_checkpoint(path: Path, question) -> tuple[dict | None, str]:
    """The handed-in checkpoint, read here with ``weights_only`` (no code in it runs), or
    why it cannot be graded."""
    import torch
    if not path.is_file():
        return None, f"no checkpoint {path.name} handed in"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001  (whatever the file holds)
        return None, f"{path.name} is not a readable checkpoint ({type(err).__name__})"
    try:
        return state, question.problem(state)
    except Exception as err:  # noqa: BLE001  (a checkpoint made to break the check)
        return None, f"{path.name} is not a checkpoint of this assignment ({type(err).__name__})"


def grade(submission_path, source_dir: Path = SOURCE, timeout: int = 900,
          checkpoint: str = "auto", time_limit: float | None = None, answer_check: dict | None = None,
          sandbox: bool = True, hide: list[Path] = (), cpu: int | None = None) -> Result:
    """Grade one submitted notebook; ``checkpoint``: 'auto' (the student's ``*.pt`` beside the
    submission if there is one; else the reference one is loaded so that the cells run, and
    the questions on the trained model score 0), 'submitted' (an error without one) or
    'reference' (grade the student's model code with the reference weights: the trained-model
    questions are scored, and the flag says so). ``time_limit``: seconds for the whole
    notebook (the sandbox is killed ``Limits.grace_seconds`` later). ``sandbox``: run the
    student's code in bubblewrap (False only for trusted submissions: every result is then
    flagged). ``hide``: folders the sandbox must not see (the class's folder); ``cpu``: the
    one CPU the submission may use (a folder's grader gives each worker its own)."""
    from nbgrader.utils import determine_grade
    if checkpoint not in ("auto", "submitted", "reference"):
        raise AssignmentError(f"checkpoint must be 'auto', 'submitted' or 'reference', got {checkpoint!r}")
    if sandbox:
        grader_sandbox.bwrap()  # before anything else: SandboxError names what to install
    submission_path = Path(submission_path)
    submission = read_submission(submission_path)
    sources = source_notebooks(source_dir)
    name = identify(submission, sources)
    source = nbformat.read(sources[name], as_version=4)
    assembled = assemble(submission, source)
    found = answer_check or answer_check_summary(assembled.nb, source)
    questions = questions_judged_outside(sources[name])
    start = time.perf_counter()
    flags = list(found["flags"]) + ([] if sandbox else [NO_SANDBOX_FLAG])
    without_checkpoint, copied_checkpoint, handed_in = [], [], set()
    with tempfile.TemporaryDirectory(prefix=f"grade-{name}-") as tmp:
        work = Path(tmp) / "work"
        (work / "in").mkdir(parents=True)
        used = []
        for ref in checkpoints(source_dir, name):
            theirs = submission_path.parent / ref.name
            if checkpoint != "reference" and (theirs.exists() or theirs.is_symlink()) and theirs.resolve() != ref.resolve():
                if theirs.is_symlink() or not theirs.is_file():
                    raise AssignmentError(f"the checkpoint {theirs.name} is a symbolic link or not a file "
                                          "(expected the file itself)")
                if theirs.stat().st_size > MAX_CHECKPOINT_BYTES:
                    raise AssignmentError(f"the checkpoint {theirs.name} is {theirs.stat().st_size / 2**20:.0f} MiB "
                                          f"(expected at most {MAX_CHECKPOINT_BYTES // 2**20} MiB)")
                shutil.copy(theirs, work / ref.name)
                used.append(f"the submitted checkpoint {theirs.name}")
                handed_in.add(ref.name)
                if same_weights(theirs, ref):
                    flags.append(REFERENCE_CHECKPOINT)
                    copied_checkpoint = trained_model_questions(source)
            elif checkpoint == "submitted":
                raise AssignmentError(f"no checkpoint {ref.name} beside the submission {submission_path}")
            else:
                shutil.copy(ref, work / ref.name)
                used.append(f"the reference checkpoint {_show(ref)}")
                flags.append(NO_CHECKPOINT if checkpoint == "auto" else "reference weights used (as asked)")
                if checkpoint == "auto":
                    without_checkpoint = trained_model_questions(source)
        skip = {gid: "this question scores 0 (see the table above)" for gid in
                [*found["zeroed"], *copied_checkpoint, *without_checkpoint]}
        cases, trained, unusable = {}, {}, {}
        for gid, question in questions.items():
            if gid in skip:
                continue
            if isinstance(question, grader_verdicts.TrainedModelQuestion):
                trained[gid], why = _student_checkpoint(work / question.checkpoint, question)
                if why:
                    unusable[gid] = why
                    skip[gid] = why
                    continue
                cases[gid] = question.calls(trained[gid])
            else:
                cases[gid] = question.cases()
            (work / "in" / f"{gid}.json").write_text(grader_verdicts.inputs(cases[gid]))
        inside = grader_sandbox.IN_SANDBOX_WORK if sandbox else str(work)
        code = grader_sandbox.IN_SANDBOX_CODE if sandbox else grader_sandbox.code_folder(work)
        runnable = to_run(assembled.nb, questions, inside, code, skip)
        executed, timed_out, problem = grader_sandbox.run_notebook(
            runnable, work, ROOT, time_limit, timeout, sandbox=sandbox, env=GRADING_ENV,
            hide=[Path(tmp), Path(source_dir), *hide], cpu=cpu)
        answers = {}  # what each probe wrote, taken by the runner as soon as its cell had run
        for gid in questions:
            path = work / grader_sandbox.PROBES / f"{gid}.json"
            if path.is_file() and not path.is_symlink() and path.stat().st_size < MAX_ANSWER_BYTES:
                answers[gid] = path.read_text(errors="replace")
    seconds = time.perf_counter() - start
    if timed_out:
        flags.append("timed out")
    if executed is None:
        executed = copy.deepcopy(runnable)
        executed.cells.insert(0, nbformat.v4.new_markdown_cell(f"**The run failed:** {problem}"))
    ran = {grade_id(c): c for c in executed.cells if is_test_cell(c)}
    scores, errors = {}, {}
    for cell in source.cells:
        if not is_test_cell(cell):
            continue
        gid = grade_id(cell)
        most = float(nbgrader_meta(cell)["points"])
        if gid in unusable:
            score, why = 0.0, unusable[gid]
        elif gid in questions and gid in trained:
            question = questions[gid]
            try:
                expected = question.expected_for(cases[gid])  # the reference class, the student's weights
                reference = Path(source_dir) / name / question.checkpoint
                if question.checkpoint in handed_in and reference.is_file():
                    # what the weights do, not what they are: a copy with noise added, or with its
                    # units or heads permuted, computes the reference model's function
                    distance = output_distance(expected, reference_outputs(question, reference))
                    if distance < NEAR_REFERENCE_OUTPUTS:
                        flags.append(REFERENCE_CHECKPOINT)
                        copied_checkpoint.append(gid)
                ok, why = grader_verdicts.judge(question, answers.get(gid), cases[gid], expected)
                if ok:
                    ok, why = question.verdict(trained[gid])
            except Exception as err:  # noqa: BLE001  (weights that do not fit the reference model)
                text = str(err).strip().splitlines()
                ok, why = False, (f"the handed-in weights could not be used ({type(err).__name__}: "
                                  f"{text[0][:150] if text else ''})")
            score = most if ok else 0.0
        elif gid in questions:
            ok, why = grader_verdicts.judge(questions[gid], answers.get(gid))
            score = most if ok else 0.0
            if not ok and gid not in answers and problem:
                why = problem
            elif not ok and gid not in answers and _error_line(ran.get(gid, {})).startswith(TIME_LIMIT_ERROR):
                why = _error_line(ran[gid])
        else:
            done = ran.get(gid)
            score = float(determine_grade(done)[0]) if done is not None and problem == "" else 0.0
            why = (_error_line(done) if done is not None else "") or problem
        if gid in found["zeroed"]:
            score, why = 0.0, found["zeroed"][gid]
        elif gid in copied_checkpoint:
            score, why = 0.0, ("the handed-in checkpoint is the reference one (the same weights): "
                               "this question grades the student's own trained model")
        elif gid in without_checkpoint:
            score, why = 0.0, ("no checkpoint handed in: this question grades the student's "
                               "trained model (the reference weights were loaded only to run the cells)")
        if score < most:
            errors[gid] = why
        scores[gid] = (score, most)
    if any(grader_verdicts.tampered(text) for text in answers.values()):
        flags.append(TAMPERED_FLAG)
    executed.cells = [c for c in executed.cells if PROBE not in c.get("metadata", {})
                      and WATCH not in c.get("metadata", {})]  # never in feedback
    return Result(name, scores, errors, seconds,
                  "model from " + ", ".join(used) if used else "no checkpoint needed",
                  assembled, executed, sorted(set(flags)), list(found["findings"]))


# --------------------------------------------------------------------------------------
# A folder of submissions in, a CSV out
# --------------------------------------------------------------------------------------

GRADES_CSV = "grades.csv"
FEEDBACK = "feedback"
DEFAULT_TIME_LIMIT = 300  # seconds per submission


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


def submissions(folder: Path) -> list[tuple[str, Path]]:
    """(student, entry) for every submission in ``folder``: a notebook ``name.ipynb`` (or any
    other file: it gets a row with an error) or a subfolder ``name/`` with the notebook and
    its checkpoint. Hidden entries and what grading writes (grades.csv, feedback/) are skipped."""
    folder = Path(folder)
    entries = [p for p in sorted(folder.iterdir()) if not p.name.startswith(".")
               and p.name not in (GRADES_CSV, FEEDBACK)]
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
               sandbox: bool = True, hide: list[Path] = (), cpus: "queue.Queue | None" = None) -> Row:
    """Grade one submission (its code in a sandbox of its own) and write its feedback
    notebook; whatever goes wrong becomes this row's error, never the class's."""
    row = Row(student)
    try:
        with tempfile.TemporaryDirectory(prefix="submission-") as tmp:
            tmp = Path(tmp)
            (tmp / "in").mkdir()
            try:
                notebook = _prepare(entry, tmp / "in")
                cpu = cpus.get() if cpus is not None else None
                try:
                    result = grade(notebook, timeout=timeout, time_limit=time_limit, sandbox=sandbox, hide=hide,
                                   cpu=cpu)
                finally:
                    if cpus is not None:
                        cpus.put(cpu)
            except AssignmentError as err:
                row.error = str(err).replace(str(tmp / "in") + os.sep, "")
                row.flags = [] if sandbox else [NO_SANDBOX_FLAG]
                return row
            row.assignment = result.assignment
            row.scores = {k: s for k, (s, _) in result.scores.items()}
            row.total, row.max_total, row.flags = result.total, result.max_total, result.flags
            _write_feedback(student, result, feedback_dir)
    except SandboxError:
        raise  # the machine cannot sandbox: stop the batch and say what to install
    except Exception as err:  # noqa: BLE001  (one submission never stops the class)
        row.scores, row.total = {k: 0.0 for k in row.scores}, 0.0
        text = str(err).strip().splitlines()
        row.error = f"could not be graded: {type(err).__name__}: {text[0][:200] if text else ''}"
        if not sandbox and NO_SANDBOX_FLAG not in row.flags:
            row.flags = [*row.flags, NO_SANDBOX_FLAG]
    return row


def _write_feedback(student: str, result: Result, feedback_dir: Path) -> None:
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


def grade_folder(folder, workers: int | None = None, time_limit: float = DEFAULT_TIME_LIMIT,
                 timeout: int = 900, source_dir: Path = SOURCE, sandbox: bool = True) -> tuple[Path, list[Row]]:
    """Grade every submission in ``folder`` (see ``submissions``), ``workers`` at a time (default:
    the usable cores), and write ``folder/grades.csv`` and ``folder/feedback/<student>.ipynb``.
    A submission that cannot be graded gets a row with an error; nothing stops the batch.
    Each submission runs in a sandbox of its own (``sandbox=False``: trusted submissions only;
    every row is flagged)."""
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
    workers = workers or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                             else os.cpu_count() or 1)
    cpus = queue.Queue()  # each submission runs on one CPU of its own (while there are enough)
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    for i in range(workers):
        cpus.put(usable[i % len(usable)] if usable and workers <= len(usable) else None)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rows = list(pool.map(lambda item: _grade_one(item[0], item[1], folder / FEEDBACK, time_limit, timeout,
                                                     sandbox, [folder], cpus), todo))
    path = folder / GRADES_CSV
    write_atomic(path, grades_csv(rows).encode("utf-8"))
    return path, rows


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


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------

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
            print(f"manifest: {_show(RELEASE / MANIFEST)}")
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
                                      args.timeout, sandbox=not args.no_sandbox)
            print(grades_csv(rows), end="")
            print(f"graded {len(rows)} submission(s) in {time.perf_counter() - start:.0f} s: {_show(path)}, "
                  f"feedback in {_show(path.parent / FEEDBACK)}/")
            return 0
        result = grade(args.submission, timeout=args.timeout, checkpoint=args.checkpoint,
                       time_limit=args.time_limit, sandbox=not args.no_sandbox,
                       hide=[Path(args.submission).resolve().parent])
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

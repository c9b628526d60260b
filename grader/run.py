"""Grading one submission: the assembled notebook run in its sandbox (``grader.sandbox``),
the questions of the assignment's ``checks.py`` judged outside it (``grader.verdicts``), the
other test cells counted as nbgrader counts them, and the answer check's and the
checkpoints' findings applied: a ``Result`` of points per question.
"""
from __future__ import annotations

import copy
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

import course_utils  # CHECK_ENV, KERNEL_ENV
from grader import sandbox as grader_sandbox
from grader import verdicts as grader_verdicts
from grader.assemble import (Assembled, answer_check_summary, assemble, identify, read_submission,
                             trained_model_questions)
from grader.cells import (HIDDEN_TESTS, ROOT, SOURCE, AssignmentError, grade_id, is_answer_cell, is_test_cell,
                          nbgrader_meta, reference_checkpoints, shown, source_notebooks)
from grader import student_side
from grader.checkpoints import (NEAR_REFERENCE_OUTPUTS, fits_reference, output_distance, output_sample,
                                reference_outputs, same_weights, student_checkpoint)
from grader.inside import (CHECKPOINT_KEY, FORBIDDEN_FILE, IN_SANDBOX_WORK, PROBE_KEY, TIME_LIMIT_ERROR, WATCH_KEY,
                           code_folder, probe_source, watch_source)
from grader.sandbox import IN_SANDBOX_CODE, NO_SANDBOX_FLAG

# a submission runs under the settings of every check of the course (course_utils.CHECK_ENV: the
# fast profile, one thread, the CPU on every machine: a lecturer's GPU would otherwise be picked
# outside the sandbox, which shows none, and meet the grader's CPU reference models) and those of
# every kernel the course starts (KERNEL_ENV: offline, a fixed hash seed)
GRADING_ENV = {**course_utils.CHECK_ENV, **course_utils.KERNEL_ENV}
MAX_ANSWER_BYTES = 32 * 2**20       # what one probe sends back
NO_CHECKPOINT = "no checkpoint handed in"
PROBE = PROBE_KEY  # metadata key of the cells the grader adds
WATCH = WATCH_KEY  # ... and of its first look at torch (before the first answer)
TAMPERED_FLAG = "torch or the course package changed at run time"
REFERENCE_CHECKPOINT = "reference checkpoint handed in"


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
    models: dict = field(default_factory=dict)  # grade_id -> output_sample of the handed-in trained model

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


def _by_file(calls: list[dict], state: dict, checkpoint: str) -> list[dict]:
    """``calls`` with the handed-in weights (``state["model"]``, the same tensors) named by their
    file instead of sent as numbers: the sandbox loads them from its copy of the checkpoint."""
    model = state.get("model") if isinstance(state, dict) else None
    out = []
    for call in calls:
        given = call.get("state")
        if isinstance(given, dict) and isinstance(model, dict) and given.keys() == model.keys() \
                and all(given[k] is model[k] for k in model):
            call = {**call, "state": {CHECKPOINT_KEY: checkpoint}}
        out.append(call)
    return out


def to_run(nb, questions: dict, work: str, code: str, skip: dict[str, str] | None = None,
           sandboxed: bool = True):
    """The notebook the sandbox runs: ``nb`` with every test cell judged outside (``questions``)
    cut to its visible part and followed by a probe cell that makes the grader's calls; the
    test cells in ``skip`` (grade_id -> why) are not run (they score 0 whatever happens).
    ``sandboxed``: the listed torch operators are refused from the first answer cell on, in the
    whole kernel (the course package there does without them); else only in the grader's calls."""
    out = copy.deepcopy(nb)
    cells, watched = [], False
    for cell in out.cells:
        gid = grade_id(cell)
        if is_answer_cell(cell) and not watched:
            watch = nbformat.v4.new_code_cell(watch_source(code, work if sandboxed else None))
            watch.metadata[WATCH] = watched = True  # torch and the course as the answers find them
            cells.append(watch)
        if is_test_cell(cell) and gid in (skip or {}):
            cell.source = f"# not run by the grader: {skip[gid]}"
            cells.append(cell)
        elif is_test_cell(cell) and gid in questions:
            cell.source = HIDDEN_TESTS.sub("", cell.source)
            cells.append(cell)
            probe = nbformat.v4.new_code_cell(probe_source(gid, work, code))
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


def grade(submission_path, source_dir: Path = SOURCE, timeout: int = 900,
          checkpoint: str = "auto", time_limit: float | None = None, answer_check: dict | None = None,
          sandbox: bool = True, hide: list[Path] = (), cpu: int | None = None,
          assignment: str | None = None) -> Result:
    """Grade one submitted notebook; ``checkpoint``: 'auto' (the student's ``*.pt`` beside the
    submission if there is one; else the reference one is loaded so that the cells run, and
    the questions on the trained model score 0), 'submitted' (an error without one) or
    'reference' (grade the student's model code with the reference weights: the trained-model
    questions are scored, and the flag says so). ``time_limit``: seconds for the whole
    notebook (the sandbox is killed ``Limits.grace_seconds`` later). ``sandbox``: run the
    student's code in bubblewrap (False only for trusted submissions: every result is then
    flagged). ``hide``: folders the sandbox must not see (the class's folder); ``cpu``: the
    one CPU the submission may use (a folder's grader gives each worker its own); ``assignment``:
    the one expected (another is an ``AssignmentError``)."""
    from nbgrader.utils import determine_grade
    if checkpoint not in ("auto", "submitted", "reference"):
        raise AssignmentError(f"checkpoint must be 'auto', 'submitted' or 'reference', got {checkpoint!r}")
    if sandbox:
        grader_sandbox.bwrap()  # before anything else: SandboxError names what to install
    submission_path = Path(submission_path)
    submission = read_submission(submission_path)
    sources = source_notebooks(source_dir)
    name = identify(submission, sources)
    if assignment is not None and name != assignment:
        raise AssignmentError(f"this notebook is the assignment {name}, not {assignment} (the class's)")
    source = nbformat.read(sources[name], as_version=4)
    assembled = assemble(submission, source)
    questions = questions_judged_outside(sources[name])
    # the course names that answer a question: tripwires in the sandbox, findings in the text
    compared = student_side.compared_names(questions, grader_verdicts.reference_code(sources[name]))
    found = answer_check or answer_check_summary(assembled.nb, source, student_side.reference_names(source, compared))
    start = time.perf_counter()
    flags = list(found["flags"]) + ([] if sandbox else [NO_SANDBOX_FLAG])
    without_checkpoint, copied_checkpoint, handed_in, unusable = [], [], set(), {}
    refs = {ref.name: ref for ref in reference_checkpoints(source_dir, name)}
    with tempfile.TemporaryDirectory(prefix=f"grade-{name}-") as tmp:
        work = Path(tmp) / "work"
        (work / "in").mkdir(parents=True)
        used = []
        for ref in refs.values():
            theirs = submission_path.parent / ref.name
            if checkpoint != "reference" and (theirs.exists() or theirs.is_symlink()) and theirs.resolve() != ref.resolve():
                if theirs.is_symlink() or not theirs.is_file():
                    raise AssignmentError(f"the checkpoint {theirs.name} is a symbolic link or not a file "
                                          "(expected the file itself)")
                # names, shapes, dtypes and sizes against the reference state dict, before anything
                # else reads it (a tensor of one number spread over millions is refused here)
                state, why = fits_reference(theirs, ref)
                used.append(f"the submitted checkpoint {theirs.name}")
                if why:
                    for gid in trained_model_questions(source):
                        unusable[gid] = why
                    continue
                shutil.copy(theirs, work / ref.name)
                handed_in.add(ref.name)
                if same_weights(theirs, ref):
                    flags.append(REFERENCE_CHECKPOINT)
                    copied_checkpoint = trained_model_questions(source)
            elif checkpoint == "submitted":
                raise AssignmentError(f"no checkpoint {ref.name} beside the submission {submission_path}")
            elif checkpoint == "reference":  # asked for by the lecturer, for a submission they trust
                shutil.copy(ref, work / ref.name)
                used.append(f"the reference checkpoint {shown(ref)}")
                flags.append("reference weights used (as asked)")
            else:  # the reference weights never enter a student's sandbox
                used.append("no checkpoint")
                flags.append(NO_CHECKPOINT)
                without_checkpoint = trained_model_questions(source)
        skip = {gid: "this question scores 0 (see the table above)" for gid in
                [*found["zeroed"], *copied_checkpoint, *without_checkpoint, *unusable]}
        cases, trained = {}, {}
        for gid, question in questions.items():
            if gid in skip:
                continue
            if isinstance(question, grader_verdicts.TrainedModelQuestion):
                ref = refs.get(question.checkpoint)
                trained[gid], why = student_checkpoint(work / question.checkpoint, question,
                                                       ref if question.checkpoint in handed_in else None)
                if why:
                    unusable[gid] = why
                    skip[gid] = why
                    continue
                cases[gid] = question.calls(trained[gid])
                sent = _by_file(cases[gid], trained[gid], question.checkpoint)
            else:
                cases[gid] = sent = question.cases()
            (work / "in" / f"{gid}.json").write_text(grader_verdicts.inputs(sent))
        (work / "in" / FORBIDDEN_FILE).write_text(json.dumps(student_side.forbidden(source)))
        inside = IN_SANDBOX_WORK if sandbox else str(work)
        code = IN_SANDBOX_CODE if sandbox else code_folder(work)
        runnable = to_run(assembled.nb, questions, inside, code, skip, sandboxed=sandbox)
        replace = {}
        if sandbox:
            replace[str(ROOT / student_side.PACKAGE)] = student_side.student_package(name, source, compared)
        executed, timed_out, problem, answers = grader_sandbox.run_notebook(
            runnable, work, ROOT, time_limit, timeout, sandbox=sandbox, env=GRADING_ENV,
            hide=[Path(source_dir), *hide], cpu=cpu, replace=replace,
            absent=student_side.absent_packages(source))
        answers = {gid: text for gid, text in answers.items() if gid in questions and len(text) < MAX_ANSWER_BYTES}
    seconds = time.perf_counter() - start
    if timed_out:
        flags.append("timed out")
    if executed is None:
        executed = copy.deepcopy(runnable)
        executed.cells.insert(0, nbformat.v4.new_markdown_cell(f"**The run failed:** {problem}"))
    ran = {grade_id(c): c for c in executed.cells if is_test_cell(c)}
    scores, errors, models = {}, {}, {}
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
                if question.checkpoint in handed_in:  # compared with the classmates' (similar_pairs)
                    models[gid] = output_sample(expected)
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
                  assembled, executed, sorted(set(flags)), list(found["findings"]), models)

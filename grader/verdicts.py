"""Verdicts in the grader's own process: the student's answers as plain data against the
reference answers the grader computes itself.

An assignment's questions that are judged this way are described, beside its source
notebook, in ``assignments/source/<name>/checks.py`` (lecturer's code, never shown to the
sandbox): ``QUESTIONS``, test grade_id -> ``Question``. A question is a list of *calls*
(plain data: a function name, arguments; for a class, the constructor's arguments and the
weights to load) made on the grader's inputs, and a reference namespace (the same names,
bound to the reference implementations). The sandbox makes the calls with the student's
names (``grader.inside.probe``) and sends the results back as JSON; here the same calls
are made with the reference names, and the two results compared: exactly for numbers,
strings, tuples, lists and dicts (a tuple is not a list), with a tolerance for floating
point tensors (dtype and shape must agree). No test code of the lecturer's, visible or
hidden, runs in the student's process for these questions, and a hidden case's inputs and
answers never appear in the feedback.

Beyond the values returned (``grader.inside.run_call``): a call that changes what it was
given in place (a mask written into the caller's batch) raises, naming the argument; a loss
question's calls say ``"grad": True`` and are compared on the loss *and* its gradients with
respect to the float tensors and the model's parameters given to it, so that a loss computed
outside autograd (``.item()``, ``.detach()``, numpy) or one with a wrong backward pass loses
the question (``NO_GRADIENT_MESSAGE``).

Leaves out: what a call does to an object it was given (a model's weights).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from grader import inside


#: One grader computation at a time: the checks draw their inputs and reference weights from
#: torch's global random generator (``torch.manual_seed``), and a folder is graded by several
#: threads; two threads drawing at once each got some of the other's numbers, and a correct
#: answer lost its points (seen with a2's multi-head attention cases).
_LOCK = threading.RLock()


def _locked(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with _LOCK:
            return fn(*args, **kwargs)
    return call


def call(fn: str, *args, hidden: bool = False, **extra) -> dict:
    """One call a question makes: the student's ``fn`` on ``args`` (plain data); ``extra``
    says more (``kwargs``, ``init``, ``state``, ``method``, ``message``; ``grad=True`` for a
    loss: its gradients are compared too, see ``grader.inside.run_call``); ``hidden``: a
    hidden case, shown in the feedback only as such. The checks.py files build their calls
    with it."""
    return {"fn": fn, "args": list(args), "hidden": hidden, **extra}


@dataclass
class Question:
    """How one test cell is judged outside the sandbox."""
    calls: Callable[[], list[dict]]          # the grader's inputs (each call may say "hidden": True)
    reference: Callable[[], dict]            # name -> reference implementation
    atol: float = 1e-5
    rtol: float = 1.3e-6
    _cache: dict = field(default_factory=dict, repr=False)

    @_locked
    def cases(self) -> list[dict]:
        if "calls" not in self._cache:
            self._cache["calls"] = self.calls()
        return self._cache["calls"]

    @_locked
    def expected(self) -> list:
        """The reference results (computed once, in this process), as plain data."""
        if "expected" not in self._cache:
            namespace = self.reference()
            out = []
            for call in self.cases():
                value = inside.run_call(namespace, _sendable(call))
                out.append(inside.decode(json.loads(json.dumps(inside.encode(value)))))
            self._cache["expected"] = out
        return self._cache["expected"]


@dataclass
class TrainedModelQuestion:
    """A question on the student's trained model (its checkpoint ``checkpoint``). The sandbox
    runs the student's model class with the student's weights on real test sentences
    (``calls(state)``, state: the checkpoint as loaded here, weights only); the grader
    compares its outputs with the reference class given the same weights, then translates
    with that reference model and scores the translations itself (``verdict(state)``)."""
    checkpoint: str
    calls: Callable[[dict], list[dict]]
    reference: Callable[[], dict]
    verdict: Callable[[dict], tuple[bool, str]]
    problem: Callable[[dict], str]           # why a checkpoint cannot be graded ('' when it can)
    atol: float = 1e-4
    rtol: float = 1e-4

    def __post_init__(self):
        self.calls, self.verdict, self.problem = map(_locked, (self.calls, self.verdict, self.problem))

    @_locked
    def expected_for(self, cases: list[dict]) -> list:
        namespace = self.reference()
        return [inside.decode(json.loads(json.dumps(inside.encode(
            inside.run_call(namespace, _sendable(call)))))) for call in cases]


def load_checks(source_notebook: Path) -> dict[str, Question]:
    """``QUESTIONS`` of the assignment's ``checks.py`` ({} when it has none)."""
    path = Path(source_notebook).parent / "checks.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(f"checks_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _reference_code[str(path.resolve())] = list(getattr(module, "REFERENCE_CODE", []))
    return dict(module.QUESTIONS)


_reference_code: dict[str, list[str]] = {}


def reference_code(source_notebook: Path) -> list[str]:
    """``REFERENCE_CODE`` of the assignment's checks.py (after ``load_checks``)."""
    return _reference_code.get(str((Path(source_notebook).parent / "checks.py").resolve()), [])


def _sendable(call: dict) -> dict:
    return {k: v for k, v in call.items() if k not in ("hidden", "message")}


def inputs(cases: list[dict]) -> str:
    """The JSON the probe reads in the sandbox: the calls, without the grader's notes."""
    return json.dumps(inside.encode([_sendable(c) for c in cases]))


NO_GRADIENT_MESSAGE = ("the loss carries no gradient (computed outside autograd: .item(), .detach(), numpy?): "
                       "training cannot learn from it")


def _changes(results) -> list | None:
    """What a probe's (parsed) answer says was changed in torch or the course package, or None."""
    changes = results.get(inside.TAMPERED) if isinstance(results, dict) else None
    return changes if isinstance(changes, list) else None


def tampered(results_json: str) -> bool:
    """Whether a probe's answer says torch or the course package was changed (``probe``)."""
    try:
        return _changes(json.loads(results_json)) is not None
    except ValueError:
        return False


def judge(question, results_json: str | None, cases: list[dict] | None = None,
          expected: list | None = None) -> tuple[bool, str]:
    """(full marks?, why not) for what the sandbox sent back (None: nothing came back) to
    ``cases`` (default: the question's own), against ``expected`` (default: its reference)."""
    if results_json is None:
        return False, "no answer came back from the sandbox for this question (the probe did not run)"
    cases = question.cases() if cases is None else cases
    try:
        results = json.loads(results_json)
        changes = _changes(results)
        if changes is not None:
            return False, ("torch or the course package was changed at run time (" + "; ".join(
                inside.said_as_the_graders(str(x))[:150] for x in changes[:5]) + "): a question is judged "
                "only while they are as the grader found them")
        if not isinstance(results, list) or len(results) != len(cases):
            return False, "the answers that came back do not match the questions asked"
        expected = question.expected() if expected is None else expected
        for i, (call, result, want) in enumerate(zip(cases, results, expected)):
            case = "a hidden case" if call.get("hidden") else f"{_show_call(call)}"
            if not isinstance(result, dict) or not ("value" in result or "error" in result):
                return False, f"{case}: the answer that came back is not plain data"
            if "error" in result:
                return False, f"{case} raised {str(result['error'])[:200]}"
            got = inside.decode(result["value"])
            if isinstance(got, dict) and inside.NO_GRADIENT in got and not (
                    isinstance(want, dict) and inside.NO_GRADIENT in want):
                return False, f"{case}: {NO_GRADIENT_MESSAGE}"
            why = difference(got, want, question.atol, question.rtol)
            if why:
                if call.get("message"):
                    return False, f"{call['message']} ({why})"
                return False, f"{case}: {why}" if not call.get("hidden") else f"{case}: wrong answer"
        return True, ""
    except Exception as err:  # noqa: BLE001  (what came back is the student's to forge)
        return False, f"the answers that came back could not be read ({type(err).__name__})"


def difference(got, want, atol: float, rtol: float, depth: int = 0) -> str:
    """Why ``got`` is not ``want`` ('' when it is): inside a structure, where (``at item 2``,
    ``at 'key'``) and what (an item of the wrong kind: ``expected a tuple, got a list``)."""
    import torch
    if type(got) is not type(want):
        return f"expected a {type(want).__name__}, got a {type(got).__name__}"
    if isinstance(want, torch.Tensor):
        if got.dtype != want.dtype:
            return f"expected dtype {want.dtype}, got {got.dtype}"
        if got.shape != want.shape:
            return f"expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
        if want.dtype.is_floating_point:
            if not torch.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True):
                worst = (got - want).abs().nan_to_num(float("inf")).max().item()
                return f"values differ (largest difference {worst:.3g})"
        elif not torch.equal(got, want):
            return "values differ"
        return ""
    if isinstance(want, float):
        same = (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, rel_tol=rtol, abs_tol=atol)
        return "" if same else f"expected {want!r:.60}, got {got!r:.60}"
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return f"expected {len(want)} items, got {len(got)}"
        for i, (g, w) in enumerate(zip(got, want)):
            why = difference(g, w, atol, rtol, depth + 1)
            if why:
                # inside a structure, or an item of the wrong kind (a list for a tuple): the place
                # and the reason; else, at the top, both values (short ones say the most)
                if depth or WRONG_KIND.search(why):
                    return _at(f"item {i}", why)
                return f"expected {_short(want)}, got {_short(got)}"
        return ""
    if isinstance(want, dict):
        if set(got) != set(want):
            return f"expected {_short(want)}, got {_short(got)}"
        for k in want:
            why = difference(got[k], want[k], atol, rtol, depth + 1)
            if why:
                return _at(repr(k), why)
        return ""
    return "" if got == want else f"expected {_short(want)}, got {_short(got)}"


#: The reason ``difference`` gives for a value of the wrong type (a list where a tuple was expected).
WRONG_KIND = re.compile(r"(^|: )expected a \w+, got a \w+$")


def _at(place: str, why: str) -> str:
    """``why``, said of ``place`` inside a structure (``at item 2, 'x': ...``)."""
    return f"at {place}, {why[3:]}" if why.startswith("at ") else f"at {place}: {why}"


def _short(x, n: int = 120) -> str:
    text = repr(x)
    return text if len(text) <= n else text[:n] + "..."


def _shown(x, n: int = 40, depth: int = 0) -> str:
    """``x``, an argument of a call the grader makes, as a student reads it: a tensor by its shape
    and dtype, an object the call builds as the call that builds it (``Seq2Seq(config)``), a
    record by its fields, never the grader's encodings (``{'$make': ...}``); cut at ``n`` characters."""
    import torch
    if isinstance(x, torch.Tensor):
        text = f"{str(x.dtype).replace('torch.', '')} tensor {tuple(x.shape)}"
    elif isinstance(x, dict) and len(x) == 1 and "$make" in x and isinstance(x["$make"], dict):
        n = 2 * n  # the object a call builds says the most: more room
        text = _show_call(x["$make"], n, depth + 1)
    elif isinstance(x, dict) and len(x) == 1 and set(x) & {"$fields", "$batch"} and isinstance(next(iter(x.values())), dict):
        kind = "Batch" if "$batch" in x else "object"
        fields = next(iter(x.values()))
        text = f"{kind}({', '.join(f'{k}={_shown(v, n, depth + 1)}' for k, v in fields.items())})" if depth < 2 \
            else f"{kind}(...)"
    elif isinstance(x, (list, tuple)) and depth < 3:
        inner = ", ".join(_shown(v, n, depth + 1) for v in x)
        text = f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    elif isinstance(x, dict) and depth < 3:
        text = "{" + ", ".join(f"{k!r}: {_shown(v, n, depth + 1)}" for k, v in x.items()) + "}"
    else:
        text = repr(x)
    return text if len(text) <= n else text[:n] + "..."


def _show_call(call: dict, n: int = 40, depth: int = 0) -> str:
    """A call of a question as the student would write it: ``loss_fn(Seq2Seq(config), Batch(...))``,
    ``MultiHeadAttention(32, 4).forward(float32 tensor (2, 5, 32), ...)``."""
    def arguments(args, kwargs):
        return ", ".join([_shown(a, n, depth) for a in args or []]
                         + [f"{k}={_shown(v, n, depth)}" for k, v in (kwargs or {}).items()])
    shown = f"{call.get('fn', '?')}"
    if "init" in call:
        shown += f"({arguments(call['init'], call.get('init_kwargs'))})"
        if call.get("steps"):
            return shown + "".join(f".{step.get('method') or '__call__'}(...)" for step in call["steps"])
        if call.get("object") or depth:
            return shown if not call.get("method") else shown + f".{call['method']}(...)"
        return shown + (f".{call['method']}" if call.get("method") else "") + f"({arguments(call.get('args'), call.get('kwargs'))})"
    return shown + f"({arguments(call.get('args'), call.get('kwargs'))})"


_data_lock = __import__("threading").Lock()
_data: dict = {}


def synthetic():
    """(splits, train_data) of the course task, built once per process (the assignments'
    data cell: ``load_synthetic()`` and ``TranslationData.build(splits.train)``)."""
    with _data_lock:
        if not _data:
            from course_utils.data import TranslationData, load_synthetic
            splits = load_synthetic()
            _data["value"] = (splits, TranslationData.build(splits.train))
    return _data["value"]


def checkpoint_problem(state, config, checkpoint: str) -> str:
    """Why the loaded checkpoint ``state`` does not fit the assignment's ``config`` ('' if it does)."""
    from course_utils.training import _config_dict, _with_defaults
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        return f"{checkpoint} is not a checkpoint of the course (save_checkpoint)"
    expected, found = _config_dict(config), _with_defaults(config, state.get("config") or {})
    if expected != found:
        return f"{checkpoint} was saved with another configuration"
    _, data = synthetic()
    if (state.get("extra") or {}).get("tgt_vocab") != data.tgt_vocab.to_list():
        return f"{checkpoint} has another vocabulary"
    return ""


def model_outputs_call(fn: str, config_fn: str, config, state, message: str) -> dict:
    """The call that runs the student's model class ``fn`` with the student's weights on 64
    real test sentences, teacher-forced (the hidden test's twin check)."""
    import dataclasses
    splits, data = synthetic()
    batch = data.with_pairs(splits.test[:64]).batch(range(64))
    return {"fn": fn, "init": [{"$make": {"fn": config_fn, "args": [], "kwargs": dataclasses.asdict(config)}}],
            "state": dict(state["model"]), "args": [batch.src, batch.src_lengths, batch.tgt[:, :-1]],
            "hidden": True, "message": message}


def translation_verdict(model) -> tuple[bool, str]:
    """The test cell's thresholds, computed here with ``model`` (the reference class holding
    the student's weights): BLEU > 90 on the first 200 test pairs; BLEU > 90 and exact match
    > 0.8 on the next 300; exact match > 0.7 on 100 long sentences."""
    from course_utils.data import tokenize
    from course_utils.decoding import translate
    from course_utils.metrics import bleu, exact_match
    splits, data = synthetic()
    model.eval()
    pairs = splits.test[:200]
    score = bleu(translate(model, data, pairs, device="cpu"), [tokenize(t) for _, t in pairs])
    if not score > 90:
        return False, f"BLEU {score:.1f} on the test sentences is too low (more than 90 needed)"
    pairs = splits.test[200:500]
    hyps, refs = translate(model, data, pairs, device="cpu"), [tokenize(t) for _, t in pairs]
    if not (bleu(hyps, refs) > 90 and exact_match(hyps, refs) > 0.8):
        return False, "a hidden case: BLEU or exact match on more test sentences is too low"
    long = [p for p in splits.test if len(tokenize(p[0])) >= 20][:100]
    if not exact_match(translate(model, data, long, device="cpu"), [tokenize(t) for _, t in long]) > 0.7:
        return False, "a hidden case: exact match on long sentences is too low"
    return True, ""


def translation_question(checkpoint: str, student_class: str, config_class: str, config: Callable,
                         build: Callable, reference: Callable[[], dict]) -> TrainedModelQuestion:
    """The trained translation model of an assignment, judged as ``TrainedModelQuestion`` says:
    the student's ``student_class`` (built from ``config_class`` with ``config()``'s fields)
    holding the student's weights must give the reference model's outputs; ``build(config())``
    is that reference model, which then translates for ``translation_verdict``."""
    def calls(state):
        return [model_outputs_call(student_class, config_class, config(), state,
                                   "with the same weights, your model and the reference one disagree")]

    def verdict(state):
        model = build(config())
        model.load_state_dict(state["model"])
        return translation_verdict(model)

    return TrainedModelQuestion(checkpoint, calls, reference, verdict,
                                lambda state: checkpoint_problem(state, config(), checkpoint))

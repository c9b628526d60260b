"""The grader's verdicts (grader.verdicts) hold when a folder is graded by
several threads at once."""

import dataclasses
import json
import threading

import pytest

import test_assignments as T  # noqa: F401
from grader import inside
from grader import verdicts as grader_verdicts

SOURCE = T.SOURCE


def test_reference_answers_computed_in_threads_are_the_ones_computed_alone():
    # A folder is graded by several threads, and the checks draw their inputs and reference
    # weights from torch's global generator (torch.manual_seed): without the lock in
    # grader_verdicts, threads drew each other's numbers and correct answers lost points.
    checks = grader_verdicts.load_checks(SOURCE / "a2_transformer" / "a2_transformer.ipynb")
    # the questions whose cases seed the generator and are quick to compute
    questions = {gid: checks[gid] for gid in ("test_masks", "test_multi_head_attention",
                                              "test_encoder_layer", "test_decoder_layer")}

    def computed():
        fresh = {gid: dataclasses.replace(q, _cache={}) for gid, q in questions.items()}
        return {gid: json.dumps(inside.encode([q.cases(), q.expected()])) for gid, q in fresh.items()}

    alone = computed()
    in_threads, errors = [], []

    def work():
        try:
            in_threads.append(computed())
        except Exception as err:  # noqa: BLE001
            errors.append(repr(err))
    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(in_threads) == 6
    differ = sorted({gid for run in in_threads for gid in run if run[gid] != alone[gid]})
    assert differ == [], f"computed in threads, these questions' cases or answers changed: {differ}"


# ---- run_call: arguments changed in place, gradients; difference inside structures ----------

def _run(fn, *args, **extra):
    return inside.run_call({"f": fn}, {"fn": "f", "args": list(args), **extra})


def _changed(fn, *args, **extra):
    with pytest.raises(inside.ArgumentChanged) as err:
        _run(fn, *args, **extra)
    return str(err.value)


def test_a_call_that_changes_a_tensor_it_was_given_raises_naming_the_argument():
    import torch

    def mask(ids, value):
        ids[0, 0] = value  # in place: the caller's tensor
        return ids
    why = _changed(mask, torch.zeros(2, 3, dtype=torch.long), 7)
    assert why == ("f changed argument 1 (ids, a tensor of shape (2, 3)) in place: the caller's data is lost; "
                   "work on a copy: ids.clone()")

    def fill(x, *, out):
        out.add_(x)
        return out.sum()
    assert "changed argument out (a tensor of shape (3,))" in _changed(fill, torch.ones(3), kwargs={"out": torch.zeros(3)})
    # inside a list, a dict and a record of fields ($fields, a batch)
    assert "argument 1 (xs, item 1, a tensor of shape (2,))" in _changed(lambda xs: xs[1].zero_(), [torch.ones(1), torch.ones(2)])
    assert "work on a copy: d['k'].clone()" in _changed(lambda d: d["k"].mul_(2), {"k": torch.ones(2)})
    why = _changed(lambda batch: batch.tgt.fill_(0), {"$fields": {"src": torch.ones(2), "tgt": torch.ones(2, 4)}})
    assert "argument 1 (batch, field 'tgt', a tensor of shape (2, 4))" in why and "batch.tgt.clone()" in why
    # a field replaced by something else, a list or a dict emptied, a resized tensor
    assert "field 'tgt'" in _changed(lambda batch: setattr(batch, "tgt", batch.tgt[:, 1:]), {"$fields": {"tgt": torch.ones(2, 4)}})
    assert "work on a copy: xs.clone()" in _changed(lambda xs: xs.resize_(1), torch.ones(3))
    assert "work on a copy: dict(words)" in _changed(lambda words: words.clear(), {"a": 1})
    assert "work on a copy: list(xs)" in _changed(lambda xs: xs.pop(), [1, 2])
    # a method of an object the call makes, and the steps of one
    class Layer:
        def __init__(self, n):
            self.n = n

        def forward(self, x):
            return x.mul_(self.n)
    assert "f(...).forward changed argument 1 (x, " in _changed(Layer, torch.ones(2), init=[3], method="forward")
    with pytest.raises(inside.ArgumentChanged, match="f\\(...\\).forward changed argument 1"):
        inside.run_call({"f": Layer}, {"fn": "f", "init": [2], "steps": [{"method": "forward", "args": [torch.ones(2)]}]})


def test_a_call_that_leaves_its_arguments_as_they_were_does_not_raise():
    import torch
    nan = torch.tensor([1.0, float("nan")])
    assert torch.equal(_run(lambda x: x * 2, torch.ones(2)), torch.full((2,), 2.0))
    assert _run(lambda x: x.add_(0).sum(), nan).isnan()           # written to, the same values (NaN too)
    assert _run(lambda xs, d: len(xs) + len(d), [torch.ones(1)], {"a": [1]}) == 2
    model = torch.nn.Linear(2, 2)
    assert _run(lambda m, x: (m.weight.data.zero_(), x.sum())[1], model, torch.ones(2)) == 2  # an object: not looked into
    ids = torch.arange(6).reshape(2, 3)
    inputs = _run(lambda x: x.clone().fill_(1), ids)
    assert torch.equal(ids, torch.arange(6).reshape(2, 3)) and torch.equal(inputs, torch.ones(2, 3, dtype=torch.long))


def test_a_call_with_grad_returns_the_value_and_its_gradients_by_name():
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(4, 3), torch.tensor([1, 0, 1, 1])

    def loss(m, inputs, labels, scale):
        return (m(inputs)[:, 0] - labels).pow(2).mean() * scale.sum()
    out = _run(loss, model, x, y, torch.tensor([2.0]), grad=True)
    assert sorted(out) == ["gradients", "value"] and not out["value"].requires_grad
    assert list(out["gradients"]) == ["args[0].bias", "args[0].weight", "args[1]", "args[3]"]  # sorted; no int tensors
    x1, s1 = x.clone().requires_grad_(), torch.tensor([2.0], requires_grad=True)
    want = torch.autograd.grad(loss(model, x1, y, s1), [model.bias, model.weight, x1, s1])
    for got, w in zip(out["gradients"].values(), want):
        torch.testing.assert_close(got, w)
    assert not model.weight.requires_grad or model.weight.grad is None  # nothing accumulated on the weights
    # and the answer travels as plain data
    assert inside.decode(json.loads(json.dumps(inside.encode(out))))["gradients"].keys() == out["gradients"].keys()


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")  # float(loss), as a student writes it
def test_a_loss_without_a_gradient_says_so_and_loses_with_the_reason():
    import torch
    x = torch.randn(3)
    for detached in (lambda v: torch.tensor(v.sum().item()), lambda v: v.sum().detach(), lambda v: float(v.sum()),
                     lambda v: torch.tensor(v.sum().item(), requires_grad=True)):
        out = _run(detached, x, grad=True)
        assert list(out) == [inside.NO_GRADIENT], out
    question = grader_verdicts.Question(lambda: [grader_verdicts.call("f", x, grad=True)], lambda: {"f": lambda v: v.pow(2).sum()})
    answer = json.dumps([{"value": inside.encode(_run(lambda v: v.pow(2).sum().detach(), x, grad=True))}])
    ok, why = grader_verdicts.judge(question, answer)
    assert not ok and why.endswith(grader_verdicts.NO_GRADIENT_MESSAGE)
    assert "the loss carries no gradient (computed outside autograd: .item(), .detach(), numpy?)" in why
    right = json.dumps([{"value": inside.encode(_run(lambda v: (v * v).sum(), x, grad=True))}])
    assert grader_verdicts.judge(question, right) == (True, "")
    wrong = json.dumps([{"value": inside.encode(_run(lambda v: 2 * v.pow(2).sum() - v.pow(2).sum().detach(),
                                                              x, grad=True))}])
    ok, why = grader_verdicts.judge(question, wrong)
    assert not ok and "at 'gradients', 'args[0]': values differ" in why


def test_an_item_of_the_wrong_kind_inside_a_structure_is_named():
    import torch
    d = grader_verdicts.difference
    assert d([1, (2, 3), [4]], [1, (2, 3), (4,)], 1e-5, 1e-6) == "at item 2: expected a tuple, got a list"
    assert d([1, [[2, 3]]], [1, [(2, 3)]], 1e-5, 1e-6) == "at item 1, item 0: expected a tuple, got a list"
    assert d({"a": [1, [2]]}, {"a": [1, (2,)]}, 1e-5, 1e-6) == "at 'a', item 1: expected a tuple, got a list"
    out = (torch.ones(2), [torch.ones(1), torch.ones(1)])
    assert d(out, (torch.ones(2), (torch.ones(1), torch.ones(1))), 1e-5, 1e-6) == "at item 1: expected a tuple, got a list"
    # at the top, as before: the kind itself, or both values
    assert d([1, 2], (1, 2), 1e-5, 1e-6) == "expected a tuple, got a list"
    assert d([("u", "g"), ("u", "n")], [("u", "g"), ("h", "ug")], 1e-5, 1e-6) == \
        "expected [('u', 'g'), ('h', 'ug')], got [('u', 'g'), ('u', 'n')]"
    assert d(1.0, 1.0, 1e-5, 1e-6) == "" and d([(1, [2.0])], [(1, [2.0])], 1e-5, 1e-6) == ""


def test_the_feedback_shows_a_call_as_a_student_writes_it():
    """Issue 67: the feedback once showed the grader's encodings (``loss_fn({'$make': {'fn':
    'AttentionSeq2Seq', ...``); a call reads as code: objects the call builds as the call that
    builds them, tensors by dtype and shape, a batch by its fields."""
    import torch
    from grader.verdicts import _show_call
    loss = {"fn": "loss_fn", "grad": True,
            "args": [{"$make": {"fn": "AttentionSeq2Seq", "init": [{"$make": {"fn": "Seq2SeqConfig", "args": [],
                                                                              "kwargs": {"d_model": 8}}}],
                                "state": {"w": torch.zeros(3)}}},
                     {"$batch": {"src": torch.zeros(2, 5, dtype=torch.long)}}]}
    assert _show_call(loss) == "loss_fn(AttentionSeq2Seq(Seq2SeqConfig(d_model=8)), Batch(src=int64 tensor (2, 5)))"
    method = {"fn": "MultiHeadAttention", "init": [32, 4], "method": "forward",
              "args": [torch.zeros(2, 5, 32)], "kwargs": {"mask": None}}
    assert _show_call(method) == "MultiHeadAttention(32, 4).forward(float32 tensor (2, 5, 32), mask=None)"
    assert _show_call({"fn": "f", "args": [{"$fields": {"a": 1}}, (4,)]}) == "f(object(a=1), (4,))"
    assert "$" not in _show_call({"fn": "g", "args": [[{"$make": {"fn": "C", "init": []}}] * 3]})


def test_the_graders_in_kernel_module_is_said_without_its_name():
    """One reading of ``inside.IN_KERNEL_MODULE`` hides it from a student, in the feedback's
    tracebacks (``grader.report``: its file, with its folder) and in the changes a verdict
    names (``grader.verdicts``: one of its names)."""
    name = inside.IN_KERNEL_MODULE
    frame = f'File /tmp/code/{name}.py:412, in _refusing(*args)'
    assert inside.said_as_the_graders(frame) == "File the grader's check:412, in _refusing(*args)"
    assert inside.said_as_the_graders(f"{name}._refusing was replaced") == "the grader's own _refusing was replaced"
    assert inside.said_as_the_graders(f"{name} was removed") == "the grader's check was removed"
    assert inside.said_as_the_graders("course_utils.data.vocab.Batch.to was replaced") == \
        "course_utils.data.vocab.Batch.to was replaced"
    found = json.dumps({inside.TAMPERED: [f"{name}._refusing was replaced"]})
    fair, why = grader_verdicts.judge(None, found, cases=[])
    assert not fair and "the grader's own _refusing" in why and name not in why

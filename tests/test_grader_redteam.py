"""Red team of the grader's new checks (grader.inside.run_call: arguments changed in
place, a loss's gradients; a5's count of the key work of generation; where difference() says
a structure differs): each test is a submission that scores points it did not earn, or an
honest answer that loses points, as the grader judges it now. Each fails until its fix;
the docstring says which.

As in tests/test_grader_calls.py (whose helpers these are), the student's side runs in this
process: the source notebook's cells, edited as a student would edit them. Two differences
from those tests: the probe is the probe *cell* the grader adds to the notebook
(``grader.inside.probe_source``), run in the student's globals as the kernel runs it, and
an answer that ``answer_checks`` flags (a reference answer named) scores 0 on the question it
caps, as in ``grader.run.grade``. A test passes when the attack scores 0 *either* way (flagged,
or refused by the probe); since issue 63 almost all are refused by the probe (the run-time checks).
"""

import tempfile
from pathlib import Path

import pytest

import test_assignments as T
from grader import assemble as grader_assemble
from grader import cells as grader_cells
from grader import run as grader_run
from grader import inside
from grader import verdicts as grader_verdicts
from test_grader_calls import IN_PLACE_MASK, MASK_QUESTIONS, QKV, _checks, _namespace, _replace
from test_grader_calls import _grading_device  # noqa: F401  (autouse: the grader's device, the CPU)

pytestmark = pytest.mark.integration  # `make integration` (Makefile)


ROOT = T.ROOT


def _probed(name, question, namespace, tmp_path):
    """(full marks?, why not): the grader's probe cell for ``question`` run in ``namespace``
    (the student's globals), as the kernel runs it, and judged as the grader judges."""
    q = _checks(name)[question]
    work = Path(tempfile.mkdtemp(prefix=f"{name}-{question}-", dir=tmp_path))
    (work / "in").mkdir()
    (work / "in" / f"{question}.json").write_text(grader_verdicts.inputs(q.cases()))
    cell = inside.probe_source(question, str(work), inside.code_folder(work))
    exec(compile(cell, f"probe {question}", "exec"), namespace)
    out = work / "out" / f"{question}.json"
    return grader_verdicts.judge(q, out.read_text() if out.exists() else None)


def _graded(name, questions, tmp_path, **edits):
    """(points, why lost) of the source's solutions with ``edits`` on ``questions``: 0 for a
    question the answer check zeroes, else the probe's verdict."""
    for question in questions:  # the grader's answers, computed before any student code runs here
        _checks(name)[question].expected()
    points = grader_cells.points(T._source(name))
    zeroed = grader_assemble.check_answers(T._solved_release(name, **dict(edits)), T._source(name)).zeroed
    namespace = _namespace(name, **dict(edits))
    total, why = 0.0, {}
    for question in questions:
        if question in zeroed:
            why[question] = f"answer check: {zeroed[question]}"
            continue
        ok, reason = _probed(name, question, namespace, tmp_path)
        total += points[question] if ok else 0.0
        if not ok:
            why[question] = reason
    return total, why


# ---- 1. the probe cell's own names, globals of the student's kernel while the probe runs ----

def _in_mask_tokens(line):
    return lambda code: _replace(("    inputs = ids\n", f"    inputs = ids\n    {line}\n"))(IN_PLACE_MASK(code))


def test_the_grader_module_is_out_of_reach_of_the_calls_it_makes(tmp_path, monkeypatch):
    """The probe cell binds ``_grader_sys`` and ``_grader_sandbox`` in the kernel's globals and
    only deletes them after the calls: a student's function, called by the probe, reads them
    as globals (answer_checks sees a name no import binds: nothing to flag). One line in
    mask_tokens switches the in-place check off (for every later question too: the module
    stays patched); ``_grader_sys.modules`` is every module, the reference answers included.
    Fix: the probe cell binds no name in the student's globals (e.g. one expression:
    ``__import__("sys").path.insert(...)``, ``__import__("grader_sandbox").probe(globals(), ...)``)
    and answer_checks flags any ``_grader*`` name (or any global no cell binds)."""
    monkeypatch.setattr(inside, "_change", inside._change)  # put back after the test
    score, why = _graded("a4_bert", MASK_QUESTIONS, tmp_path,
                         mask_tokens=_in_mask_tokens("_grader_sandbox._change = lambda x, snap: None"))
    assert score == 0.0, "an in-place mask_tokens scored its points by switching the check off"


def test_the_reference_answers_are_out_of_reach_through_the_probe_cells_sys(tmp_path):
    """The same names: ``_grader_sys.modules['course_utils.gpt']`` is the reference package."""
    cheat = _replace(("""    logits = model(windows[:, :-1])  # (batch, t, vocab)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))""",
                      """    return _grader_sys.modules["course_utils.gpt"].lm_loss(model, windows)"""))
    assert _graded("a5_gpt", ["test_loss"], tmp_path, loss=cheat)[0] == 0.0


# ---- 2. torch patched through an alias of one of its classes --------------------------------

def test_an_alias_of_torch_tensor_cannot_switch_off_the_in_place_check(tmp_path):
    """``_T = torch.Tensor; _T.clone = ...`` (clone returning its input for long tensors): the
    probe's snapshot is ``torch.Tensor.detach(x).clone()``, so an in-place mask_tokens once scored
    3. Once caught by a reading of the answer cells (which followed such aliases, but not every
    form); since issue 63 by the first look (``inside.watch``, the grader's cell before the
    first answer) and the probe's comparison, whatever form the write takes (run in a process of
    its own: a first look stays for every later test of the process)."""
    lines = _in_a_process_of_its_own(
        "from grader import inside\ninside.watch()\n"
        "import pathlib\nimport test_grader_redteam as R\nfrom test_grader_calls import IN_PLACE_MASK, MASK_QUESTIONS\n"
        "patch = ('_T = torch.Tensor\\n_clone = torch.Tensor.clone\\n'\n"
        "         '_T.clone = lambda self, *a, **k: self if self.dtype == torch.long else _clone(self, *a, **k)\\n\\n\\n')\n"
        "points, why = R._graded('a4_bert', MASK_QUESTIONS, pathlib.Path('.'), mask_tokens=lambda code: patch + IN_PLACE_MASK(code))\n"
        "print('points', points)\nprint('why', sorted(why.values())[0])\n", tmp_path)
    assert "points 0.0" in lines, "an in-place mask_tokens scored its points by patching torch.Tensor.clone"
    assert any(line.startswith("why torch or the course package was changed at run time") for line in lines), lines


# ---- 3. a5: the key-work counter, patched or fooled -------------------------------------------

def _uncached(dummy, setup=""):
    """A generate that reads every position again at every step (no cache): ``dummy`` runs
    after the model, with ``n`` the positions a cache would read at that step."""
    return lambda code: code + setup + f'''

@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
             use_cache=True):
    max_len = model.config.max_len
    for i in range(max_new_tokens):
        n = min(idx.shape[1] if i == 0 or not use_cache or idx.shape[1] > max_len else 1, max_len)
        logits = model(idx[:, -max_len:])[:, -1]   # every position, every step
        {dummy}
        idx = torch.cat([idx, next_token(logits, temperature, top_k, top_p, generator)], dim=1)
    return idx
'''


DUMMY_KEYS = ("[F.linear(torch.zeros(idx.shape[0], n, model.config.d_model), b.self_attn.W_k.weight) "
              "for b in model.blocks]  # the key work a cache would do")
FOOLED = {
    # the counter itself (a read-only cell's function) rebound by the answer cell: it reports
    # what a cache would read
    "positions_read rebound": {"cache": _uncached(
        "pass", "\n\ndef positions_read(model, idx, max_new_tokens, **settings):\n"
        "    return [idx.shape[1]] + [1] * (max_new_tokens - 1)\n")},
    # keys projected with a copy of W_k made outside torch's operations (numpy, a list): the
    # counter never sees the copy made, so the real work counts nothing, and dummies of the
    # cached size count what a cache would (the copy only without gradients: the loss keeps its
    # point, its gradients reaching W_k)
    "numpy copy of W_k": {
        "attention": _replace(("self.split_heads(self.W_k(x))", "self.split_heads(F.linear(x, self.W_k.weight "
                               "if torch.is_grad_enabled() else torch.from_numpy(self.W_k.weight.numpy().copy()), "
                               "self.W_k.bias))")),
        "cache": _uncached(DUMMY_KEYS)},
    "tolist copy of W_k": {
        "attention": _replace(("self.split_heads(self.W_k(x))",
                               "self.split_heads(F.linear(x, self.W_k.weight if torch.is_grad_enabled() else "
                               "torch.tensor(self.W_k.weight.tolist()), self.W_k.bias))")),
        "cache": _uncached(DUMMY_KEYS)},
}


@pytest.mark.parametrize("fake", sorted(FOOLED))
def test_a_generate_that_ignores_its_cache_loses_the_cache_question(fake, tmp_path):
    """An uncached generate scores test_cache's 3 points, none of these flagged. Fixes: the
    patch and the rebinding, by answer_checks (a store into, or a rebinding of, any name a
    read-only cell binds, and of any builtin a read-only cell's function reads, is a
    monkeypatch); the copies made outside torch, by no count of work (a count is fooled by
    dummies wherever the real work hides): judge the cache by behaviour, e.g. change every
    block's W_k after each step (where the counter sees a new step begin) and compare the
    tokens with the reference's under the same changes: only keys kept from earlier steps
    give them."""
    assert _graded("a5_gpt", ["test_cache"], tmp_path, **FOOLED[fake])[0] == 0.0


HONEST = {  # a cached generate, its projections or embedding written another correct way
    # per-head weights, broadcast over the batch: matmul expands the weights (b, h, d, d_head)
    "per-head broadcast matmul": {"attention": _replace((QKV, (
        "q, k, v = [x.unsqueeze(1) @ l.weight.view(self.num_heads, self.d_head, self.d_model).transpose(1, 2)"
        " + l.bias.view(self.num_heads, 1, self.d_head) for l in (self.W_q, self.W_k, self.W_v)]")))},
    "bmm with expanded weights": {"attention": _replace((QKV, (
        "q, k, v = [self.split_heads(torch.bmm(x, l.weight.T.expand(x.shape[0], -1, -1)) + l.bias)"
        " for l in (self.W_q, self.W_k, self.W_v)]")))},
    # the lookup as a product with one-hot rows
    "one-hot embedding": {"model": _replace((
        "return self.dropout(self.tok_emb(idx) + self.pos_emb(positions))",
        "return self.dropout(F.one_hot(idx, self.config.vocab_size).to(self.tok_emb.weight.dtype) "
        "@ self.tok_emb.weight + self.pos_emb(positions))"))},
}


@pytest.mark.parametrize("variant", sorted(HONEST))
def test_a_cached_generate_keeps_the_cache_question_however_it_multiplies(variant, tmp_path):
    """Every other question passes with these; test_cache says [30, 6, 6, ...] (per-head
    broadcast: batch x heads times the work), [15, 3, ...] (bmm: batch times) or one step in
    all (one-hot: no integer ids meet the token embedding, so no step ever starts). The
    counter takes the work of an operation as (weight elements) x (data elements) / d_in,
    right for a weight applied to every row of the data, not for a batched product (an
    expanded weight's elements are counted once per batch, and the data's again). Fix: the
    multiply-adds of an operation from its own formula (torch.utils.flop_counter's registry:
    mm, addmm, bmm, baddbmm, ...), times the key weights' share of the weight operand's
    distinct elements; a step that starts at the first key work after any use of the token
    embedding with data not made from the model's states (or another step boundary)."""
    assert _graded("a5_gpt", ["test_cache"], tmp_path, **HONEST[variant]) == (3.0, {})


# ---- 4. honest answers refused by the in-place check and the loss's record -------------------

IN_PLACE_CACHE = _replace(("""    new_cache = []
    for i, block in enumerate(model.blocks):
        x, present = block(x, None if cache is None else cache[i])
        new_cache.append(present)
    return model.logits(model.norm(x[:, -1])), new_cache""", """    if cache is None:
        cache = [None] * len(model.blocks)
    for i, block in enumerate(model.blocks):
        x, cache[i] = block(x, cache[i])  # the list updated in place, as Hugging Face's caches are
    return model.logits(model.norm(x[:, -1])), cache"""))


def test_a_step_that_updates_its_cache_list_in_place_keeps_the_cache_question(tmp_path):
    """The notebook asks for '(logits, the new cache)' and never says the cache given must stay
    as it was; updating it in place (Hugging Face's DynamicCache does) is right for generation,
    passes every visible test, and loses the 3 points: 'step changed argument 3 (cache, item 0,
    item 0, a tensor ...)'. Fix: the cache calls of step say that argument may change (a call
    option the check honours), or the notebook says 'return a new list, leave the one given
    as it was' (and this test then expects the refusal)."""
    assert _graded("a5_gpt", ["test_cache"], tmp_path, cache=IN_PLACE_CACHE) == (3.0, {})


@pytest.mark.parametrize("name", ["a1_bahdanau", "a2_transformer"])
def test_a_loss_may_use_what_a_batch_offers(name, tmp_path):
    """a1's own test cell weighs rows by ``batch.num_tokens`` (course_utils.data.Batch, what
    train() gives loss_fn); the grader's batch is a SimpleNamespace of four fields, so a sum
    divided by ``batch.num_tokens`` (the same value, the same gradients) raises AttributeError
    (also ``len(batch)``, ``batch.to(device)``, ``batch.index``). Not new with this change, but
    the loss questions' own. Fix: ``$fields`` makes a course_utils.data.Batch (or a record with
    its properties and methods), which the in-place check and ``leaf`` walk as a record."""
    question, cell, line = {
        "a1_bahdanau": ("test_loss", "loss", "return nn.functional.nll_loss(log_probs.transpose(1, 2), "
                                             "batch.tgt[:, 1:], ignore_index=PAD_ID)"),
        "a2_transformer": ("test_loss", "loss", "return F.cross_entropy(logits.transpose(1, 2), "
                                                "batch.tgt[:, 1:], ignore_index=PAD_ID)")}[name]
    summed = line.replace("ignore_index=PAD_ID)", "ignore_index=PAD_ID, reduction='sum') / batch.num_tokens")
    points = grader_cells.points(T._source(name))[question]
    assert _graded(name, [question], tmp_path, **{cell: _replace((line, summed))}) == (points, {})


def test_an_item_replaced_in_a_list_is_named_as_the_list_changed():
    """A list item replaced by another object (``xs[0] = new``) is reported as the tensor
    changed in place, with the advice ``xs[0].clone()``, which does not help (the list must be
    copied: ``list(xs)``). Fix: the snapshot keeps each item's identity; an item that is not
    the same object any more is the container's change."""
    import torch
    for fn, arg, advice in [(lambda xs: xs.__setitem__(0, torch.zeros(2)), [torch.ones(2)], "list(xs)"),
                            (lambda d: d.__setitem__("k", d["k"] * 2), {"k": torch.ones(2)}, "dict(d)")]:
        with pytest.raises(inside.ArgumentChanged) as err:
            inside.run_call({"f": fn}, {"fn": "f", "args": [arg]})
        assert f"work on a copy: {advice}" in str(err.value), str(err.value)


def test_a_tensor_given_that_changes_class_and_values_is_a_changed_argument():
    """The call zeroes its argument, then makes it a subclass whose ``__torch_function__`` gives
    the old values to ``torch.Tensor.detach`` (what ``_same_tensor`` reads it with): no change
    was seen (in a4's mask_tokens, unflagged: ``x.__class__ = ...`` and ``hasattr(x, "orig")``
    are allowed). Fixed: the snapshot keeps the exact type (a tensor whose class changed has
    changed) and reads values with torch functions off (``torch._C.DisableTorchFunctionSubclass``)."""
    import torch

    class Pristine(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.Tensor.detach and hasattr(args[0], "orig"):
                return args[0].orig
            return super().__torch_function__(func, types, args, kwargs or {})

    def mask(ids):
        orig = ids.clone()
        ids.zero_()  # the caller's ids, changed in place
        ids.orig, ids.__class__ = orig, Pristine
        return orig.sum()

    ids = torch.arange(6)
    with pytest.raises(inside.ArgumentChanged):
        inside.run_call({"f": mask}, {"fn": "f", "args": [ids]})
    assert torch.Tensor.as_subclass(ids, torch.Tensor).sum() == 0  # (it did change them)


# ---- torch and the course changed at run time (issue 38) ----------------------------------------
# The red team found about 45 forms of writing into torch that the reading of the answer cells
# does not flag (the first eight below). What they change is
# caught when it runs instead: the grader's cell before the first answer takes a first look at
# torch and the course package (inside.watch) and every probe compares before and after
# its calls (inside.changed); a question probed while they differ scores 0.

T_CLONE = "lambda self, *a, **k: self"
RUNTIME_WRITES = {  # name -> an answer cell's code (import torch, math already done), each confirmed to patch torch
    # the writes a reading of the code once flagged (issue 63 dropped that reading: behaviour is judged)
    "plain assignment": "torch.testing.assert_close = lambda *args, **kwargs: None",
    "setattr": "setattr(torch, 'allclose', lambda *args, **kwargs: True)",
    "an alias in a function": f"def _quiet():\n    T = torch.Tensor\n    T.clone = {T_CLONE}\n_quiet()",
    "tuple unpacking": f"T, = (torch.Tensor,)\nT.clone = {T_CLONE}",
    "under an if": f"if True:\n    T = torch.Tensor\n    T.clone = {T_CLONE}",
    "a loop target": "for T in (torch.testing,):\n    setattr(T, 'assert_close', print)",
    "type() of a tensor": f"type(torch.zeros(1)).clone = {T_CLONE}",
    "through a parameter": f"def _hack(T):\n    T.clone = {T_CLONE}\n_hack(torch.Tensor)",
    "chained assignment": f"a = torch.Tensor.clone = {T_CLONE}",
    "walrus": f"if (T := torch.Tensor):\n    T.clone = {T_CLONE}",
    "comprehension target": "[setattr(m, 'assert_close', lambda *a, **k: None) for m in [torch.testing]]",
    "with ... as": f"import contextlib\nwith contextlib.nullcontext(torch.Tensor) as T:\n    T.clone = {T_CLONE}",
    "match capture": f"match torch.Tensor:\n    case T:\n        T.clone = {T_CLONE}",
    "default argument": f"def _f(T=torch.Tensor):\n    T.clone = {T_CLONE}\n_f()",
    "class attribute": f"class _H:\n    T = torch.Tensor\n_H.T.clone = {T_CLONE}",
    "global": f"def _f():\n    global _T\n    _T = torch.Tensor\n_f()\n_T.clone = {T_CLONE}",
    "x.__class__": f"torch.zeros(1).__class__.clone = {T_CLONE}",
    "__mro__": "torch.nn.Linear.__mro__[1].__call__ = lambda self, *a, **k: None",
    "obj.__setattr__": "torch.testing.__setattr__('assert_close', lambda *a, **k: None)",
    "type.__setattr__": f"type.__setattr__(torch.Tensor, 'clone', {T_CLONE})",
    "a container": f"_boxes = [torch.Tensor]\n_boxes[0].clone = {T_CLONE}",
    "functools.update_wrapper": ("import functools\n"
                                 "functools.update_wrapper(torch.nn.functional.silu, lambda *a, **k: None, "
                                 "assigned=('__code__',), updated=())"),
    "a function's defaults": "torch.nn.functional.softmax.__defaults__ = (None, 3, None)",
    "deleted": "del torch.nn.functional.gelu",
    "the course package": "import course_utils.data as _d\n_d.Batch.to = lambda self, *a, **k: self",
    "a torch function mode left on": ("from torch.overrides import TorchFunctionMode\n"
                                      "class _Agree(TorchFunctionMode):\n"
                                      "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
                                      "        return True if func is torch.equal else func(*args, **(kwargs or {}))\n"
                                      "_Agree().__enter__()"),
    "a dispatch mode left on": ("from torch.utils._python_dispatch import TorchDispatchMode\n"
                                "class _M(TorchDispatchMode):\n"
                                "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
                                "        return func(*args, **(kwargs or {}))\n_M().__enter__()"),
    "a module-wide forward hook": ("torch.nn.modules.module.register_module_forward_hook("
                                   "lambda module, args, out: out * 0)"),
    "saved-tensor hooks left on": "torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * 0).__enter__()",
    "another device by default": "torch.set_default_device('meta')",
    # last: it stays for every case after it (torch.equal says True from here on)
    "a kernel of torch's own": "_lib = torch.library.Library('aten', 'IMPL')\n_lib.impl('equal', lambda a, b: True, 'CPU')",
}
HONEST_AT_RUN_TIME = {  # what answers and locked cells do: nothing to report
    "train a small model": ("model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))\n"
                            "opt = torch.optim.AdamW(model.parameters(), lr=1e-2)\n"
                            "for _ in range(3):\n    loss = torch.nn.functional.cross_entropy(model(torch.randn(5, 4)), "
                            "torch.tensor([0, 1, 0, 1, 1]))\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
                            "torch.save(model.state_dict(), 'm.pt')\nmodel.load_state_dict(torch.load('m.pt'))"),
    "a subclass of torch's with its own methods": ("class Head(torch.nn.Module):\n    def forward(self, x):\n"
                                                   "        return x.softmax(-1)\nHead()(torch.randn(2, 3))\n"
                                                   "class T2(torch.Tensor):\n    pass\n"
                                                   "t = torch.zeros(2).as_subclass(T2)\nt.note = 1\n"
                                                   "x = torch.zeros(3)\nx.__class__ = T2"),
    "settings": ("torch.manual_seed(0)\ntorch.set_num_threads(1)\ntorch.set_default_device('cpu')\ntorch.backends.cudnn.deterministic = True\n"
                 "torch.set_printoptions(precision=3)\ntorch.use_deterministic_algorithms(True, warn_only=True)\n"
                 "with torch.no_grad():\n    pass\nimport torch.fx\nimport torch.distributions\n"
                 "torch.distributions.Categorical(logits=torch.zeros(3)).sample()"),
    "hooks and modes that end": ("from torch.overrides import TorchFunctionMode\n"
                                 "class Passing(TorchFunctionMode):\n"
                                 "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
                                 "        return func(*args, **(kwargs or {}))\n"
                                 "with Passing():\n    torch.zeros(1) + 1\n"
                                 "lin = torch.nn.Linear(2, 2)\nh = lin.register_forward_hook(lambda m, a, o: o)\n"
                                 "lin(torch.zeros(1, 2))\nh.remove()\n"
                                 "with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):\n"
                                 "    torch.zeros(1, requires_grad=True).exp().sum().backward()"),
    "every optimizer and a schedule": ("w = torch.nn.Parameter(torch.randn(3, 3))\n"
                                       "for cls in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop, "
                                       "torch.optim.Adagrad):\n    opt = cls([w], lr=0.01)\n"
                                       "    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)\n"
                                       "    (w ** 2).sum().backward()\n    opt.step()\n    sched.step()\n    opt.zero_grad()"),
    "saved, pickled, copied": ("import copy, io\nm = torch.nn.Linear(2, 2)\nb = io.BytesIO()\ntorch.save(m, b)\n"
                               "b.seek(0)\ntorch.load(b, weights_only=False)\ncopy.deepcopy(m)\n"
                               "torch.save({'w': torch.nn.Parameter(torch.zeros(2))}, io.BytesIO())"),
    # (the red team of the check: a real compile, through inductor and AOT autograd, adds
    # compiled functions, RNG state and operators to torch's private modules as it first runs)
    "compiled, traced, vmapped": ("f = torch.compile(lambda x: torch.relu(x) * 2)\n"
                                  "f(torch.randn(3, 4, requires_grad=True)).sum().backward()\n"
                                  "m = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), "
                                  "backend='aot_eager')\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                                  "for _ in range(2):\n    m(torch.randn(2, 4)).sum().backward()\n    opt.step()\n"
                                  "with torch.no_grad():\n    m(torch.randn(2, 4))\ntorch.compiler.reset()\n"
                                  "torch.jit.trace(torch.nn.Linear(2, 2), torch.zeros(1, 2))\n"
                                  "import torch.func\ntorch.func.vmap(torch.sin)(torch.ones(3))\n"
                                  "torch.func.grad(lambda x: (x * x).sum())(torch.ones(2))\n"
                                  "import torch.fx\ntorch.fx.symbolic_trace(torch.nn.Linear(2, 2))"),
    "torch's own layers and tools": ("mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)\nx = torch.zeros(1, 3, 4)\n"
                                     "mha(x, x, x)\ntorch.nn.TransformerEncoderLayer(4, 2, 8, batch_first=True).eval()(x)\n"
                                     "with torch.autocast('cpu'):\n    torch.nn.Linear(4, 4)(x)\n"
                                     "with torch.inference_mode():\n    x * 2\n"
                                     "import torch.utils.checkpoint as ckpt\n"
                                     "ckpt.checkpoint(torch.nn.Linear(4, 4), x.requires_grad_(), use_reentrant=False).sum().backward()\n"
                                     "from torch.utils.data import DataLoader, TensorDataset\n"
                                     "list(DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=2, shuffle=True))\n"
                                     "torch.nn.utils.clip_grad_norm_(mha.parameters(), 1.0)\n"
                                     "torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(2, 2))"),
    "the course package used": ("from course_utils.data import Batch\nfrom course_utils import runtime\n"
                                "b = Batch(*[torch.zeros(2, 3, dtype=torch.long)] * 5)\n"
                                "b.to('cpu')\nruntime.setup(seed=1)"),
}
_RUNTIME_SCRIPT = """
import json, sys
from grader import inside
import torch, math
found = {{}}
# one process, the honest cases first: each case is compared with a first look taken just before it
# (an attack's change stays for the cases after it, which are compared with a look that has it)
for name, code in json.loads({cases!r}).items():
    inside.watch()
    namespace = {{"torch": torch, "math": math, "__name__": "__main__"}}  # alive until the look, as a kernel's
    try:
        exec(compile(code, name, "exec"), namespace)
        found[name] = inside.changed()
    except BaseException as err:
        found[name] = ["the case failed: " + repr(err)]
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def changed_at_run_time():
    """What ``inside.changed()`` reports after each case of HONEST_AT_RUN_TIME and
    RUNTIME_WRITES, in one process (a forked child per case deadlocked in torch.compile)."""
    import json
    import subprocess
    import sys
    script = _RUNTIME_SCRIPT.format(cases=json.dumps({**HONEST_AT_RUN_TIME, **RUNTIME_WRITES}))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         env={**__import__("os").environ, **grader_run.GRADING_ENV})
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(RUNTIME_WRITES))
def test_a_write_into_torch_in_any_form_is_seen_when_it_runs(case, changed_at_run_time):
    found = changed_at_run_time[case]
    assert found and not any(f.startswith("the case failed") for f in found), found


@pytest.mark.parametrize("case", sorted(HONEST_AT_RUN_TIME))
def test_what_honest_code_does_to_torch_is_not_reported(case, changed_at_run_time):
    assert changed_at_run_time[case] == []


def _in_a_process_of_its_own(script, tmp_path):
    """The stdout lines of ``script`` run in a fresh Python with tests/ on its path
    (a first look taken in the test process would stay for every later test there)."""
    import os
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env={**os.environ, **grader_run.GRADING_ENV, "PYTHONPATH": str(ROOT / "tests")})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout.splitlines()


#: the red team of the check at run time: the answer that changes a4's ids in place, and then,
#: just before it returns, torch.Tensor's is_floating_point and all patched so that the in-place
#: comparison says "unchanged", each removing itself (``del``) when it is first used: by the
#: probe's last look torch is as it was (scored 3 points before the check after every call)
SELF_UNDOING = ("\n\ndef _once(T, keep_all):\n    def fp(self):\n        return True\n"
                "    def agree(self, *a, **k):\n        del T.is_floating_point\n        del T.all\n"
                "        return keep_all(self.new_ones(()).bool())\n"
                "    T.is_floating_point = fp\n    T.all = agree\n")


def test_a_change_to_torch_that_undoes_itself_when_used_is_seen(tmp_path):
    lines = _in_a_process_of_its_own(
        "import pathlib\nfrom grader import inside\ninside.watch()\nimport test_grader_redteam as R\n"
        "from test_grader_calls import IN_PLACE_MASK, MASK_QUESTIONS\n"
        "def edit(code):\n    code = IN_PLACE_MASK(code).replace('    return inputs.to(input_ids.device), labels.to(input_ids.device)', "
        "'    _once(torch.Tensor, torch.Tensor.all)\\n    return inputs.to(input_ids.device), labels.to(input_ids.device)')\n"
        "    assert '_once(' in code\n    return code + R.SELF_UNDOING\n"
        "points, why = R._graded('a4_bert', MASK_QUESTIONS, pathlib.Path('.'), mask_tokens=edit)\n"
        "print('points', points)\nprint('why', sorted(why.values())[0])\n", tmp_path)
    assert "points 0.0" in lines, lines
    assert any(line.startswith("why torch or the course package was changed at run time (torch.Tensor.is_floating_point "
                               "was added; torch.Tensor.all was added)") for line in lines), lines
    # and the answer check does not see it (the reason the check at run time exists)
    import test_grader_calls as C
    edited = C.IN_PLACE_MASK
    code = "def _once(T, keep_all):\n    T.all = keep_all\n_once(torch.Tensor, torch.Tensor.all)"
    assert not T._checked("a4_bert", mask_tokens=lambda c: edited(c) + "\n" + code).findings


def test_a_probe_after_a_write_into_torch_scores_nothing_and_says_what_changed(tmp_path):
    """The probe cell refuses to judge while torch is not as the first look found it, with the
    solutions' answers otherwise right (a5's attention, after an in-kernel patch of
    ``torch.Tensor.clone`` that the answer check does not flag)."""
    import subprocess
    import sys
    script = ("from grader import inside\ninside.watch()\n"
              "import test_grader_redteam as R\nimport torch, pathlib, tempfile\n"
              "ns = R._namespace('a5_gpt')\n"
              "print('clean', R._probed('a5_gpt', 'test_attention', ns, pathlib.Path(tempfile.mkdtemp())))\n"
              f"exec({RUNTIME_WRITES['tuple unpacking']!r}, {{'torch': torch}})\n"
              "print('patched', R._probed('a5_gpt', 'test_attention', ns, pathlib.Path(tempfile.mkdtemp())))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env={**__import__("os").environ, **grader_run.GRADING_ENV,
                                            "PYTHONPATH": str(ROOT / "tests")})
    lines = [line for line in run.stdout.splitlines() if line.startswith(("clean", "patched"))]
    assert lines[0] == "clean (True, '')", run.stdout[-2000:] + run.stderr[-2000:]
    assert lines[1].startswith("patched (False, 'torch or the course package was changed at run time "
                               "(torch.Tensor.clone was added)"), lines[1]


_QUICK_PASS_CASES = r'''
import json, torch
from grader import inside as G
G.watch()
T, mod = torch.Tensor, __import__("torch._tensor", fromlist=["_"])
def report(tag):
    print(tag, json.dumps([G.changed(G.QUICK), G.changed()]))
report("clean")
print("passes", len(G._first_look["accepted"]))  # the quick and the full one: what follows is checked by them first
report("again")                                # from the identity pass
backward = T.backward
T.backward = lambda self, *a, **k: None        # a method of a class replaced
report("replaced")
T.backward = backward
report("restored")
code = mod._rebuild_from_type.__code__
mod._rebuild_from_type.__code__ = (lambda *a: None).__code__   # a function's code swapped
report("code")
mod._rebuild_from_type.__code__ = code
report("restored")
norm = torch.norm
del torch.norm                                 # removed, then another object under the same name
torch.norm = lambda *a, **k: norm(*a, **k)
report("renamed")
torch.norm = norm
report("restored")
torch.__my_counter = 3                         # a number added: let pass, as the full comparison does
report("number")
torch.Tensor.sneaky = lambda self: 0           # ...and code added after it: seen
report("added")
del torch.Tensor.sneaky
report("restored")
'''


def test_the_quick_pass_of_the_check_misses_nothing_the_full_comparison_finds(quick_pass_runs):
    """``changed`` compares in full only when an object it read has moved since it last found
    nothing (an identity pass, run on every call of a probe): each change below, made after such
    a pass, is still reported, in the quick (``QUICK``) and the full comparison, and once undone
    nothing is. A rebinding the comparison lets pass (a number) stays let pass."""
    lines = quick_pass_runs

    import json
    found = {}
    for line in lines:
        tag, _, rest = line.partition(" ")
        if rest.startswith("["):
            found.setdefault(tag, []).append(json.loads(rest))
    assert found["clean"] == [[[], []]] and found["again"] == [[[], []]] and "passes 2" in lines
    assert found["restored"] == [[[], []]] * 4 and found["number"] == [[[], []]]
    for tag, what in [("replaced", "torch.Tensor.backward was replaced"),
                      ("code", "torch._tensor._rebuild_from_type.__code__ was replaced"),
                      ("renamed", "torch.norm was replaced"), ("added", "torch.Tensor.sneaky was added")]:
        (quick, full), = found[tag]
        assert what in quick and what in full, (tag, quick, full)


#: the red team of that quick pass (each case once beat it; the full comparison saw each):
#: a patch made by the submission's code while a comparison ran (a hook in what ``_state``
#: reads, after the look), operator.is_ and builtins.all replaced, a value let pass as a
#: number made callable later, a class that left torch's modules and came back patched, and a
#: patch put in by one comparison and taken out at the start of the next. Each case runs after a
#: fresh first look and is undone after it; both passes are run, the quick one and (with what it
#: remembers cleared) the full one, and must agree.
_QUICK_PASS_ATTACKS = r'''
import json, operator, builtins, sys, torch, course_utils.data
import torch.nn.functional as F
from grader import inside as G

def both(tag):
    new = [G.changed(G.QUICK), G.changed()]
    G._first_look["accepted"].clear()
    print(tag, json.dumps([new, [G.changed(G.QUICK), G.changed()]]))

def fresh():
    G.watch()
    assert G.changed(G.QUICK) == [] and G.changed() == [] and len(G._first_look["accepted"]) == 2

def inside_a_comparison(test):
    f = sys._getframe(2)
    while f is not None and f.f_code.co_name != "changed":
        f = f.f_back
    return f is not None and test(f.f_locals)

relu = F.relu
class Hook(str):  # torch.library._impls holds it: _state() calls startswith on each
    def startswith(self, prefix, *a):
        if inside_a_comparison(lambda l: "now" in l):
            F.relu = lambda x, *a, **k: relu(x) * 0 + 42
        return str.startswith(self, prefix, *a)
fresh()
hook = Hook("zzz/hook"); torch.library._impls.add(hook); F.rt_dummy = 0  # (a number: a full comparison next)
G.changed(G.QUICK); G.changed()
both("hook")
torch.library._impls.discard(hook); F.relu = relu; del F.rt_dummy

fresh()
is_, equal, rsub = operator.is_, torch.equal, vars(torch.Tensor)["__rsub__"]
operator.is_ = lambda a, b: True
torch.equal = lambda a, b: True; del torch.Tensor.__rsub__; torch.Tensor.all = lambda self, *a, **k: torch.tensor(True)
both("operator")
operator.is_, torch.equal, torch.Tensor.__rsub__ = is_, equal, rsub; del torch.Tensor.all

fresh()
real_all = builtins.all
builtins.all = lambda it: True if sys._getframe(1).f_code.co_name == "_as_when" else real_all(it)
torch.equal = lambda a, b: True
both("builtins")
builtins.all, torch.equal = real_all, equal

fresh()
class Box: pass
version, F.rt_added, torch.__version__ = torch.__version__, Box(), Box()
G.changed(G.QUICK); G.changed()
Box.__call__ = lambda self, *a, **k: 42
both("callable")
torch.__version__ = version; del F.rt_added

from torch.utils._contextlib import _DecoratorContextManager as D
fresh()
call = D.__call__
D.__module__ = "elsewhere"
G.changed(G.QUICK); G.changed()
D.__call__ = lambda self, f: (lambda *a, **k: "evil")
D.__module__ = "torch.utils._contextlib"
both("returned")
D.__call__ = call

fresh()
evil = lambda self, *a, **k: torch.tensor(True)
class In(str):
    def startswith(self, prefix, *a):
        if inside_a_comparison(lambda l: "now" in l and l["modules"] == G.QUICK):
            torch.Tensor.all = evil
        return str.startswith(self, prefix, *a)
class Out(str):
    def split(self, *a):
        if inside_a_comparison(lambda l: l["modules"] is None) and "all" in vars(torch.Tensor):
            del torch.Tensor.all
        return str.split(self, *a)
torch.library._impls.add(In("zzz/in")); sys.modules[Out("zzz_out")] = sys; torch.rt_dummy = 0
for old in (False, True):
    found = []
    for m in (None, G.QUICK, G.QUICK, G.QUICK, None):  # a probe: before, three calls, after
        if old:
            G._first_look["accepted"].clear()
        found.append(G.changed(m))
    print("in-and-out" + ("-old" if old else ""), json.dumps(found))
'''


@pytest.fixture(scope="module")
def quick_pass_runs(tmp_path_factory):
    """The stdout lines of both scripts above, run one after the other in one fresh process
    (each of its cases is undone before the next)."""
    return _in_a_process_of_its_own(_QUICK_PASS_CASES + _QUICK_PASS_ATTACKS, tmp_path_factory.mktemp("quick"))


def test_the_quick_pass_falls_back_on_each_attack_that_once_beat_it(quick_pass_runs):
    import json
    found = {}
    for line in quick_pass_runs:
        tag, _, rest = line.partition(" ")
        if rest.startswith("["):
            found[tag] = json.loads(rest)
    for tag, what in [("hook", "torch.nn.functional.relu was replaced"), ("operator", "torch.equal was replaced"),
                      ("builtins", "torch.equal was replaced"), ("callable", "torch.__version__ was replaced"),
                      ("returned", "torch.utils._contextlib._DecoratorContextManager.__call__ was replaced")]:
        new, old = found[tag]
        assert new == old, (tag, new, old)
        assert what in new[1], (tag, new)
    assert found["in-and-out"] == found["in-and-out-old"] and any(found["in-and-out"][1:4]), found


# ---- 4. grader-3's cold attack (issue 63): torch's attention reached by another name -----------

def _with_refusals(work, source):
    """``work`` with ``in/`` holding the assignment's refused torch functions and operators, as
    ``grader.run.grade`` writes them (``source``: the assignment's source notebook)."""
    import json
    from grader import student_side
    (work / "in").mkdir(parents=True, exist_ok=True)
    (work / "in" / inside.FORBIDDEN_FILE).write_text(json.dumps(student_side.forbidden(source)))
    return work


def _probed_refusing(name, question, namespace, tmp_path):
    """``_probed`` with the assignment's refused torch functions and operators in the inputs,
    as ``grader.run.grade`` writes them."""
    q = _checks(name)[question]
    work = _with_refusals(Path(tempfile.mkdtemp(prefix=f"{name}-{question}-", dir=tmp_path)), T._source(name))
    (work / "in" / f"{question}.json").write_text(grader_verdicts.inputs(q.cases()))
    exec(compile(inside.probe_source(question, str(work), inside.code_folder(work)),
                 f"probe {question}", "exec"), namespace)
    out = work / "out" / f"{question}.json"
    return grader_verdicts.judge(q, out.read_text() if out.exists() else None)


MATH_ATTENTION = ("def scaled_dot_product_attention(q, k, v, mask=None):\n"
                  "    out, weights = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=mask)\n"
                  "    return out, weights\n")


def test_torchs_math_attention_by_its_operator_name_is_refused(tmp_path):
    """a2: ``torch.ops.aten._scaled_dot_product_attention_math`` is torch's attention (output and
    weights) under a name the refused list once missed (no path to ``scaled_dot_product_attention``
    passes through it; grader-3's cold attack: it ran in the probe). Fix:
    ``grader.student_side.SAME_WORK``."""
    for gid, edit in (("attention", lambda code: MATH_ATTENTION),):
        namespace = _namespace("a2_transformer", **{gid: edit})
        ok, why = _probed_refusing("a2_transformer", "test_attention", namespace, tmp_path)
        assert not ok, "torch's math attention scored test_attention"
        assert "reference answer" in why or "ForbiddenOperation" in why, why
    # the honest answer still passes the same probe
    ok, why = _probed_refusing("a2_transformer", "test_attention", _namespace("a2_transformer"), tmp_path)
    assert ok, why


def test_the_courses_fused_attention_is_a_reference_answer_in_a2():
    """a2: ``course_utils.attention.fused_attention`` computes attention's output with torch's fused
    kernel, and the refusal lets the course's own code through: in a2 it is a tripwire in the
    sandbox and, named in an answer, a finding on its question (grader-3's cold attack)."""
    from grader import run as grader_run
    from grader import student_side
    source_path = T.SOURCE / "a2_transformer" / "a2_transformer.ipynb"
    compared = student_side.compared_names(grader_run.questions_judged_outside(source_path),
                                           grader_verdicts.reference_code(source_path))
    references = student_side.reference_names(T._source("a2_transformer"), compared)
    assert "course_utils.attention.fused_attention" in references
    cheat = ("from course_utils.attention import fused_attention\n\n"
             "def scaled_dot_product_attention(q, k, v, mask=None):\n"
             "    w = torch.softmax((q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(\n"
             "        mask == False if mask is not None else torch.zeros((), dtype=torch.bool), float('-inf')), -1)\n"
             "    return fused_attention(q, k, v, mask), w.nan_to_num(0.0)\n")
    zeroed = grader_assemble.check_answers(T._solved_release("a2_transformer", attention=lambda code: cheat),
                                           T._source("a2_transformer"), references).zeroed
    assert "test_attention" in zeroed and "fused_attention" in zeroed["test_attention"], zeroed


#: a2's attention by torch's fused kernel, after switching the probe's refusal off in the grader's
#: own module, which the kernel has imported before the first answer cell (the watch cell)
SWITCHED_OFF = ("import sys as _sys, contextlib as _contextlib\n"
                "_sys.modules['grader_sandbox']._refusing = lambda forbidden: _contextlib.nullcontext()\n\n"
                "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                "    d = q.shape[-1]\n"
                "    scores = q @ k.transpose(-2, -1) / d ** 0.5\n"
                "    if mask is not None:\n"
                "        scores = scores.masked_fill(~mask, float('-inf'))\n"
                "    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)\n"
                "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask | ~mask.any(-1, keepdim=True))\n"
                "    if mask is not None:\n"
                "        out = out.masked_fill(~mask.any(-1, keepdim=True), 0.0)\n"
                "    return out, weights\n")


def test_the_grader_module_in_the_kernel_cannot_switch_the_refusal_off(tmp_path):
    """The kernel imports the grader's module (``grader_sandbox``) in the watch cell, before the
    first answer: an answer cell that replaced its ``_refusing`` ran torch's fused attention in the
    probe and scored test_attention (grader-3's cold attack). Fix: the grader's own module is one
    of those the first look watches (``grader.inside.WATCHED``), so the probe sees the change."""
    work = tmp_path / "code"
    code = inside.code_folder(work)
    lines = _in_a_process_of_its_own(
        f"import sys, pathlib, tempfile\nsys.path.insert(0, {code!r})\nimport grader_sandbox\ngrader_sandbox.watch()\n"
        "import test_grader_redteam as R\n"
        "ns = R._namespace('a2_transformer')\n"
        "print('honest', R._probed_refusing('a2_transformer', 'test_attention', ns, pathlib.Path(tempfile.mkdtemp())))\n"
        "ns = R._namespace('a2_transformer', attention=lambda code: R.SWITCHED_OFF)\n"
        "print('switched', R._probed_refusing('a2_transformer', 'test_attention', ns, pathlib.Path(tempfile.mkdtemp())))\n",
        tmp_path)
    assert "honest (True, '')" in lines, lines
    switched = next(line for line in lines if line.startswith("switched"))
    assert switched.startswith('switched (False, "torch or the course package was changed at run time '
                               '(the grader\'s own _refusing was replaced'), switched
    assert "grader_sandbox" not in switched   # the feedback does not name the in-kernel module


_WEIGHTS = ("    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
            "    if mask is not None:\n"
            "        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)\n")
_FUSED = ("getattr(F, 'scaled_dot_product_' + 'attention')(q, k, v, attn_mask=None if mask is None else "
          "mask | ~mask.any(-1, keepdim=True))")
#: a2's attention whose output comes from torch's fused kernel, called in a thread of its own (the
#: refusal while the grader's calls ran was a torch mode, which is the calling thread's only)
IN_A_THREAD = ("import threading as _threading\n\n"
               "def scaled_dot_product_attention(q, k, v, mask=None):\n" + _WEIGHTS +
               "    box = []\n"
               f"    _t = _threading.Thread(target=lambda: box.append({_FUSED}))\n"
               "    _t.start()\n    _t.join()\n"
               "    out = box[0] if mask is None else box[0].masked_fill(~mask.any(-1, keepdim=True), 0.0)\n"
               "    return out, weights\n")
#: ... computed in the answer cell itself, outside the grader's calls (as a cell that read the
#: grader's inputs in in/<question>.json, readable before the probe runs, would compute them)
IN_THE_CELL = ("q = k = v = torch.randn(2, 3, 4)\nmask = None\n_precomputed = " + _FUSED + "\n\n"
               "def scaled_dot_product_attention(q, k, v, mask=None):\n" + _WEIGHTS +
               "    return weights @ v, weights\n")


def test_torchs_fused_attention_is_refused_in_every_thread_and_every_cell(tmp_path):
    """grader-3's cold attack: the listed operators were refused only in the calling thread and only
    while the grader's calls ran; a thread started in a call (IN_A_THREAD) scored test_attention,
    and an answer cell could compute with them outside the calls (the grader's inputs are readable
    there). Fix: ``inside.refuse_everywhere``, from the watch cell on, in torch's dispatcher.
    The honest answer, and a6's handed-out layer (the course's ``fused_attention``, written out in
    the sandbox's package), still run."""
    work = _with_refusals(tmp_path / "work", T._source("a2_transformer"))
    code = inside.code_folder(tmp_path / "code")
    lines = _in_a_process_of_its_own(
        f"import sys, pathlib, tempfile\nsys.path.insert(0, {code!r})\nimport grader_sandbox\n"
        f"grader_sandbox.watch({str(work)!r})\n"
        "import test_grader_redteam as R\n"
        "print('honest', R._probed_refusing('a2_transformer', 'test_attention', R._namespace('a2_transformer'), "
        "pathlib.Path(tempfile.mkdtemp())))\n"
        "ns = R._namespace('a2_transformer', attention=lambda code: R.IN_A_THREAD)\n"
        "print('thread', R._probed_refusing('a2_transformer', 'test_attention', ns, pathlib.Path(tempfile.mkdtemp())))\n"
        "try:\n    R._namespace('a2_transformer', attention=lambda code: R.IN_THE_CELL)\n    print('cell ran')\n"
        "except RuntimeError as err:\n    print('cell refused', str(err).splitlines()[0][:60])\n",
        tmp_path)
    assert "honest (True, '')" in lines, lines
    thread = next(line for line in lines if line.startswith("thread"))
    assert thread.startswith("thread (False, "), thread
    assert any(line.startswith("cell refused ForbiddenOperation: torch's operator aten::_scaled_dot") for line in lines), lines


def test_a6s_handed_out_layer_runs_with_the_fused_kernel_refused(tmp_path):
    """a6's ``EncoderLayer`` (handed out) reaches attention through the course's ``fused_attention``:
    in the sandbox's package that is written out, so with torch's fused kernel refused everywhere
    the layer runs, and agrees with the course's own."""
    from grader import student_side
    source = T._source("a6_vit")
    source_path = T.SOURCE / "a6_vit" / "a6_vit.ipynb"
    compared = student_side.compared_names(grader_run.questions_judged_outside(source_path),
                                           grader_verdicts.reference_code(source_path))
    package = student_side.student_package("a6_vit", source, compared)
    work = _with_refusals(tmp_path / "work", source)
    code = inside.code_folder(tmp_path / "code")
    lines = _in_a_process_of_its_own(
        "import sys, torch\n"
        "from course_utils.vit import EncoderLayer as Course\n"
        "torch.manual_seed(0)\nlayer = Course(16, 2, 32, 0.0).eval()\nx = torch.randn(2, 5, 16)\n"
        "with torch.no_grad():\n    want = layer(x, need_weights=False)[0]\n"
        f"for m in [m for m in sys.modules if m.startswith('course_utils')]:\n    del sys.modules[m]\n"
        f"sys.path.insert(0, {str(package.parent)!r})\nsys.path.insert(0, {code!r})\nimport grader_sandbox\n"
        f"grader_sandbox.watch({str(work)!r})\n"
        "from course_utils.vit import EncoderLayer\n"
        f"assert sys.modules['course_utils.attention'].__file__.startswith({str(package)!r})\n"
        "try:\n    torch.nn.functional.scaled_dot_product_attention(x[:, None], x[:, None], x[:, None])\n    print('fused ran')\n"
        "except RuntimeError:\n    print('fused refused')\n"
        "with torch.no_grad():\n    got = EncoderLayer(16, 2, 32, 0.0).eval()\n    got.load_state_dict(layer.state_dict())\n"
        "    print('difference', float((got(x, need_weights=False)[0] - want).abs().max()))\n", tmp_path)
    assert "fused refused" in lines, lines
    difference = float(next(line for line in lines if line.startswith("difference")).split()[1])
    assert difference < 1e-5, lines


#: the refusal in the dispatcher undone (its torch.library registrations destroyed) and as many
#: kernels registered elsewhere, then IN_A_THREAD's attention
UNDONE = ("import sys as _sys, torch as _torch\n"
          "_n = len([k for k in _torch.library._impls if k.startswith('aten/')])\n"
          "for _lib in _sys.modules['grader_sandbox']._everywhere:\n    _lib._destroy()\n"
          "_mine = _torch.library.Library('aten', 'IMPL')\n"
          "for _op in ['sinc', 'sgn', 'frac', 'erfinv', 'i0', 'lgamma', 'digamma', 'expm1', 'log1p', 'rsqrt',\n"
          "            'trunc', 'xlogy.Tensor'][:_n - len([k for k in _torch.library._impls if k.startswith('aten/')])]:\n"
          "    _mine.impl(_op, lambda *a, **k: None, 'CPU')\n" + IN_A_THREAD)


def test_the_refusal_in_the_dispatcher_cannot_be_undone_unseen(tmp_path):
    """The refusal's registrations are reachable from the kernel (``inside._everywhere``):
    destroyed, with as many other kernels registered so that a count stays the same, the fused
    kernel ran again in a thread. The first look compares which aten kernels are registered from
    Python, not how many (grader-3), so the probe scores nothing and says what was taken out."""
    work = _with_refusals(tmp_path / "work", T._source("a2_transformer"))
    code = inside.code_folder(tmp_path / "code")
    lines = _in_a_process_of_its_own(
        f"import sys, pathlib, tempfile, warnings\nwarnings.simplefilter('ignore')\nsys.path.insert(0, {code!r})\n"
        f"import grader_sandbox\ngrader_sandbox.watch({str(work)!r})\n"
        "import test_grader_redteam as R\n"
        "ns = R._namespace('a2_transformer', attention=lambda code: R.UNDONE)\n"
        "print('undone', R._probed_refusing('a2_transformer', 'test_attention', ns, pathlib.Path(tempfile.mkdtemp())))\n",
        tmp_path)
    undone = next(line for line in lines if line.startswith("undone"))
    assert undone.startswith("undone (False, 'torch or the course package was changed at run time (aten kernels "
                             "registered through torch.library: taken out aten/"), undone


def test_no_program_starts_after_the_first_answer_where_torch_operations_are_refused(tmp_path):
    """A Python started by the submission (``subprocess``, ``multiprocessing``'s spawn) is a new
    interpreter without ``refuse_everywhere``'s refusals: it computed torch's fused attention for
    a call (grader-3). From the watch cell on, no thread of the kernel may execute a program
    (``inside.refuse_exec``, a seccomp filter for every thread); a forked child keeps the
    refusals; a figure (matplotlib's font cache built anew) and tqdm still work."""
    work = _with_refusals(tmp_path / "work", T._source("a2_transformer"))
    code = inside.code_folder(tmp_path / "code")
    lines = _in_a_process_of_its_own(
        f"import io, os, sys, subprocess, tempfile, threading\nos.environ['MPLCONFIGDIR'] = tempfile.mkdtemp()\n"
        f"sys.path.insert(0, {code!r})\nimport grader_sandbox, torch\ngrader_sandbox.watch({str(work)!r})\n"
        "for where in ('main', 'thread'):\n"
        "    box = []\n"
        "    def run():\n"
        "        try:\n            subprocess.run([sys.executable, '-c', 'pass'])\n            box.append('ran')\n"
        "        except PermissionError:\n            box.append('refused')\n"
        "    run() if where == 'main' else (lambda t: (t.start(), t.join()))(threading.Thread(target=run))\n"
        "    print('exec', where, box[0])\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n        torch.nn.functional.scaled_dot_product_attention(*(torch.randn(1, 1, 2, 4),) * 3)\n"
        "        print('child ran')\n"
        "    except RuntimeError:\n        print('child refused')\n"
        "    sys.stdout.flush()\n    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 2])\nplt.title('loss')\nplt.savefig(io.BytesIO())\n"
        "from tqdm.auto import tqdm\nprint('honest', sum(1 for _ in tqdm(range(3))))\n", tmp_path)
    assert lines == ["exec main refused", "exec thread refused", "child refused", "honest 3"], lines

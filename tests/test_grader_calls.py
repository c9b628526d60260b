"""What the grader's calls see beyond the values returned (grader.inside.run_call,
judged by grader.verdicts.judge): a function that changes the tensors it was given,
a loss that carries no gradient (or a wrong one), a generate that does not use its cache.
Each honest mistake or fake answer here returned the right values and once got full points.

The student's side runs in this process, without a sandbox: the source notebook's cells
(its solutions, edited as a student would) in a namespace of their own, probed as the
sandbox's probe cell probes them (``grader.inside.probe``), and judged as the grader judges.
"""

import functools
import os
import sys
import tempfile
from pathlib import Path

import pytest

import test_assignments as T
from grader import cells as grader_cells
from grader import run as grader_run
from grader import inside
from grader import verdicts as grader_verdicts

# A probe cell imports the sandbox's module by the name the kernels know it by
# (grader.inside.probe_source); in the tests' process that name is this very module, whose
# first look (watch) the tests take, as one module serves both in a kernel.
sys.modules.setdefault(inside.IN_KERNEL_MODULE, inside)

pytestmark = pytest.mark.integration  # the assignments' source notebooks run: `make integration` (Makefile)


@pytest.fixture(autouse=True)
def _grading_device(monkeypatch):
    """The probe runs here, in the test's process, with the environment the grader gives the
    student's kernel (the CPU on every machine), also when the tests run with COURSE_DEVICE=cuda."""
    monkeypatch.setenv("COURSE_DEVICE", grader_run.GRADING_ENV["COURSE_DEVICE"])


SOURCE = T.SOURCE

#: cells that load data, train or need the trained model: never run here
HEAVY = {"setup", "skip_training", "data", "baselines", "train_model", "train_or_load", "samples"}


@functools.cache
def _checks(name):
    """The assignment's questions, loaded once (their reference answers are computed once)."""
    return grader_verdicts.load_checks(SOURCE / name / f"{name}.ipynb")


def _namespace(name, **edits):
    """What a student's kernel holds after the source notebook's answer cells (their
    solutions; ``edits``: grade_id -> function changing that cell's code) and the read-only
    helper cells between them; the setup cell's imports, but no data loading or training."""
    import torch
    cells = {grader_cells.grade_id(c): c for c in T._source(name).cells if c.cell_type == "code"}
    setup = cells["setup"].source.replace("summary = setup(seed=0)", "summary = None")
    setup = setup.replace("torch.device(summary.device)", "torch.device('cpu')")
    namespace = {"rng": lambda seed: torch.Generator().manual_seed(seed)}  # a4's data cell
    exec(compile(setup, f"{name}:setup", "exec"), namespace)
    for gid, cell in cells.items():
        if gid in HEAVY or grader_cells.is_test_cell(cell):
            continue
        code = cell.source
        if gid in edits:
            code = edits.pop(gid)(code)
            assert code != cell.source, f"the edit of {gid} changed nothing"
        exec(compile(code, f"{name}:{gid}", "exec"), namespace)
    assert not edits, f"no cell {sorted(edits)}"
    return namespace


def _judged(name, question, namespace, tmp_path):
    """(full marks?, why not) for ``question`` of ``name`` answered by ``namespace``, as the
    grader judges what the sandbox's probe sends back."""
    q = _checks(name)[question]
    work = Path(tempfile.mkdtemp(prefix=f"{name}-{question}-", dir=tmp_path))
    (work / "in").mkdir()
    (work / "in" / f"{question}.json").write_text(grader_verdicts.inputs(q.cases()))
    inside.probe(namespace, question, str(work))
    return grader_verdicts.judge(q, (work / "out" / f"{question}.json").read_text())


def _points(name, questions, namespace, tmp_path):
    """The points ``namespace`` scores on ``questions`` (grade_ids), and the reasons of those lost."""
    points = grader_cells.points(T._source(name))
    total, why = 0.0, {}
    for question in questions:
        ok, reason = _judged(name, question, namespace, tmp_path)
        total += points[question] if ok else 0.0
        if not ok:
            why[question] = reason
    return total, why


def _replace(*pairs):
    def edit(code):
        for old, new in pairs:
            assert old in code, old
            code = code.replace(old, new)
        return code
    return edit


# ---- 1. arguments changed in place -----------------------------------------------------

MASK_QUESTIONS = ("test_mask_tokens_rule", "test_mask_tokens_bulk")
# the labels first, then the caller's ids masked in place (no copy): the same return values
IN_PLACE_MASK = _replace(
    ("    labels = torch.where(chosen, ids, torch.full_like(ids, -100))\n", ""),
    ("    inputs = ids.clone()\n",
     "    labels = torch.where(chosen, ids, torch.full_like(ids, -100))\n    inputs = ids\n"))


def test_a_mask_tokens_that_masks_the_callers_batch_loses_its_questions(tmp_path):
    assert _points("a4_bert", MASK_QUESTIONS, _namespace("a4_bert"), tmp_path) == (3.0, {})
    score, why = _points("a4_bert", MASK_QUESTIONS, _namespace("a4_bert", mask_tokens=IN_PLACE_MASK), tmp_path)
    assert score == 0.0
    for reason in why.values():
        assert "mask_tokens changed argument 1 (input_ids, a tensor of shape" in reason, reason
        assert "work on a copy: input_ids.clone()" in reason, reason


@pytest.mark.parametrize("name", T.NAMES)
def test_no_reference_answer_changes_what_it_is_given(name, monkeypatch):
    """Every question's reference calls, visible and hidden (trained-model questions with the
    shipped checkpoint), run through the check of arguments changed in place: none raises."""
    import torch
    checked = []
    snapshot = inside._snapshot
    monkeypatch.setattr(inside, "_snapshot", lambda x, depth=0: checked.append(depth) or snapshot(x, depth))
    calls = 0
    for gid, question in _checks(name).items():
        if isinstance(question, grader_verdicts.TrainedModelQuestion):
            state = torch.load(SOURCE / name / question.checkpoint, map_location="cpu", weights_only=True)
            cases = question.calls(state)
            question.expected_for(cases)  # raises ArgumentChanged if a reference changed its inputs
        else:
            cases = grader_verdicts.Question(question.calls, question.reference, question.atol, question.rtol).cases()
            grader_verdicts.Question(lambda cases=cases: cases, question.reference).expected()
        calls += len(cases)
    assert calls and checked.count(0) >= calls, "every call's arguments were looked at"


# ---- 2. losses without a gradient, or with a wrong one -----------------------------------

LOSSES = {  # assignment -> (question, answer cell, the solution's line that returns the loss)
    "a1_bahdanau": ("test_loss", "loss",
                    "return nn.functional.nll_loss(log_probs.transpose(1, 2), batch.tgt[:, 1:], ignore_index=PAD_ID)"),
    "a2_transformer": ("test_loss", "loss",
                       "return F.cross_entropy(logits.transpose(1, 2), batch.tgt[:, 1:], ignore_index=PAD_ID)"),
    "a4_bert": ("test_pretraining_loss", "pretraining_loss", "return mlm + nsp"),
    "a5_gpt": ("test_loss", "loss",
               "return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))"),
}
NO_GRADIENT = "carries no gradient (computed outside autograd: .item(), .detach(), numpy?): training cannot learn from it"


def _loss_edit(name, new):
    """(question, edits): the loss answer cell of ``name`` binding its loss to ``loss`` and
    returning ``new`` (an expression of ``loss``) instead."""
    question, cell, line = LOSSES[name]
    expression = line.removeprefix("return ")
    return question, {cell: _replace((line, f"loss = {expression}\n    return {new}"))}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_a_correct_loss_keeps_its_points_gradients_included(name, tmp_path):
    question = LOSSES[name][0]
    assert all(call.get("grad") for call in _checks(name)[question].cases()), "the gradients are compared"
    assert _judged(name, question, _namespace(name), tmp_path) == (True, "")


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("detached", ["torch.tensor(loss.item())", "loss.detach()",
                                      "torch.tensor(loss.detach().numpy())", "loss.item()"])
def test_a_loss_computed_outside_autograd_loses_its_question(name, detached, tmp_path):
    question, edits = _loss_edit(name, detached)
    ok, why = _judged(name, question, _namespace(name, **edits), tmp_path)
    assert not ok and NO_GRADIENT in why, why


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("wrong", [
    "2 * loss - loss.detach()",                                 # the value kept, twice the gradient
    "loss + (0.5 * loss - (0.5 * loss).detach())",              # the same, written as a trick
    "loss.detach() + (loss ** 2 - (loss ** 2).detach())"])     # the value, and another function's gradient
def test_a_loss_with_the_right_value_and_a_wrong_gradient_loses_its_question(name, wrong, tmp_path):
    question, edits = _loss_edit(name, wrong)
    ok, why = _judged(name, question, _namespace(name, **edits), tmp_path)
    assert not ok, why
    if not _checks(name)[question].cases()[0].get("hidden"):
        assert "gradients" in why and "values differ" in why, why


# ---- 3. a generate that does not use its cache -----------------------------------------------

def _uncached_generate(dummy):
    """A generate that reads every position again at every step (no cache), and runs
    ``dummy`` (code, with ``n``: the positions a cache would read) once per step."""
    return _replace(("""    max_len, cache = model.config.max_len, None
    for _ in range(max_new_tokens):
""", f"""    max_len, cache = model.config.max_len, None
    for i in range(max_new_tokens):
        n = min(idx.shape[1] if i == 0 or not use_cache or idx.shape[1] > max_len else 1, max_len)
        {dummy}
        logits = model(idx[:, -max_len:])[:, -1]
        idx = torch.cat([idx, next_token(logits, temperature, top_k, top_p, generator)], dim=1)
    return idx
    for _ in range(max_new_tokens):
"""))


FUNCTIONAL_NORM1 = _replace(("self.self_attn(self.norm1(x), past)",
                             "self.self_attn(F.layer_norm(x, x.shape[-1:], self.norm1.weight, self.norm1.bias, "
                             "self.norm1.eps), past)"))
# The red team's fake: every step reads every position again, the blocks' first LayerNorm is
# computed as a function, and the first block's norm1 is called on a dummy of the size a cache
# would read, once per step: the old counter (a hook on blocks[0].norm1) saw the right numbers.
NORM1_FAKE = {"block": FUNCTIONAL_NORM1,
              "cache": _uncached_generate("model.blocks[0].norm1(torch.zeros(1, n, model.config.d_model))")}
# The same against a counter of the positions entering the blocks' attention projections
# (hooks on W_q, W_k, W_v): the projections computed as functions of their weights, the
# modules called on dummies of the right size, once per step, in every block.
PROJECTION_FAKE = {
    "attention": _replace(("self.split_heads(self.W_q(x)), self.split_heads(self.W_k(x)), self.split_heads(self.W_v(x))",
                           "(self.split_heads(F.linear(x, self.W_q.weight, self.W_q.bias)), "
                           "self.split_heads(F.linear(x, self.W_k.weight, self.W_k.bias)), "
                           "self.split_heads(F.linear(x, self.W_v.weight, self.W_v.bias)))")),
    "block": FUNCTIONAL_NORM1,
    "cache": _uncached_generate("[getattr(b.self_attn, w)(torch.zeros(1, n, model.config.d_model)) "
                                "for b in model.blocks for w in ('W_q', 'W_k', 'W_v')]")}

# And with the projections made from copies of the weights (the counter follows them).
COPY_FAKE = {**PROJECTION_FAKE, "attention": _replace(
    ("self.split_heads(self.W_q(x)), self.split_heads(self.W_k(x)), self.split_heads(self.W_v(x))",
     "[self.split_heads(F.linear(x, (1.0 * l.weight).contiguous(), l.bias.clone())) for l in (self.W_q, self.W_k, self.W_v)]"))}
FAKES = {"norm1": NORM1_FAKE, "projections": PROJECTION_FAKE, "copied weights": COPY_FAKE}
#: holes the grader knows of (none now: the count of positions the first block reads, its norm1,
#: could be fed dummies on purpose until generate_drifting checked what the cache holds)
KNOWN_HOLES: set = set()


@pytest.mark.parametrize("fake", [pytest.param(f, marks=pytest.mark.xfail(strict=True, reason="known hole: issue 38"))
                                  if f in KNOWN_HOLES else f for f in sorted(FAKES)])
def test_a_generate_that_ignores_its_cache_loses_the_cache_question_however_it_hides(fake, tmp_path):
    ok, why = _judged("a5_gpt", "test_cache", _namespace("a5_gpt", **dict(FAKES[fake])), tmp_path)
    # caught by the count of positions read, or (a count fed dummies) by what the cache holds
    assert not ok and ("positions_read" in why or "weights moving after every step" in why), why


QKV = "q, k, v = self.split_heads(self.W_q(x)), self.split_heads(self.W_k(x)), self.split_heads(self.W_v(x))"
HONEST = {  # other ways to write the projections and the embedding: the counter counts the same
    "as written": {},
    "one head at a time": {"attention": _replace((QKV, (
        "q, k, v = [torch.stack([x @ l.weight[h * self.d_head:(h + 1) * self.d_head].T"
        " + l.bias[h * self.d_head:(h + 1) * self.d_head] for h in range(self.num_heads)], dim=1)"
        " for l in (self.W_q, self.W_k, self.W_v)]")))},
    "one fused projection": {"attention": _replace((QKV, (
        "q, k, v = [self.split_heads(t) for t in F.linear(x, torch.cat([self.W_q.weight, self.W_k.weight, "
        "self.W_v.weight]), torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])).split(self.d_model, dim=-1)]")))},
    "einsum and indexing": {
        "attention": _replace((QKV, "q, k, v = [self.split_heads(torch.einsum('bnd,ed->bne', x, l.weight) + l.bias) "
                                    "for l in (self.W_q, self.W_k, self.W_v)]")),
        "model": _replace(("return self.dropout(self.tok_emb(idx) + self.pos_emb(positions))",
                           "return self.dropout(self.tok_emb.weight[idx] + self.pos_emb.weight[positions])"))},
}


@pytest.mark.parametrize("variant", sorted(HONEST))
def test_a_cached_generate_keeps_the_cache_question_however_its_projections_are_written(variant, tmp_path):
    assert _judged("a5_gpt", "test_cache", _namespace("a5_gpt", **dict(HONEST[variant])), tmp_path) == (True, "")


@pytest.mark.parametrize("name", T.NAMES)
def test_the_solutions_score_every_question_judged_outside(name, tmp_path):
    """The source notebook's solutions, probed as the sandbox probes them: full points on every
    question but the trained model's (those need a kernel with the checkpoint: the real runs of
    tests/test_assignments.py and tests/test_grader_sandbox.py)."""
    questions = [gid for gid, q in _checks(name).items() if isinstance(q, grader_verdicts.Question)]
    points = grader_cells.points(T._source(name))
    assert _points(name, questions, _namespace(name), tmp_path) == (sum(points[q] for q in questions), {})


def test_the_check_of_torch_looks_before_it_reads_torch_s_state(tmp_path):
    """A faster check (compare identities, read the state, then look only when something
    moved) once let this through (a red team, 2026-11-27): a value the look tolerates (not
    code: torch.library's set of kernels swapped for a set subclass) runs the student's code
    when the state is read, which put a replaced ``torch.equal`` back before the look. The
    look must come first: it sees the replacement."""
    import subprocess
    import sys
    code = (
        "import torch, torch.library as L, course_utils.data\n"
        "from grader import inside as G\n"
        "G.watch(); assert G.changed() == []\n"
        "real, saved = torch.equal, []\n"
        "class Trap(set):\n"
        "    def __iter__(self):\n"
        "        while saved:\n"
        "            owner, name, value = saved.pop(); setattr(owner, name, value)\n"
        "        return set.__iter__(self)\n"
        "L._impls = Trap(L._impls)\n"
        "assert G.changed() == [], G.changed()  # tolerated alone\n"
        "saved.append((torch, 'equal', real)); torch.equal = lambda a, b: True\n"
        "print(G.changed())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "COURSE_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "torch.equal was replaced" in out.stdout, out.stdout

"""a5_gpt judged outside the student's process (``grader.verdicts``): for each test
cell but the trained model's, the calls the sandbox makes with the student's functions and
classes (classes get the weights of a reference module, sent as data; a model passed to a
function is built the same way, ``$make``) and the reference implementations of
course_utils that the grader compares them with. The reference for ``CausalSelfAttention``
and ``Block`` is course_utils' multi-head attention and pre-LN layer run as
``course_utils.gpt.cached_block`` runs them (causal, with a cache); for the model, the
loss, sampling and the cache it is ``course_utils.gpt`` itself. ``positions_read`` (a locked
cell of the notebook) counts what the first block reads at each step of generation, so a
``generate`` that ignores its cache does not pass on equal tokens alone. A count of work can be
faked on purpose, by feeding that block dummies of the right size (a counter of the key
projections' work, tried in its place, also refused honest batched products); what the cache
holds is checked too: ``generate_drifting`` (another locked cell) moves the token embeddings and
every block's key and value projections once per step, so a generation that computes the old
positions' keys and values again gives other tokens than one that keeps them. The loss is compared with its gradients
(``"grad": True``): a loss computed outside autograd scores nothing.

test_perplexity: the student's GPT with the student's weights must give the reference GPT's
logits on held-out windows (in the sandbox); the grader then computes the held-out loss with
the reference GPT holding those weights, and the unigram and bigram baselines, itself.
Keep the cases in step with the test cells of a5_gpt.ipynb (nbgrader still runs those)."""

import dataclasses
import threading

from grader.verdicts import Question, TrainedModelQuestion
from grader.verdicts import call as _call

CHECKPOINT = "gpt.pt"
VOCAB_SIZE = 256   # the notebook's tokens: UTF-8 bytes
MARGIN = 0.5       # nats per token under the bigram's loss (the test cell's MARGIN)


def reference():
    import torch
    from course_utils import gpt as G
    from course_utils.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
    from course_utils.transformer import EncoderLayer

    class CausalSelfAttention(MultiHeadAttention):
        def forward(self, x, past=None):
            q, k, v = self.split_heads(self.W_q(x)), self.split_heads(self.W_k(x)), self.split_heads(self.W_v(x))
            if past is not None:
                k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
            n, total = x.shape[1], k.shape[2]
            out, _ = scaled_dot_product_attention(q, k, v, causal_mask(total)[total - n:])
            return self.W_o(out.transpose(1, 2).reshape(x.shape[0], n, self.d_model)), (k, v)

    class Block(EncoderLayer):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
            super().__init__(d_model, num_heads, d_ff, dropout, norm_first=True)

        def forward(self, x, past=None):   # the layer's own forward, with a cache, as GPT's generation runs it
            return G.cached_block(super().forward, x, past)

    def seeded_generator(seed):
        return torch.Generator().manual_seed(seed)

    def positions_read(model, idx, max_new_tokens, **settings):
        counts = []
        hook = model.blocks[0].norm1.register_forward_hook(lambda m, inputs, out: counts.append(inputs[0].shape[1]))
        try:
            G.generate(model, idx, max_new_tokens, **settings)
        finally:
            hook.remove()
        return counts

    def generate_drifting(model, idx, max_new_tokens, **settings):  # the notebook's, with our generate
        moving = [model.tok_emb.weight] + [getattr(b.self_attn, w).weight for b in model.blocks for w in ("W_k", "W_v")]
        kept = [w.detach().clone() for w in moving]
        g = torch.Generator().manual_seed(0)
        moves = [3 * w.std() * torch.randn(w.shape, generator=g).to(w.device) for w in kept]

        def drift(module, inputs, output):  # returns None: the norm's output stays as it was
            for w, move in zip(moving, moves):
                w.data.add_(move)
        hook = model.blocks[0].norm1.register_forward_hook(drift)
        try:
            return G.generate(model, idx, max_new_tokens, **settings)
        finally:
            hook.remove()
            for w, old in zip(moving, kept):
                w.data.copy_(old)

    return {"CausalSelfAttention": CausalSelfAttention, "Block": Block, "GPT": G.GPT,
            "GPTConfig": lambda **kwargs: G.GPTConfig(**kwargs), "lm_loss": G.lm_loss,
            "filter_logits": G.filter_logits, "next_token": G.next_token,
            "seeded_generator": seeded_generator, "step": lambda model, idx, cache=None: model.step(idx, cache),
            "generate": G.generate, "positions_read": positions_read, "generate_drifting": generate_drifting}


# --------------------------------------------------------------------------------------
# Modules with the reference's weights, inputs: all from generators of their own
# --------------------------------------------------------------------------------------
# A folder is graded by several threads of one process, and these calls are computed in
# them: nothing here draws from (or seeds) torch's global random state, which another
# thread's checks may be using, so the same cases come out in every thread.

def _generator(seed: int):
    import torch
    return torch.Generator().manual_seed(seed)


def _built(make, seed: int):
    """``make()`` (a module) with every weight drawn from normal(0, 0.5) by a generator
    seeded with ``seed`` (far from the initialisation). Built on the meta device first, so
    that no initialiser touches torch's global random state."""
    import torch
    with torch.device("meta"):
        module = make()
    module = module.to_empty(device="cpu").eval()
    generator = _generator(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=generator))
    return module


def _module(cls, init, seed, args, hidden=False, method=None):
    """A call of ``cls(*init)`` given the weights of the reference ``_reference_module``."""
    module = _reference_module(cls, init, seed)
    out = {"fn": cls, "args": list(args), "hidden": hidden, "init": list(init), "state": dict(module.state_dict())}
    if method:
        out["method"] = method
    return out


def _reference_module(cls, init, seed):
    return _built(lambda: reference()[cls](*init), seed)


def _model(config: dict, seed: int) -> tuple[dict, "object"]:
    """({"$make": ...}, the reference GPT): the student's ``GPT`` built from ``config`` with the
    weights of the reference GPT ``_built`` with ``seed``."""
    from course_utils import gpt as G
    ref = _built(lambda: G.GPT(G.GPTConfig(**config)), seed)
    make = {"fn": "GPT", "init": [{"$make": {"fn": "GPTConfig", "args": [], "kwargs": config}}],
            "state": dict(ref.state_dict())}
    return {"$make": make}, ref


def attention_calls():
    import torch
    calls = []
    for init, seed, shape, hidden in (((8, 2), 0, (2, 5, 8), False), ((12, 3), 21, (3, 7, 12), True)):
        ref = _reference_module("CausalSelfAttention", init, seed)
        generator = _generator(seed)
        x = torch.randn(*shape, generator=generator)
        later = x.clone()
        later[:, 3:] = torch.randn(shape[0], shape[1] - 3, shape[2], generator=generator)
        with torch.no_grad():
            past3 = ref(x[:, :3])[1]
            past_all_but_one = ref(x[:, :-1])[1]
        calls += [_module("CausalSelfAttention", init, seed, [x], hidden),
                  _module("CausalSelfAttention", init, seed, [later], hidden),
                  _module("CausalSelfAttention", init, seed, [x[:, 3:], past3], hidden),
                  _module("CausalSelfAttention", init, seed, [x[:, -1:], past_all_but_one], hidden)]
    return calls


def block_calls():
    import torch
    calls = []
    for init, seed, shape, hidden in (((8, 2, 16), 0, (2, 5, 8), False), ((12, 3, 20), 22, (3, 6, 12), True)):
        ref = _reference_module("Block", init, seed)
        x = torch.randn(*shape, generator=_generator(seed))
        with torch.no_grad():
            past2 = ref(x[:, :2])[1]
            past_all_but_one = ref(x[:, :-1])[1]
        calls += [_module("Block", init, seed, [x], hidden),
                  _module("Block", init, seed, [x[:, 2:], past2], hidden),
                  _module("Block", init, seed, [x[:, -1:], past_all_but_one], hidden)]
    return calls


SMALL = dict(vocab_size=11, max_len=8, d_model=8, num_heads=2, num_layers=2, d_ff=16)
HIDDEN = dict(vocab_size=13, max_len=10, d_model=12, num_heads=3, num_layers=2, d_ff=20)


def model_calls():
    import torch
    calls = []
    for config, seed, hidden in ((SMALL, 0, False), (HIDDEN, 23, True)):
        make, _ = _model(config, seed)
        generator = _generator(seed)
        idx = torch.randint(0, config["vocab_size"], (3, config["max_len"]), generator=generator)
        states = torch.randn(2, 4, config["d_model"], generator=generator)
        calls += [{**make["$make"], "args": [idx], "hidden": hidden},
                  {**make["$make"], "args": [idx[:, :1]], "hidden": hidden},
                  {**make["$make"], "method": "logits", "args": [states], "hidden": hidden},
                  {**make["$make"], "method": "embed", "args": [idx[:, 3:], 3], "hidden": hidden}]
    return calls


def loss_calls():
    from course_utils.gpt_training import heldout_windows
    text = _text()
    make, _ = _model(dict(vocab_size=VOCAB_SIZE, max_len=16, d_model=16, num_heads=2, num_layers=1, d_ff=32), 24)
    return [_call("lm_loss", make, heldout_windows(text["valid_tokens"], 16, 4), grad=True),
            _call("lm_loss", make, heldout_windows(text["test_tokens"], 16, 5), hidden=True, grad=True),
            _call("lm_loss", make, heldout_windows(text["valid_tokens"][100:], 8, 3), hidden=True, grad=True)]


def sampling_calls():
    import torch
    generator = lambda seed: {"$make": {"fn": "seeded_generator", "args": [seed]}}  # noqa: E731
    logits = torch.randn(4, 10, generator=_generator(0))
    row = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    calls = [_call("filter_logits", logits, 3), _call("filter_logits", logits, 50), _call("filter_logits", logits, None, 1.0),
             _call("filter_logits", row, None, 0.4), _call("filter_logits", row, None, 0.75),
             _call("filter_logits", row, None, 0.85), _call("filter_logits", row, 3, 0.82),
             _call("next_token", logits, 0), _call("next_token", logits, 1.0, None, None, generator(5)),
             _call("next_token", row.expand(2000, 4), 1.0, 3, None, generator(0)),
             _call("next_token", row.expand(2000, 4), 0.5, None, None, generator(1))]
    big = torch.randn(64, VOCAB_SIZE, generator=_generator(25)) * 3
    calls += [_call("filter_logits", big, k, p, hidden=True)
              for k, p in ((1, None), (7, None), (300, None), (None, 0.3), (None, 0.9), (20, 0.8))]
    calls += [_call("next_token", big, t, k, p, generator(3), hidden=True)
              for t, k, p in ((0, None, None), (0.7, None, None), (1.0, 10, None), (1.0, None, 0.9), (1.3, 50, 0.95))]
    return calls


def cache_calls():
    import torch
    calls = []
    tiny = dict(vocab_size=20, max_len=12, d_model=16, num_heads=2, num_layers=2, d_ff=32)
    deeper = dict(vocab_size=30, max_len=16, d_model=12, num_heads=3, num_layers=3, d_ff=24)
    for config, seed, hidden in ((tiny, 0, False), (deeper, 26, True)):
        make, ref = _model(config, seed)
        generator = _generator(seed)
        prompt = torch.randint(0, config["vocab_size"], (3, 5), generator=generator)
        new = torch.randint(0, config["vocab_size"], (3, 2), generator=generator)
        _, cache = ref.step(prompt)
        settings = ((0, None, None), (1.0, 5, None), (0.8, None, 0.9), (1.0, None, None))
        calls += [_call("step", make, prompt, hidden=hidden),
                  _call("step", make, new[:, :1], cache, hidden=hidden, may_change=[3]),   # a cache list
                  _call("step", make, new, cache, hidden=hidden, may_change=[3])]          # may be updated in place
        calls += [_call("generate", make, prompt, 10, t, k, p, {"$make": {"fn": "seeded_generator", "args": [seed]}},
                        use, hidden=hidden)
                  for t, k, p in settings for use in (True, False)]
        calls += [_call("generate", make, prompt, 2 * config["max_len"], 1.0, None, None,
                        {"$make": {"fn": "seeded_generator", "args": [1]}}, True, hidden=True)]
        greedy = {"temperature": 0}  # the counts do not depend on the tokens: no random state needed
        calls += [_call("positions_read", make, prompt, 6, hidden=hidden, kwargs=greedy),
                  _call("positions_read", make, prompt, 6, hidden=hidden, kwargs={**greedy, "use_cache": False}),
                  _call("positions_read", make, prompt, config["max_len"], hidden=hidden, kwargs=greedy)]
    # what the cache holds (a count can be faked): generation while the embeddings and the key and
    # value projections move after every step; only reusing the old positions' cached keys and values
    # gives the reference's tokens (reading them again changes 15 of the 33 greedy tokens here and 20
    # of the 33 sampled ones; the tiny model above answers 4 whatever it reads)
    make, ref = _model(deeper, 26)
    prompt = torch.randint(0, deeper["vocab_size"], (3, 5), generator=_generator(26))
    message = ("with the weights moving after every step, generate gave other tokens than a generation "
               "that keeps the old positions' keys and values in its cache and reads only the newest token")
    calls += [_call("generate_drifting", make, prompt, deeper["max_len"] - 5, hidden=True, message=message,
                    kwargs={**settings, "generator": {"$make": {"fn": "seeded_generator", "args": [1]}}})
              for settings in ({"temperature": 0}, {"temperature": 1.0})]
    return calls


# --------------------------------------------------------------------------------------
# The trained model
# --------------------------------------------------------------------------------------

_text_lock = threading.Lock()
_text_cache: dict = {}


def _text() -> dict:
    """The notebook's data and baselines (cells data and baselines), built once per process."""
    with _text_lock:
        if not _text_cache:
            import torch
            from course_utils.data import load_english_text
            from course_utils.gpt_training import heldout_windows, ngram_loss
            from course_utils.novels import split_paragraphs

            def encode(paragraphs):
                return torch.frombuffer(bytearray("".join(p.text + "\n" for p in paragraphs).encode("utf-8")),
                                        dtype=torch.uint8).long()
            train_paragraphs, test_paragraphs = split_paragraphs(load_english_text())
            stream = encode(train_paragraphs)
            cut = int(0.95 * len(stream))
            train_tokens, valid_tokens, test_tokens = stream[:cut], stream[cut:], encode(test_paragraphs)
            max_len = config().max_len
            valid_windows = heldout_windows(valid_tokens, max_len, 500)
            valid_bigram = {a: ngram_loss(train_tokens, valid_windows, VOCAB_SIZE, order=2, alpha=a)
                            for a in (0.01, 0.1, 1.0)}
            alpha = min(valid_bigram, key=valid_bigram.get)
            test_windows = heldout_windows(test_tokens, max_len, 500)
            later = heldout_windows(test_tokens[len(test_tokens) // 2:], max_len, 500)
            _text_cache.update(
                train_tokens=train_tokens, valid_tokens=valid_tokens, test_tokens=test_tokens,
                test_windows=test_windows, later_windows=later,
                bigram=ngram_loss(train_tokens, test_windows, VOCAB_SIZE, order=2, alpha=alpha),
                later_bigram=ngram_loss(train_tokens, later, VOCAB_SIZE, order=2, alpha=alpha))
    return _text_cache


def config():
    """The notebook's ``cfg`` (cell baselines)."""
    from course_utils.gpt import GPTConfig
    return GPTConfig(vocab_size=VOCAB_SIZE, max_len=64, d_model=64, num_heads=4, num_layers=2, d_ff=256, dropout=0.0)


def _problem(state) -> str:
    from course_utils.training import _config_dict, _with_defaults
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        return f"{CHECKPOINT} is not a checkpoint of the course (save_checkpoint)"
    if _config_dict(config()) != _with_defaults(config(), state.get("config") or {}):
        return f"{CHECKPOINT} was saved with another configuration"
    return ""


def _trained_calls(state) -> list[dict]:
    """The student's GPT with the student's weights on 8 held-out windows (every position's logits)."""
    windows = _text()["test_windows"][:8]
    return [{"fn": "GPT", "init": [{"$make": {"fn": "GPTConfig", "args": [], "kwargs": dataclasses.asdict(config())}}],
             "state": dict(state["model"]), "args": [windows[:, :-1]], "hidden": True,
             "message": "with the same weights, your model and the reference one disagree"}]


def _verdict(state) -> tuple[bool, str]:
    """The test cell's threshold, computed here with the reference GPT holding the student's
    weights: held-out loss MARGIN under the bigram's on the 500 test windows, and on 500
    windows from the second half of the held-out text."""
    import torch
    from course_utils import gpt as G, gpt_training as GT
    text = _text()
    with torch.device("meta"):  # no initialiser runs: torch's global random state stays untouched
        model = G.GPT(config())
    model = model.to_empty(device="cpu")
    model.load_state_dict(state["model"])
    model.eval()
    loss = GT.heldout_loss(model, text["test_windows"])
    if not loss < text["bigram"] - MARGIN:
        return False, (f"held-out loss {loss:.2f} nats per token is not {MARGIN} under the bigram's "
                       f"{text['bigram']:.2f}")
    if not GT.heldout_loss(model, text["later_windows"]) < text["later_bigram"] - MARGIN:
        return False, "a hidden case: the loss on more of the held-out text is not far enough under the bigram's"
    return True, ""


QUESTIONS = {
    "test_attention": Question(attention_calls, reference),
    "test_block": Question(block_calls, reference),
    "test_model": Question(model_calls, reference),
    "test_loss": Question(loss_calls, reference),
    "test_sampling": Question(sampling_calls, reference),
    "test_cache": Question(cache_calls, reference),
    "test_perplexity": TrainedModelQuestion(CHECKPOINT, _trained_calls, reference, _verdict, _problem),
}

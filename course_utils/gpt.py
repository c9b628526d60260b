"""GPT (Radford et al., 2018, 2019): a decoder-only Transformer language model.

Taught in: 07_gpt. Built from the course's parts: each block is 04's pre-LN
``course_utils.transformer.EncoderLayer`` run with a causal mask (a decoder without
cross-attention is exactly that), ``course_utils.attention`` for the masks and the
attention of the cached path, ``course_utils.bpe.BPETokenizer`` (byte level, 06) for the
text, and ``course_utils.training.train`` for the loop.

The model reads token ids (batch, t) and returns next-token logits (batch, t, vocab):
logits[:, i] scores the token at position i + 1 from the tokens 0..i. Token and learned
position embeddings go in, a final LayerNorm and an output layer that shares its weights
with the token embedding come out (GPT-2's layout).

Leaves out: GELU (the course's feed-forward net uses ReLU), GPT-2's scaled initialisation
of residual projections, weight decay groups, mixed precision, flash attention during
generation, beam search (01 teaches it; samplers are what language models use).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from course_utils.attention import causal_mask, fused_attention, scaled_dot_product_attention
from course_utils.runtime import cap_batch, cap_steps, check_device, pick, smoke_eval_size
from course_utils.transformer import EncoderLayer


# --------------------------------------------------------------------------------------
# Configuration and recipes
# --------------------------------------------------------------------------------------


@dataclass
class GPTConfig:
    """Sizes of a GPT (GPT-2 small: vocab 50,257, max_len 1,024, d_model 768, 12 heads,
    12 layers, d_ff 3,072)."""
    vocab_size: int
    max_len: int = 64
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 512
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "d_model", "num_heads", "num_layers", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")


@dataclass
class GPTTraining:
    """How 07 trains its GPT (one recipe per profile): the model, the language-model run, the
    samplers' measurement and the classification comparison with 05."""
    num_merges: int            # byte-level BPE merges (06's tokenizer) learned on the novels
    max_len: int               # context length in tokens
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int
    dropout: float
    batch_size: int            # windows of max_len + 1 tokens per step
    steps: int                 # the notebook's own language-model run
    lr: float
    warmup: int
    weight_decay: float = 0.1
    eval_windows: int = 200    # held-out windows that perplexities are measured on
    num_samples: int = 48      # continuations per sampler setting
    sample_tokens: int = 48    # tokens per continuation
    fine_tune_lm_weight: float = 0.5   # the GPT paper's auxiliary LM loss in fine-tuning...
    fine_tune_aux: bool = False        # ...measured as a third contestant (full profile: time allows)
    fine_tune_seeds: tuple[int, ...] = (0, 1, 2)
    fine_tune_steps: int | None = None  # section 8's fine-tuning budget, for BERT and GPT alike;
    fine_tune_batch: int | None = None  # None: 05's recipe (the fast profile), so that both
    fine_tune_lr: float | None = None   # notebooks fine-tune the shipped BERT the same way

    def model_config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(vocab_size, self.max_len, self.d_model, self.num_heads, self.num_layers,
                         self.d_ff, self.dropout)

    def fine_tuning(self, bert_recipe) -> tuple[int, int, float]:
        """(steps, batch size, learning rate) of 07's fine-tuning runs: this recipe's where it
        sets them, else those of 05's recipe ``bert_recipe`` (a ``bert.BertPretraining``)."""
        return (self.fine_tune_steps or bert_recipe.fine_tune_steps,
                self.fine_tune_batch or bert_recipe.fine_tune_batch,
                self.fine_tune_lr or bert_recipe.fine_tune_lr_small_bert)


FAST = GPTTraining(num_merges=2000, max_len=64, d_model=64, num_heads=4, num_layers=2, d_ff=256,
                   dropout=0.0, batch_size=16, steps=400, lr=3e-3, warmup=30)
#: The full profile: the shipped GPT's layout (scripts/pretrain_small_gpt.py) with twice its
#: context, trained in the notebook on about eight times the fast run's tokens. Measured: the
#: 1,500 steps in 414 s and 07 as a whole in 852 s on a 2-core CPU (two threads; issue 32: every
#: notebook's full profile within 20 minutes there), and in 41 s on an H200 shared with two other
#: notebooks (07 as a whole: 154 s).
FULL = GPTTraining(num_merges=2000, max_len=128, d_model=128, num_heads=4, num_layers=4, d_ff=512,
                   dropout=0.1, batch_size=16, steps=1500, lr=2e-3, warmup=100, eval_windows=500,
                   num_samples=100, fine_tune_aux=True,
                   fine_tune_steps=300, fine_tune_batch=32, fine_tune_lr=3e-4)  # longer than 05's full


def training_recipe(profile: str | None = None) -> GPTTraining:
    """``FAST`` or ``FULL`` for the active profile; in a smoke test (``COURSE_SMOKE_STEPS``)
    the same models with few samples and small batches. Taught in: 07_gpt."""
    from dataclasses import replace
    recipe = pick(FAST, FULL, profile)
    size = smoke_eval_size()
    if size is not None:
        recipe = replace(recipe, batch_size=cap_batch(recipe.batch_size),
                         eval_windows=min(recipe.eval_windows, size),
                         num_samples=min(recipe.num_samples, 8), sample_tokens=min(recipe.sample_tokens, 16),
                         fine_tune_seeds=recipe.fine_tune_seeds[:1],
                         fine_tune_batch=recipe.fine_tune_batch and cap_batch(recipe.fine_tune_batch))
    return recipe


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


def check_ids(idx, vocab_size: int, max_len: int | None = None) -> None:
    """Token ids must be an int64 tensor (batch, t) with 0 <= id < vocab_size and, if
    ``max_len`` is given, t <= max_len; otherwise a ValueError saying what was given."""
    if not torch.is_tensor(idx) or idx.dim() != 2:
        shape = tuple(idx.shape) if torch.is_tensor(idx) else type(idx).__name__
        raise ValueError(f"token ids must be a tensor (batch, t), got {shape}")
    if idx.dtype != torch.long:
        raise ValueError(f"token ids must be int64 (torch.long), got {idx.dtype}")
    if idx.shape[1] == 0:
        raise ValueError("token ids must hold at least one token per row, got t = 0")
    if max_len is not None and idx.shape[1] > max_len:
        raise ValueError(f"the input has {idx.shape[1]} tokens but the model reads at most "
                         f"max_len = {max_len}: crop it to the last {max_len} (generate does)")
    low, high = int(idx.min()), int(idx.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(f"token id {bad} is outside the vocabulary 0..{vocab_size - 1}")


class GPT(nn.Module):
    """Decoder-only Transformer. ``forward(idx (batch, t) int64)`` -> logits (batch, t,
    vocab_size), position i scoring the token at i + 1. ``hidden(idx)`` gives the final
    (normalised) states and, with ``need_weights=True``, each block's attention weights
    (batch, heads, t, t). ``step(idx_new, cache)`` is the cached path of generation.
    Taught in: 07_gpt."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT needs a GPTConfig, got {type(config).__name__}")
        self.config = config
        d = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, d)
        self.pos_emb = nn.Embedding(config.max_len, d)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(EncoderLayer(d, config.num_heads, config.d_ff, config.dropout,
                                                 norm_first=True) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(d)
        self.apply(_init_weights)

    def embed(self, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token plus position embeddings of ids at positions start, start + 1, ..."""
        positions = torch.arange(start, start + idx.shape[1], device=idx.device)
        return self.dropout(self.tok_emb(idx) + self.pos_emb(positions))

    def hidden(self, idx: torch.Tensor, need_weights: bool = False):
        """(final states (batch, t, d_model) after the last LayerNorm, list of each block's
        weights (batch, heads, t, t), or None without ``need_weights``)."""
        check_ids(idx, self.config.vocab_size, self.config.max_len)
        x = self.embed(idx)
        mask = causal_mask(idx.shape[1]).to(idx.device)  # (t, t): query i sees keys 0..i
        weights = []
        for block in self.blocks:
            x, w = block(x, mask, need_weights=need_weights)
            weights.append(w)
        return self.norm(x), (weights if need_weights else None)

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """The output layer, tied to the token embedding: states @ E^T."""
        return states @ self.tok_emb.weight.T

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        states, _ = self.hidden(idx)
        return self.logits(states)

    @torch.no_grad()
    def step(self, idx_new: torch.Tensor, cache: list | None = None):
        """Logits of the newest position and the updated key/value cache: feed the prompt
        once (cache None), then one token at a time. The cache holds, per block, the keys
        and values (batch, heads, t, d_head) of every position so far, so a step projects
        only the new tokens and attends over everything cached. Positions past ``max_len``
        are the caller's business (``generate`` falls back to the uncached path there).
        Taught in: 07_gpt."""
        past = 0 if cache is None else cache[0][0].shape[2]
        check_ids(idx_new, self.config.vocab_size, self.config.max_len - past)
        x = self.embed(idx_new, start=past)
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, kv = cached_block(block, x, None if cache is None else cache[i])
            new_cache.append(kv)
        return self.logits(self.norm(x[:, -1])), new_cache


def cached_block(block: EncoderLayer, x: torch.Tensor, past: tuple | None):
    """One pre-LN block on the new positions ``x`` (batch, n, d) with cached keys and
    values ``past`` ((batch, heads, t, d_head) twice, or None). Returns (output, (keys,
    values) of all t + n positions). Taught in: 07_gpt."""
    attn = block.self_attn
    h = block.norm1(x)
    q, k, v = attn.split_heads(attn.W_q(h)), attn.split_heads(attn.W_k(h)), attn.split_heads(attn.W_v(h))
    if past is not None:
        k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
    n, total = x.shape[1], k.shape[2]
    if n == 1:      # one new token, the last position: it may read every key (torch's fused kernel)
        out = fused_attention(q, k, v)
    else:           # new query i sits at position total - n + i and may read keys 0 .. total - n + i
        out, _ = scaled_dot_product_attention(q, k, v, causal_mask(total).to(x.device)[total - n:])
    out = attn.merge_heads(out)
    x = x + block.dropout(attn.W_o(out))
    x = x + block.dropout(block.ff(block.norm2(x)))
    return x, (k, v)


def _init_weights(module: nn.Module) -> None:
    """GPT-2's initialisation: normal(0, 0.02) weights, zero biases, unit LayerNorms."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


def check_sampler(temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> None:
    """A ValueError naming the setting when ``temperature`` is not a number >= 0, ``top_k``
    not a positive int or None, or ``top_p`` not in (0, 1] or None."""
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature < 0 \
            or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a number >= 0 (0 = greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
    if top_p is not None and (not isinstance(top_p, (int, float)) or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be a number in (0, 1], got {top_p!r}")


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Logits (..., vocab) with -inf outside the ``top_k`` largest and outside the nucleus:
    the smallest set of most likely tokens whose probability reaches ``top_p`` (a token is
    kept when the tokens ranked above it hold less than ``top_p``; the first always stays).
    Taught in: 07_gpt."""
    check_sampler(top_k=top_k, top_p=top_p)
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        above = probs.cumsum(dim=-1) - probs          # probability of the tokens ranked above
        drop_sorted = above >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)   # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
               top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of ``logits`` (batch, vocab) -> (batch, 1): the argmax when
    ``temperature`` is 0 (greedy), else a draw from the softmax of logits / temperature,
    restricted by ``filter_logits`` (temperature first, then top-k and top-p, as in Hugging
    Face's samplers). Taught in: 07_gpt."""
    check_sampler(temperature, top_k, top_p)   # greedy too: bad settings fail the same way
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = filter_logits(logits / temperature, top_k, top_p)
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)


@torch.no_grad()
def generate(model: GPT, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None, use_cache: bool = True) -> torch.Tensor:
    """Continue ``idx`` (batch, t) by ``max_new_tokens`` tokens -> (batch, t + max_new_tokens).

    ``temperature=0`` is greedy; ``top_k`` and ``top_p`` restrict the draw (``top_k=1`` is
    greedy); a fixed ``generator`` (on the model's device) makes sampling reproducible.
    Contexts longer than ``max_len`` are cropped to their last ``max_len`` tokens. With
    ``use_cache`` the keys and values of past positions are kept (``GPT.step``) until the
    context is full; the tokens are the same as without it. Taught in: 07_gpt."""
    if not isinstance(model, GPT):
        raise TypeError(f"generate needs a GPT model, got {type(model).__name__}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    check_ids(idx, model.config.vocab_size)
    check_device(model, idx, what="generate")
    check_sampler(temperature, top_k, top_p)   # bad settings fail here, not after the first step
    was_training = model.training
    model.eval()
    max_len, cache = model.config.max_len, None
    try:
        for _ in range(max_new_tokens):
            if use_cache and idx.shape[1] <= max_len:
                # first call: the whole prompt at once; then only the newest token
                logits, cache = model.step(idx if cache is None else idx[:, -1:], cache)
            else:   # no cache, or the window slid: every position moved, read it again
                logits = model(idx[:, -max_len:])[:, -1]
            idx = torch.cat([idx, next_token(logits, temperature, top_k, top_p, generator)], dim=1)
    finally:
        model.train(was_training)
    return idx


# --------------------------------------------------------------------------------------
# Data, loss, training, evaluation
# --------------------------------------------------------------------------------------


def novel_text(paragraphs) -> str:
    """The paragraphs of the novels as one text, a newline after each paragraph."""
    return "".join(p.text + "\n" for p in paragraphs)


def encode_text(tokenizer, text: str) -> torch.Tensor:
    """A long text as one int64 tensor of token ids."""
    return torch.tensor(tokenizer.encode(text), dtype=torch.long)


def _check_stream(tokens, max_len: int) -> None:
    if not torch.is_tensor(tokens) or tokens.dim() != 1 or tokens.dtype != torch.long:
        raise ValueError(f"tokens must be a 1-D int64 tensor, got "
                         f"{tuple(tokens.shape) if torch.is_tensor(tokens) else type(tokens).__name__}")
    if len(tokens) < max_len + 1:
        raise ValueError(f"tokens must hold at least max_len + 1 = {max_len + 1} ids, got {len(tokens)}")


def random_windows(tokens: torch.Tensor, max_len: int, batch_size: int, generator=None) -> torch.Tensor:
    """(batch_size, max_len + 1) windows of ``tokens`` at random starts: inputs are
    [:, :-1], targets [:, 1:]."""
    _check_stream(tokens, max_len)
    starts = torch.randint(len(tokens) - max_len, (batch_size,), generator=generator)
    index = starts[:, None] + torch.arange(max_len + 1)   # (batch_size, max_len + 1), one gather
    return tokens[index.to(tokens.device)]


def window_batches(tokens: torch.Tensor, max_len: int, batch_size: int, seed: int = 0):
    """Endless random windows (``random_windows``), reproducible from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        yield random_windows(tokens, max_len, batch_size, generator)


def lm_loss(model: GPT, windows: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the next token at every position of (batch, t + 1) windows:
    one window gives t training examples at once. Taught in: 07_gpt."""
    inputs, targets = windows[:, :-1], windows[:, 1:]
    logits = model(inputs)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def heldout_windows(tokens: torch.Tensor, max_len: int, count: int | None = None) -> torch.Tensor:
    """Non-overlapping (count, max_len + 1) windows from the start of ``tokens`` (all that
    fit when ``count`` is None): a fixed held-out set."""
    _check_stream(tokens, max_len)
    fit = (len(tokens) - 1) // max_len
    count = fit if count is None else min(count, fit)
    return torch.stack([tokens[i * max_len:i * max_len + max_len + 1] for i in range(count)])


@torch.no_grad()
def heldout_loss(model: GPT, windows: torch.Tensor, batch_size: int = 64) -> float:
    """Mean next-token loss (nats per token) of ``model`` on ``windows`` (eval mode)."""
    was_training = model.training
    model.eval()
    device = check_device(model, what="heldout_loss")
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        w = windows[i:i + batch_size].to(device)
        total += float(lm_loss(model, w)) * w[:, 1:].numel()
        count += w[:, 1:].numel()
    model.train(was_training)
    return total / count


def ngram_loss(train_tokens: torch.Tensor, windows: torch.Tensor, vocab_size: int, order: int,
               alpha: float = 0.1) -> float:
    """Held-out loss (nats per token) of a unigram (``order=1``) or bigram (``order=2``)
    model with add-``alpha`` smoothing, counted on ``train_tokens``, on the same targets
    as ``heldout_loss`` (every position of the windows but the first). Taught in: 07_gpt."""
    if order not in (1, 2):
        raise ValueError(f"order must be 1 (unigram) or 2 (bigram), got {order!r}")
    targets = windows[:, 1:].reshape(-1)
    if order == 1:
        counts = torch.bincount(train_tokens, minlength=vocab_size).double() + alpha
        logp = (counts / counts.sum()).log()
        return float(-logp[targets].mean())
    prev = windows[:, :-1].reshape(-1)
    pair_ids = train_tokens[:-1] * vocab_size + train_tokens[1:]
    pairs = torch.bincount(pair_ids, minlength=vocab_size * vocab_size).double().view(vocab_size, vocab_size)
    pairs += alpha
    logp = (pairs[prev, targets] / pairs[prev].sum(dim=1)).log()
    return float(-logp.mean())


def fit(model: GPT, tokens: torch.Tensor, recipe: GPTTraining, steps: int | None = None,
        seed: int = 0, valid_fn=None, valid_every: int = 0, progress: bool = False):
    """Train ``model`` (already on its device) on random windows of ``tokens`` with AdamW
    (betas 0.9, 0.95, weight decay), linear warm-up and cosine decay; returns the
    ``History``. Taught in: 07_gpt."""
    from course_utils.schedules import cosine_schedule
    from course_utils.training import train
    steps = cap_steps(recipe.steps if steps is None else steps)
    device = check_device(model, what="fit")
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95),
                                  weight_decay=recipe.weight_decay)
    scheduler = cosine_schedule(optimizer, min(recipe.warmup, steps - 1), steps)
    batches = window_batches(tokens.to(device), model.config.max_len, recipe.batch_size, seed)
    return train(model, lambda epoch: batches, lm_loss, optimizer, scheduler=scheduler,
                 max_steps=steps, valid_fn=valid_fn, valid_every=valid_every, device=device,
                 progress=progress, desc="GPT")


# --------------------------------------------------------------------------------------
# Fine-tuning for classification (the GPT paper's recipe)
# --------------------------------------------------------------------------------------


class GPTClassifier(nn.Module):
    """A GPT with a linear layer on the state of each sequence's last real token (the only
    position that has read the whole text). ``forward(input_ids, lengths)`` -> (class
    logits (batch, classes), next-token logits (batch, t, vocab), or None with
    ``lm_logits=False``). Taught in: 07_gpt."""

    def __init__(self, gpt: GPT, num_classes: int):
        super().__init__()
        self.gpt = gpt
        self.head = nn.Linear(gpt.config.d_model, num_classes)

    def forward(self, input_ids: torch.Tensor, lengths: torch.Tensor, lm_logits: bool = True):
        states, _ = self.gpt.hidden(input_ids)
        if lengths.min() < 1 or lengths.max() > input_ids.shape[1]:
            raise ValueError(f"lengths must be in 1..{input_ids.shape[1]}, got "
                             f"{int(lengths.min())}..{int(lengths.max())}")
        last = states[torch.arange(len(lengths), device=states.device), lengths - 1]
        return self.head(last), (self.gpt.logits(states) if lm_logits else None)


@torch.no_grad()
def predict(model: GPTClassifier, tensors: dict, batch_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """(predicted classes, true labels) of ``tensors`` from ``encode_for_classification``,
    on the CPU (model in eval mode)."""
    was_training = model.training
    model.eval()
    device = check_device(model, what="predict")
    predicted = []
    for i in range(0, len(tensors["labels"]), batch_size):
        logits, _ = model(tensors["input_ids"][i:i + batch_size].to(device),
                          tensors["lengths"][i:i + batch_size].to(device), lm_logits=False)
        predicted.append(logits.argmax(-1).cpu())
    model.train(was_training)
    return torch.cat(predicted), tensors["labels"].cpu()


def encode_for_classification(tokenizer, texts: Sequence[str], labels: Sequence[int],
                              max_len: int) -> dict[str, torch.Tensor]:
    """The first ``max_len`` tokens of each text, right-padded with id 0 (a causal model never
    reads padding placed after the text), with their lengths and labels."""
    if len(texts) != len(labels):
        raise ValueError(f"texts and labels must be as many, got {len(texts)} and {len(labels)}")
    ids = [tokenizer.encode(t)[:max_len] for t in texts]
    if not ids or min(len(i) for i in ids) < 1:
        raise ValueError("need at least one text, and every text must give at least one token")
    lengths = torch.tensor([len(i) for i in ids])
    input_ids = torch.zeros(len(ids), max_len, dtype=torch.long)
    for row, i in enumerate(ids):
        input_ids[row, :len(i)] = torch.tensor(i)
    return {"input_ids": input_ids, "lengths": lengths, "labels": torch.as_tensor(list(labels))}


def classification_loss(model: GPTClassifier, batch, lm_weight: float = 0.0) -> torch.Tensor:
    """Cross-entropy of the class, plus ``lm_weight`` times the next-token loss on the real
    tokens of the texts (the GPT paper's auxiliary objective). Taught in: 07_gpt."""
    class_logits, token_logits = model(batch["input_ids"], batch["lengths"], lm_logits=bool(lm_weight))
    loss = nn.functional.cross_entropy(class_logits, batch["labels"])
    if lm_weight:
        t = batch["input_ids"].shape[1]
        targets = batch["input_ids"][:, 1:].masked_fill(
            torch.arange(1, t, device=batch["input_ids"].device) >= batch["lengths"][:, None], -100)
        loss = loss + lm_weight * nn.functional.cross_entropy(
            token_logits[:, :-1].reshape(-1, token_logits.shape[-1]), targets.reshape(-1))
    return loss


# --------------------------------------------------------------------------------------
# The shipped checkpoint
# --------------------------------------------------------------------------------------

SHIPPED_CHECKPOINT = "small_gpt.pt"


def save_pretrained(path, model: GPT, tokenizer, info: dict) -> None:
    """Write the model (float16 weights), its byte-level BPE merges and ``info``."""
    state = {k: v.detach().to("cpu", torch.float16) for k, v in model.state_dict().items()}
    torch.save({"config": vars(model.config), "state_dict": state,
                "merges": [list(m) for m in tokenizer.merges], "info": dict(info)}, Path(path))


def load_pretrained(path=None, device: str | torch.device = "cpu"):
    """(model, tokenizer, info) of ``path``, by default the shipped ``data/small_gpt.pt``
    after checking its sha256 (data card: data/small_gpt.md); loaded with
    ``weights_only=True``. Taught in: 07_gpt."""
    from course_utils.bpe import BPETokenizer
    from course_utils.data import verified_path
    path = verified_path(SHIPPED_CHECKPOINT) if path is None else Path(path)
    saved = torch.load(path, map_location="cpu", weights_only=True)
    model = GPT(GPTConfig(**saved["config"]))
    model.load_state_dict({k: v.float() for k, v in saved["state_dict"].items()})
    tokenizer = BPETokenizer([tuple(m) for m in saved["merges"]], byte_level=True)
    if len(tokenizer) != model.config.vocab_size:
        raise ValueError(f"{path}: the tokenizer has {len(tokenizer)} tokens, the model {model.config.vocab_size}")
    return model.to(device).eval(), tokenizer, saved["info"]

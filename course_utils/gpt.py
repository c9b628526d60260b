"""GPT (Radford et al., 2018, 2019): a decoder-only Transformer language model.

Taught in: 07_gpt. Built from the course's parts: each block is 04's pre-LN
``course_utils.transformer.EncoderLayer`` run with a causal mask (a decoder without
cross-attention is exactly that; generation runs the same layer with a key/value cache,
``course_utils.attention.KVCache``), ``course_utils.bpe.BPETokenizer`` (byte level, 06) for the
text. This module is the model, its two losses and generation; around it,
``course_utils.gpt_training`` (text to token windows, held-out loss and the n-gram
baselines, ``fit``, the classification data and the shipped checkpoint). A notebook imports
each from where it lives (07: ``from course_utils import gpt as G, gpt_training as GT``).

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

import torch
from torch import nn

from course_utils import checks
from course_utils.attention import KVCache, causal_mask
from course_utils.checks import check_config, check_tensor
from course_utils.runtime import check_device
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
        check_config(self, positive=("vocab_size", "max_len", "d_model", "num_heads", "num_layers", "d_ff"),
                     divides=[("d_model", "num_heads")], fractions=("dropout",))


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


def check_ids(idx, vocab_size: int, max_len: int | None = None) -> None:
    """Token ids ``idx`` must be an int64 tensor (batch, t) with 0 <= id < vocab_size (checked
    on the CPU only: reading ids from a GPU would wait for it) and, if ``max_len`` is given,
    t <= max_len; otherwise a ValueError or TypeError saying what was given."""
    checks.check_ids("idx (token ids)", idx, vocab_size, shape=("batch", "t"))
    if idx.dtype != torch.long:
        raise TypeError(f"idx (token ids) must be int64 (torch.long), got {idx.dtype}")
    if idx.shape[1] == 0:
        raise ValueError("idx (token ids) must hold at least one token per row, got t = 0")
    if max_len is not None and idx.shape[1] > max_len:
        raise ValueError(f"idx (token ids) has {idx.shape[1]} tokens but the model reads at most "
                         f"max_len = {max_len}: crop it to the last {max_len} (generate does)")


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
    """One block (the layer itself, as in training) on the new positions ``x`` (batch, n, d)
    with cached keys and values ``past`` ((batch, heads, t, d_head) twice, or None). Returns
    (output, (keys, values) of all t + n positions). ``block``: an ``EncoderLayer``, or its
    ``forward`` (a subclass whose own ``forward`` takes ``(x, past)`` passes ``super().forward``).
    Taught in: 07_gpt."""
    cache = KVCache() if past is None else KVCache(*past)
    n, total = x.shape[1], len(cache) + x.shape[1]
    if n == 1:      # one new token, the last position: it may read every key (torch's fused kernel)
        x, _ = block(x, None, need_weights=False, cache=cache)
    else:           # new query i sits at position total - n + i and may read keys 0 .. total - n + i
        # (through the written-out attention; its weights are dropped)
        x, _ = block(x, causal_mask(total).to(x.device)[total - n:], need_weights=True, cache=cache)
    return x, (cache.keys, cache.values)


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
    check_tensor("logits", logits, dtype="float")
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
# The language-model loss
# --------------------------------------------------------------------------------------


def lm_loss(model: GPT, windows: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the next token at every position of (batch, t + 1) windows:
    one window gives t training examples at once. Taught in: 07_gpt."""
    inputs, targets = windows[:, :-1], windows[:, 1:]
    logits = model(inputs)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


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

"""The modern decoder, written out: the pieces a current small LLM (Llama, SmolLM2) puts in
place of 07's GPT's, each checked against a direct formula in tests/test_llm.py.

Taught in: 07b_small_llm. What changed since GPT-2 (07), piece by piece:

- **RMSNorm** for LayerNorm: no mean subtracted, no bias; x / rms(x) * weight.
- **Rotary position embeddings** (RoPE, Su et al. 2021) for learned positions: each pair of
  query/key dimensions is turned by an angle proportional to the position, so the score
  q_m . k_n depends on m - n only (the relative positions of Shaw et al. 2018, with no
  extra parameters).
- **SwiGLU** feed-forward: down(silu(gate(x)) * up(x)), three matrices instead of two.
- **Grouped-query attention** (GQA): 9 query heads share 3 key/value heads (groups of 3),
  which makes the key/value cache 3x smaller.
- **Tied embeddings**: the output layer is the token embedding matrix, transposed.
- A **key/value cache** that also serves a shared prompt prefix (few-shot examples) to a
  batch of queries.

Leaves out: reading the weights (``llm_training.load_smollm2``), sampling (07's samplers,
``llm_training.generate``), mixed precision, sliding windows and flash attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.checks import check_config, check_ids, check_positive
from course_utils.runtime import check_device


@dataclass
class LlamaConfig:
    """Hyperparameters of a Llama-style decoder; the defaults are SmolLM2-135M's."""
    vocab_size: int = 49152
    d_model: int = 576          # width of the residual stream
    num_layers: int = 30
    num_heads: int = 9          # query heads
    num_kv_heads: int = 3       # key/value heads (GQA groups); = num_heads is plain multi-head
    d_ff: int = 1536            # SwiGLU hidden width
    rope_base: float = 100000.0  # theta: the slowest pair turns by position / base
    eps: float = 1e-5           # RMSNorm's epsilon
    max_len: int = 8192

    def __post_init__(self):
        check_config(self, positive=("vocab_size", "d_model", "num_layers", "num_heads", "num_kv_heads", "d_ff",
                                     "max_len"),
                     divides=(("d_model", "num_heads"), ("num_heads", "num_kv_heads")))
        if (self.d_model // self.num_heads) % 2:
            raise ValueError(f"RoPE needs an even head size, got {self.d_model // self.num_heads}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


# --------------------------------------------------------------------------------------
# RMSNorm
# --------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension (Zhang and Sennrich, 2019).
    Taught in: 07b_small_llm."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


# --------------------------------------------------------------------------------------
# Rotary position embeddings
# --------------------------------------------------------------------------------------


def rope_angles(positions: torch.Tensor, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles, each (len(positions), head_dim). Pair i (dimensions
    i and i + head_dim/2, the "half-split" layout of Hugging Face's Llama) turns by
    position * base^(-2i/head_dim). Taught in: 07b_small_llm."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    angles = positions.float()[:, None] * inv_freq[None, :]     # (t, head_dim/2)
    angles = torch.cat([angles, angles], dim=-1)                 # (t, head_dim): both halves of a pair
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair of x (..., t, head_dim) by the angles of its position: (x1, x2) ->
    (x1 cos - x2 sin, x2 cos + x1 sin). Taught in: 07b_small_llm."""
    return x * cos + rotate_half(x) * sin


# --------------------------------------------------------------------------------------
# Grouped-query attention with a key/value cache
# --------------------------------------------------------------------------------------


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(batch, kv_heads, t, d) -> (batch, kv_heads * groups, t, d): query head h reads
    key/value head h // groups."""
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``num_heads`` query heads sharing ``num_kv_heads`` key/value
    heads, rotary positions and an optional cache. Taught in: 07b_small_llm."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        d, hd = config.d_model, config.head_dim
        self.q_proj = nn.Linear(d, config.num_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, config.num_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, config.num_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(config.num_heads * hd, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                past: tuple[torch.Tensor, torch.Tensor] | None = None, need_weights: bool = False):
        """x (batch, t, d_model), cos/sin (t, head_dim) for the new positions, past = cached
        (keys, values) each (batch, kv_heads, t_past, head_dim) -> (output (batch, t, d_model),
        (keys, values) including the new ones, weights (batch, heads, t, t_past + t) or None)."""
        c = self.config
        b, t, _ = x.shape
        # 1. project and split into heads: (batch, heads, t, head_dim)
        q = self.q_proj(x).view(b, t, c.num_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, c.num_kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, c.num_kv_heads, c.head_dim).transpose(1, 2)
        # 2. rotate queries and keys by their positions (values carry no position)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # 3. append to the cache: keys and values of earlier positions never change
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        t_all = k.shape[2]
        # 4. every query head reads its group's key/value head
        groups = c.num_heads // c.num_kv_heads
        kk, vv = repeat_kv(k, groups), repeat_kv(v, groups)          # (batch, heads, t_all, head_dim)
        # 5. scaled dot products, causal mask (new position i sits at t_all - t + i)
        scores = q @ kk.transpose(-2, -1) / math.sqrt(c.head_dim)  # (batch, heads, t, t_all)
        allowed = torch.ones(t, t_all, dtype=torch.bool, device=x.device).tril(t_all - t)
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        # 6. weighted sum of values, heads concatenated, output projection
        out = (weights @ vv).transpose(1, 2).reshape(b, t, c.num_heads * c.head_dim)
        return self.o_proj(out), (k, v), (weights if need_weights else None)


# --------------------------------------------------------------------------------------
# SwiGLU feed-forward
# --------------------------------------------------------------------------------------


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)) (Shazeer, 2020): a gated feed-forward layer.
    Taught in: 07b_small_llm."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


# --------------------------------------------------------------------------------------
# The decoder
# --------------------------------------------------------------------------------------


class LlamaBlock(nn.Module):
    """Pre-norm block: x + attention(RMSNorm(x)), then x + SwiGLU(RMSNorm(x))."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.eps)
        self.attn = GroupedQueryAttention(config)
        self.ffn_norm = RMSNorm(config.d_model, config.eps)
        self.ffn = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x, cos, sin, past=None, need_weights=False):
        a, kv, weights = self.attn(self.attn_norm(x), cos, sin, past, need_weights)
        x = x + a
        return x + self.ffn(self.ffn_norm(x)), kv, weights


class LlamaDecoder(nn.Module):
    """A Llama-style decoder-only language model with tied embeddings.

    ``forward(idx)`` -> logits (batch, t, vocab); ``step(idx, cache)`` -> (logits, cache) reads
    only the new tokens; ``hidden(idx, cache, need_weights)`` gives the final states.
    Taught in: 07b_small_llm."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(LlamaBlock(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.d_model, config.eps)

    def check_ids(self, idx: torch.Tensor, past_len: int = 0) -> None:
        """Refuse what is not a (batch, t) tensor of token ids this model knows."""
        check_ids("token ids", idx, self.config.vocab_size, shape=("batch", "t"))   # values on the CPU only
        if idx.shape[1] == 0:
            raise ValueError("token ids must hold at least one position, got shape " + str(tuple(idx.shape)))
        if past_len + idx.shape[1] > self.config.max_len:
            raise ValueError(f"{past_len} cached + {idx.shape[1]} new positions exceed max_len "
                             f"{self.config.max_len}")

    def hidden(self, idx: torch.Tensor, cache: list | None = None, need_weights: bool = False):
        """idx (batch, t) -> (final states (batch, t, d_model), new cache (one (keys, values)
        per layer), attention weights per layer (or None)). With a cache, the new tokens sit
        at positions past_len, past_len + 1, ..."""
        past_len = 0 if cache is None else cache[0][0].shape[2]
        self.check_ids(idx, past_len)
        check_device(self, idx, what="the decoder")
        if cache is not None and cache[0][0].shape[0] != idx.shape[0]:
            raise ValueError(f"the cache holds a batch of {cache[0][0].shape[0]}, the ids "
                             f"{idx.shape[0]}: expand it with expand_cache(cache, {idx.shape[0]})")
        positions = torch.arange(past_len, past_len + idx.shape[1], device=idx.device)
        cos, sin = rope_angles(positions, self.config.head_dim, self.config.rope_base)
        x = self.embed(idx)
        new_cache, all_weights = [], []
        for i, block in enumerate(self.blocks):
            x, kv, weights = block(x, cos, sin, None if cache is None else cache[i], need_weights)
            new_cache.append(kv)
            all_weights.append(weights)
        return self.norm(x), new_cache, (all_weights if need_weights else None)

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """Tied output layer: states (..., d_model) -> logits (..., vocab) = states @ E^T."""
        return states @ self.embed.weight.T

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.logits(self.hidden(idx)[0])

    def step(self, idx: torch.Tensor, cache: list | None = None):
        """Read the new tokens idx (batch, t) after the cached ones -> (logits of the last
        position (batch, vocab), cache)."""
        states, cache, _ = self.hidden(idx, cache)
        return self.logits(states[:, -1]), cache


def expand_cache(cache: list, batch_size: int) -> list:
    """A cache of one sequence (batch 1), shared by ``batch_size`` continuations (a few-shot
    prefix read once for every query). Taught in: 07b_small_llm."""
    if cache[0][0].shape[0] != 1:
        raise ValueError(f"expand_cache needs a cache of batch 1, got {cache[0][0].shape[0]}")
    return [(k.expand(batch_size, -1, -1, -1), v.expand(batch_size, -1, -1, -1)) for k, v in cache]


def num_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of (trainable) parameters, each shared tensor counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


# --------------------------------------------------------------------------------------
# LoRA: low-rank updates of frozen weights
# --------------------------------------------------------------------------------------


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update: W x + (alpha / r) B A x with
    A (r, in) small random and B (out, r) zero, so training starts from the frozen model
    (Hu et al., 2021). Taught in: 07b_small_llm."""

    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float = 8.0):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base).__name__}")
        check_positive("rank", rank)
        check_positive("alpha", alpha, integer=False)
        if rank > min(base.in_features, base.out_features):
            raise ValueError(f"rank must be at most {min(base.in_features, base.out_features)} (the layer's "
                             f"smaller side), got {rank}")
        self.base, self.rank, self.scale = base, rank, alpha / rank
        for p in self.base.parameters():
            p.requires_grad_(False)
        w = base.weight
        self.lora_a = nn.Parameter(torch.randn(rank, base.in_features, device=w.device, dtype=w.dtype)
                                   / math.sqrt(base.in_features))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * self.scale

    def merged_weight(self) -> torch.Tensor:
        """W + (alpha / r) B A: the update folded in, so inference costs nothing extra."""
        return self.base.weight + self.scale * self.lora_b @ self.lora_a


def add_lora(model: nn.Module, rank: int = 4, alpha: float = 8.0, targets=("q_proj", "v_proj")) -> nn.Module:
    """Freeze every weight of ``model`` and wrap each linear layer named one of ``targets`` in
    ``LoRALinear`` (in place; returns the model). The names are the model's own: ``q_proj`` and
    ``v_proj`` in this decoder (and Llama's), ``query`` and ``value`` in a BERT of ``transformers``
    (05's MiniLM). Every target must be found at least once. Taught in: 07b_small_llm."""
    targets = tuple(targets)
    found = [(parent, name) for parent in model.modules() for name, child in parent.named_children()
             if name in targets and isinstance(child, nn.Linear)]
    missing = [t for t in targets if t not in {name for _, name in found}]
    if missing:
        names = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear)})
        raise ValueError(f"no linear layer {missing[0]!r} in the model (its linear layers: {', '.join(names)})")
    for p in model.parameters():
        p.requires_grad_(False)
    for parent, name in found:
        setattr(parent, name, LoRALinear(getattr(parent, name), rank, alpha))
    return model

"""Attention: masks, masked softmax, score functions, scaled dot-product and multi-head
attention.

Taught in: 02_bahdanau_attention (score functions, masks, soft lookup),
04_transformer (scaled dot-product and multi-head attention).
Leaves out: sparse, linear and flash attention. ``torch.nn.functional.
scaled_dot_product_attention`` (fused kernels that never build the weights) is used as a
fast path by ``MultiHeadAttention(..., need_weights=False)``, which training takes; the
written-out version gives the weights the notebooks draw, and the two agree (tested).
A ``KVCache`` keeps a self-attention's keys and values between steps of generation (07).

Conventions: masks are boolean and ``True`` means *may attend*. Weights of a query
whose keys are all masked are all zero (never NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.checks import check_positive, check_tensor

# --------------------------------------------------------------------------------------
# Masks and the masked softmax
# --------------------------------------------------------------------------------------


def causal_mask(n: int, device=None) -> torch.Tensor:
    """(n, n) bool mask, True on and below the diagonal: query i sees keys 0..i.
    Taught in: 04_transformer."""
    check_positive("n", n)
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """(batch, max_len) bool mask, True at real (non-padded) positions.
    Taught in: 02_bahdanau_attention."""
    if isinstance(lengths, (list, tuple)):
        lengths = torch.tensor(lengths, dtype=torch.long)
    check_tensor("lengths", lengths, dims=1, dtype="int")
    if max_len is None:  # the lengths are read (the one sync), so their values are checked too
        longest, shortest = (lengths.max().item(), lengths.min().item()) if lengths.numel() else (0, 0)
        if shortest < 0:
            raise ValueError(f"lengths must be >= 0, got {shortest}")
        max_len = longest
    else:
        check_positive("max_len", max_len)
        if lengths.device.type == "cpu" and lengths.numel() and lengths.max().item() > max_len:
            raise ValueError(f"max_len={max_len} is shorter than the longest length {lengths.max().item()}")
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dimension where masked-out scores count as -inf.

    ``mask`` (bool, True = keep) broadcasts against ``scores``. Rows with no kept entry
    get all-zero weights, and no NaN reaches the forward or the backward pass.
    Taught in: 02_bahdanau_attention.
    """
    check_tensor("scores", scores, dtype="float")
    if mask is None:
        mask = scores != float("-inf")  # a row of -inf scores is a fully masked row
    else:
        check_tensor("mask", mask, dtype="bool")
        try:
            mask = mask.expand_as(scores)
        except RuntimeError:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to scores of "
                             f"shape {tuple(scores.shape)}") from None
        mask = mask & (scores != float("-inf"))  # -inf scores count as masked
    any_kept = mask.any(dim=-1, keepdim=True)
    # -inf where masked; a fully masked row is left finite so softmax never sees all -inf
    scores = scores.masked_fill(~mask & any_kept, float("-inf"))
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)


# --------------------------------------------------------------------------------------
# Score functions e(query, key) for attention over encoder states (02)
# --------------------------------------------------------------------------------------


class ScoreAttention(nn.Module):
    """Base class: ``score(query, keys)`` gives e, ``forward`` does softmax and the
    weighted sum. Subclasses implement ``prepare`` (the part of the score that depends on
    the keys only, computed once per source sentence) and ``score``.

    ``query``: (batch, query_size) for one decoder step, or (batch, n_q, query_size).
    ``keys``: (batch, n_k, key_size); ``values`` default to the keys.
    ``mask``: (batch, n_k) bool, True at real positions (or broadcastable to the scores).
    ``prepared``: ``self.prepare(keys)``, if the caller kept it from an earlier step.
    Returns ``(context, weights)``: (batch, [n_q,] value_size) and (batch, [n_q,] n_k).
    """

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        """What the score needs from the keys alone (the same at every decoder step)."""
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """(batch, n_q, query_size), prepared keys (batch, n_k, ...) -> (batch, n_q, n_k)."""
        raise NotImplementedError

    query_size: int | None = None  # the sizes a subclass was built for (None: any)
    key_size: int | None = None

    def forward(self, query, keys, values=None, mask=None, prepared=None):
        sizes = {"query_size": (self.query_size, "the module"), "key_size": (self.key_size, "the module")}
        sizes = {k: v for k, v in sizes.items() if v[0] is not None}
        check_tensor("query", query, dims=(2, 3), dtype="float")
        check_tensor("keys", keys, dtype="float", shape=("batch", "n_k", "key_size"), sizes=sizes)
        check_tensor("query", query, shape=("batch",) + ((None,) if query.dim() == 3 else ()) + ("query_size",),
                     sizes=sizes)
        values = keys if values is None else check_tensor("values", values, dtype="float",
                                                          shape=("batch", "n_k", None), sizes=sizes)
        one_step = query.dim() == 2
        q = query.unsqueeze(1) if one_step else query  # (batch, n_q, query_size)
        if mask is not None:
            check_tensor("mask", mask, dims=(2, 3), dtype="bool", shape=(..., "n_k"), sizes=sizes)
            if mask.dim() == 2:
                mask = mask.unsqueeze(1)  # (batch, 1, n_k): the same keys for every query
        prepared = self.prepare(keys) if prepared is None else prepared
        scores = self.score(q, prepared)  # (batch, n_q, n_k)
        weights = masked_softmax(scores, mask)
        context = weights @ values  # (batch, n_q, value_size)
        if one_step:
            return context.squeeze(1), weights.squeeze(1)
        return context, weights


class DotAttention(ScoreAttention):
    """e = s . h (query and key of the same size; no parameters)."""

    def score(self, query, prepared):
        if query.shape[-1] != prepared.shape[-1]:
            raise ValueError(f"dot attention needs query and key of the same size, got "
                             f"{query.shape[-1]} and {prepared.shape[-1]}; use MultiplicativeAttention")
        return query @ prepared.transpose(-2, -1)


class MultiplicativeAttention(ScoreAttention):
    """e = s^T W h (Luong's 'general' score); W h is prepared once."""

    def __init__(self, query_size: int, key_size: int):
        super().__init__()
        self.query_size, self.key_size = check_positive("query_size", query_size), check_positive("key_size", key_size)
        self.W = nn.Linear(key_size, query_size, bias=False)

    def prepare(self, keys):
        return self.W(keys)  # (batch, n_k, query_size)

    def score(self, query, prepared):
        return query @ prepared.transpose(-2, -1)


class AdditiveAttention(ScoreAttention):
    """e = v^T tanh(W1 h + W2 s) (Bahdanau et al., 2015); W1 h is prepared once."""

    def __init__(self, query_size: int, key_size: int, hidden_size: int):
        super().__init__()
        self.query_size, self.key_size = check_positive("query_size", query_size), check_positive("key_size", key_size)
        check_positive("hidden_size", hidden_size)
        self.W1 = nn.Linear(key_size, hidden_size, bias=False)
        self.W2 = nn.Linear(query_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def prepare(self, keys):
        return self.W1(keys)  # (batch, n_k, hidden)

    def score(self, query, prepared):
        # (batch, 1, n_k, hidden) + (batch, n_q, 1, hidden) -> (batch, n_q, n_k, hidden)
        hidden = torch.tanh(prepared.unsqueeze(1) + self.W2(query).unsqueeze(2))
        return self.v(hidden).squeeze(-1)


class MLPAttention(ScoreAttention):
    """e = MLP([s; h]): two ReLU hidden layers on the concatenated query and key.

    The first layer on the concatenation equals A s + B h + b, so B h is prepared once.
    """

    def __init__(self, query_size: int, key_size: int, hidden_size: int):
        super().__init__()
        self.query_size, self.key_size = check_positive("query_size", query_size), check_positive("key_size", key_size)
        check_positive("hidden_size", hidden_size)
        self.W_query = nn.Linear(query_size, hidden_size)          # A s + b
        self.W_key = nn.Linear(key_size, hidden_size, bias=False)  # B h
        self.rest = nn.Sequential(nn.ReLU(), nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                                  nn.Linear(hidden_size, 1))

    def prepare(self, keys):
        return self.W_key(keys)  # (batch, n_k, hidden)

    def score(self, query, prepared):
        first = prepared.unsqueeze(1) + self.W_query(query).unsqueeze(2)  # (batch, n_q, n_k, hidden)
        return self.rest(first).squeeze(-1)


SCORE_FUNCTIONS = {"dot": DotAttention, "multiplicative": MultiplicativeAttention,
                   "additive": AdditiveAttention, "mlp": MLPAttention}


def make_attention(kind: str, query_size: int, key_size: int, hidden_size: int = 64) -> ScoreAttention:
    """An attention module by name: 'dot', 'multiplicative', 'additive' or 'mlp'."""
    if kind not in SCORE_FUNCTIONS:
        raise ValueError(f"attention kind must be one of {sorted(SCORE_FUNCTIONS)}, got {kind!r}")
    if kind == "dot":
        return DotAttention()
    if kind == "multiplicative":
        return MultiplicativeAttention(query_size, key_size)
    return SCORE_FUNCTIONS[kind](query_size, key_size, hidden_size)


# --------------------------------------------------------------------------------------
# Scaled dot-product and multi-head attention (04)
# --------------------------------------------------------------------------------------


def _check_qkv(q, k, v, mask) -> None:
    """q (..., n_q, d_k), k (..., n_k, d_k), v (..., n_k, d_v), mask bool (..., n_q or 1, n_k)."""
    sizes = {}
    check_tensor("q", q, dtype="float", shape=(..., "n_q", "d_k"), sizes=sizes)
    check_tensor("k", k, dtype="float", shape=(..., "n_k", "d_k"), sizes=sizes)
    check_tensor("v", v, dtype="float", shape=(..., "n_k", None), sizes=sizes)
    if mask is not None:
        check_tensor("mask", mask, dtype="bool", shape=(..., None, "n_k"), sizes=sizes)
        if mask.shape[-2] not in (1, q.shape[-2]):
            raise ValueError(f"mask must have shape (..., n_q or 1, n_k) with n_q = {q.shape[-2]} "
                             f"(from q), got shape {tuple(mask.shape)}")


def scaled_dot_product_attention(q, k, v, mask=None, dropout: nn.Module | None = None):
    """softmax(q k^T / sqrt(d_k)) v with an optional bool mask (True = may attend).

    q: (..., n_q, d_k), k: (..., n_k, d_k), v: (..., n_k, d_v); mask broadcastable to
    (..., n_q, n_k). Returns ``(output (..., n_q, d_v), weights (..., n_q, n_k))``.
    Taught in: 04_transformer.
    """
    _check_qkv(q, k, v, mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    weights = masked_softmax(scores, mask)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights


def fused_attention(q, k, v, mask=None, dropout_p: float = 0.0) -> torch.Tensor:
    """The output of ``scaled_dot_product_attention`` without the weights, computed by
    torch's fused kernel (``torch.nn.functional.scaled_dot_product_attention``): faster,
    less memory. Same shapes and mask convention (bool, True = may attend); a query whose
    keys are all masked gets a zero output, as in the written-out version.
    Taught in: 04_transformer (the fast path of multi-head attention)."""
    _check_qkv(q, k, v, mask)
    if mask is None:
        return nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    any_kept = mask.any(dim=-1, keepdim=True)  # (..., n_q, 1): False where every key is masked
    # torch's kernel gives NaN for a row with no key: let such rows see every key, then zero them
    out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~any_kept,
                                                     dropout_p=dropout_p)
    return out.masked_fill(~any_kept, 0.0)


@dataclass
class KVCache:
    """What a self-attention keeps between steps of generation: the keys and values
    (batch, heads, t, d_head) of every position it has read so far (None before the first
    step). ``MultiHeadAttention(x, x, x, mask, cache=c)`` projects only the new positions,
    appends their keys and values here and attends over all of them. Taught in: 07_gpt."""
    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None

    def __len__(self) -> int:
        """The number of positions cached."""
        return 0 if self.keys is None else self.keys.shape[2]

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new positions' keys and values (batch, heads, n, d_head); return all of them."""
        if self.keys is not None:   # the earlier positions' never change: kept, not projected again
            k, v = torch.cat([self.keys, k], dim=2), torch.cat([self.values, v], dim=2)
        self.keys, self.values = k, v
        return k, v


class MultiHeadAttention(nn.Module):
    """Multi-head attention: project, split into heads, attend, concatenate, project (W^O).

    ``forward(query, key, value, mask=None, need_weights=True)`` with (batch, n, d_model)
    inputs; ``mask`` is bool (True = may attend) of shape (n_q, n_k), (batch, n_q or 1, n_k)
    or (batch, heads, n_q, n_k). Returns ``(output (batch, n_q, d_model), weights
    (batch, heads, n_q, n_k))``; with ``need_weights=False`` the weights are None and the
    output comes from torch's fused kernel (``fused_attention``; the same output up to
    float rounding, faster: what training uses). With a ``cache`` (self-attention during
    generation, 07) the keys and values of the earlier positions come from it and the new
    ones are appended to it: ``n_k`` counts both. Taught in: 04_transformer.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_positive("d_model", d_model)
        check_positive("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x):
        """(batch, n, d_model) -> (batch, heads, n, d_head): each head's slice of the features."""
        batch, n, _ = x.shape
        return x.view(batch, n, self.num_heads, self.d_head).transpose(1, 2)

    def merge_heads(self, x):
        """(batch, heads, n, d_head) -> (batch, n, d_model): the heads side by side again."""
        batch, _, n, _ = x.shape
        return x.transpose(1, 2).reshape(batch, n, self.d_model)

    def forward(self, query, key, value, mask=None, need_weights: bool = True, cache: KVCache | None = None):
        sizes = {"d_model": (self.d_model, "the module")}
        check_tensor("query", query, dtype="float", shape=("batch", "n_q", "d_model"), sizes=sizes)
        check_tensor("key", key, dtype="float", shape=("batch", "n_k", "d_model"), sizes=sizes)
        check_tensor("value", value, dtype="float", shape=("batch", "n_k", "d_model"), sizes=sizes)
        if cache is not None:
            sizes["n_k"] = (len(cache) + key.shape[1], "the cached and the new keys")
        if mask is not None:
            # (n_q, n_k), (batch, n_q or 1, n_k) or (batch, heads, n_q or 1, n_k)
            check_tensor("mask", mask, dims=(2, 3, 4), dtype="bool", shape=(..., None, "n_k"), sizes=sizes)
            if mask.shape[-2] not in (1, query.shape[1]):
                raise ValueError(f"mask must have shape (..., n_q or 1, n_k) with n_q = {query.shape[1]} "
                                 f"(from query), got shape {tuple(mask.shape)}")
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)  # (batch, 1, n_q or 1, n_k): the same for every head
        # 1. project and split into heads: (batch, heads, n, d_head)
        q, k, v = self.split_heads(self.W_q(query)), self.split_heads(self.W_k(key)), self.split_heads(self.W_v(value))
        if cache is not None:   # generation: the earlier positions' keys and values, then the new ones
            k, v = cache.extend(k, v)
        # 2. attend in every head at once (weights only if asked for: the fused kernel is faster)
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        else:
            dropout_p = self.dropout.p if self.training else 0.0
            out, weights = fused_attention(q, k, v, mask, dropout_p), None
        # 3. concatenate the heads: (batch, heads, n_q, d_head) -> (batch, n_q, d_model)
        out = self.merge_heads(out)
        # 4. mix the heads with W^O
        return self.W_o(out), weights

    @torch.no_grad()
    def copy_from_torch(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (same sizes, batch_first)."""
        if mha.embed_dim != self.d_model or mha.num_heads != self.num_heads:
            raise ValueError(f"torch module has d_model={mha.embed_dim}, heads={mha.num_heads}; "
                             f"this one {self.d_model}, {self.num_heads}")
        for i, lin in enumerate((self.W_q, self.W_k, self.W_v)):
            lin.weight.copy_(mha.in_proj_weight[i * self.d_model:(i + 1) * self.d_model])
            if lin.bias is not None:
                lin.bias.copy_(mha.in_proj_bias[i * self.d_model:(i + 1) * self.d_model])
        self.W_o.weight.copy_(mha.out_proj.weight)
        if self.W_o.bias is not None:
            self.W_o.bias.copy_(mha.out_proj.bias)
        return self

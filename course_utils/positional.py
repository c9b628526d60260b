"""Positional information for attention models: sinusoidal encodings, the linear map M_k
that shifts them by k positions, and learned position embeddings.

Taught in: 04_transformer. (03_convs2s uses learned position embeddings of its own.)
Leaves out: relative positions (Shaw et al.), rotary embeddings (RoPE) and ALiBi; RoPE
is the map M_k below applied to queries and keys instead of added to the input.
"""

from __future__ import annotations

import torch
from torch import nn

from course_utils.checks import check_tensor


def _check_sizes(max_len, d_model):
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive int, got {max_len!r}")
    if not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even int (sin/cos pairs), got {d_model!r}")


def frequencies(d_model: int) -> torch.Tensor:
    """(d_model / 2,) angular frequencies omega_i = 1 / 10000^(2i / d_model).
    Taught in: 04_transformer."""
    _check_sizes(1, d_model)
    return 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model) table: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same).
    Taught in: 04_transformer."""
    _check_sizes(max_len, d_model)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * frequencies(d_model)[None, :]
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)  # even dimensions
    pe[:, 1::2] = torch.cos(angles)  # odd dimensions
    return pe.float()


def shift_matrix(k: int, d_model: int) -> torch.Tensor:
    """(d_model, d_model) matrix M_k with PE(p + k) = M_k PE(p) for every position p:
    one 2x2 rotation by angle k * omega_i per (sin, cos) pair. Taught in: 04_transformer."""
    _check_sizes(1, d_model)
    if not isinstance(k, int):
        raise TypeError(f"k must be an int offset, got {type(k).__name__}")
    angle = k * frequencies(d_model)  # (d/2,)
    cos, sin = torch.cos(angle), torch.sin(angle)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    idx = torch.arange(0, d_model, 2)
    # [sin(a+b), cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] @ [sin a, cos a]
    m[idx, idx], m[idx, idx + 1] = cos, sin
    m[idx + 1, idx], m[idx + 1, idx + 1] = -sin, cos
    return m.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to (batch, n, d_model) inputs; no parameters, any
    length up to ``max_len`` (make it large: it costs only memory). Taught in: 04_transformer."""

    def __init__(self, d_model: int, max_len: int = 512):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        n = x.shape[1]
        if x.dim() != 3 or x.shape[-1] != self.pe.shape[1]:
            raise ValueError(f"input must be (batch, n, {self.pe.shape[1]}), got {tuple(x.shape)}")
        if offset + n > self.pe.shape[0]:
            raise ValueError(f"positions up to {offset + n - 1} requested, table has {self.pe.shape[0]}; "
                             "raise max_len (sinusoids exist for every position)")
        return x + self.pe[offset:offset + n]


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position (BERT, GPT, ConvS2S). Positions never seen in
    training keep their random initial vectors; positions >= ``max_len`` do not exist.
    Taught in: 04_transformer."""

    def __init__(self, d_model: int, max_len: int = 512):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every vector from N(0, 1/2) per coordinate: the scale of the sinusoids (each
        sin/cos coordinate has mean square 1/2, a vector's norm is about sqrt(d_model / 2)),
        so that learned and sinusoidal positions weigh the same against the word embeddings."""
        nn.init.normal_(self.embedding.weight, std=0.5 ** 0.5)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        n, max_len = x.shape[1], self.embedding.num_embeddings
        if x.dim() != 3 or x.shape[-1] != self.embedding.embedding_dim:
            raise ValueError(f"input must be (batch, n, {self.embedding.embedding_dim}), got {tuple(x.shape)}")
        if offset + n > max_len:
            raise IndexError(f"a learned table has no vector for position {offset + n - 1}: it was "
                             f"built for max_len={max_len} positions")
        return x + self.embedding.weight[offset:offset + n]


class NoPositionalEncoding(nn.Module):
    """Adds nothing: the model sees a bag of words (self-attention is permutation-equivariant)."""

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return x


def make_positional(kind: str, d_model: int, max_len: int = 512) -> nn.Module:
    """A positional module by name: 'sinusoidal', 'learned' or 'none'."""
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_len)
    if kind == "learned":
        return LearnedPositionalEmbedding(d_model, max_len)
    if kind == "none":
        return NoPositionalEncoding()
    raise ValueError(f"positional kind must be 'sinusoidal', 'learned' or 'none', got {kind!r}")


def position_similarity(pe: torch.Tensor) -> torch.Tensor:
    """(n, n) cosine similarity between the position vectors of a (n, d) table."""
    check_tensor("pe", pe, dtype="float", shape=("positions", "d_model"))
    unit = pe / pe.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return unit @ unit.T


__all__ = ["frequencies", "sinusoidal_encoding", "shift_matrix", "SinusoidalPositionalEncoding",
           "LearnedPositionalEmbedding", "NoPositionalEncoding", "make_positional",
           "position_similarity"]

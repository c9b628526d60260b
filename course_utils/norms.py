"""Normalisation layers written out: LayerNorm (one token's features) versus BatchNorm
(one feature over the batch), and a BatchNorm for (batch, n, d) sequences.

Taught in: 04_transformer. Leaves out: RMSNorm, GroupNorm and the learned scale and
shift as separate parameters of ``layer_norm``/``batch_norm`` (pass ``weight``/``bias``).

Both teaching functions take features in the LAST dimension and use the biased variance
(divide by N), as torch does when it normalises.
"""

from __future__ import annotations

import torch
from torch import nn

from course_utils.checks import check_tensor


def _check_affine(weight, bias, sizes) -> None:
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            check_tensor(name, t, dtype="float", shape=("d",), sizes=sizes)


def _affine(y, weight, bias):
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def layer_norm(x: torch.Tensor, eps: float = 1e-5, weight=None, bias=None) -> torch.Tensor:
    """(..., d) -> (..., d): each vector minus its own mean, over sqrt(its variance + eps);
    equals ``torch.nn.functional.layer_norm(x, (d,), weight, bias, eps)``.
    Taught in: 04_transformer."""
    sizes = {}
    check_tensor("x", x, dtype="float", shape=(..., "d"), sizes=sizes)
    _check_affine(weight, bias, sizes)
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # biased: divide by d
    return _affine((x - mu) / torch.sqrt(var + eps), weight, bias)


def batch_norm(x: torch.Tensor, eps: float = 1e-5, mask: torch.Tensor | None = None,
               weight=None, bias=None) -> torch.Tensor:
    """(N, d) or (batch, n, d) -> same: each feature minus its mean over all the other
    dimensions (every token of every sentence), over sqrt(its variance + eps); equals
    torch's BatchNorm1d in training mode. ``mask`` (batch, n) bool, True = real token,
    takes the statistics over real tokens only. Taught in: 04_transformer."""
    sizes = {}
    check_tensor("x", x, dims=(2, 3), dtype="float", shape=(..., "d"), sizes=sizes)
    _check_affine(weight, bias, sizes)
    mu, var = batch_statistics(x, mask)
    return _affine((x - mu) / torch.sqrt(var + eps), weight, bias)


def batch_statistics(x: torch.Tensor, mask: torch.Tensor | None = None):
    """Per-feature mean and biased variance (d,) over every position of (N, d) or (batch,
    n, d) ``x``, or only where ``mask`` (batch, n) is True. Taught in: 04_transformer."""
    check_tensor("x", x, dims=(2, 3), dtype="float")
    if mask is not None:
        check_tensor("mask", mask, dtype="bool", shape=tuple(x.shape[:-1]))
    flat = x.reshape(-1, x.shape[-1])  # (N, d): every token is one sample
    if mask is not None:
        flat = flat[mask.reshape(-1)]
    mu = flat.mean(dim=0)
    return mu, ((flat - mu) ** 2).mean(dim=0)


class SequenceBatchNorm(nn.Module):
    """BatchNorm over (batch, n, d) sequences, features last, as a drop-in for LayerNorm.

    Statistics are taken over every position, padded ones included (as a plain
    ``nn.BatchNorm1d`` would); in eval mode it uses running averages from training.
    This is the version that 04 shows failing; it is not a recommendation.
    Taught in: 04_transformer.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__()
        self.bn = nn.BatchNorm1d(d_model, eps=eps, momentum=momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3:
            raise ValueError(f"SequenceBatchNorm expects (batch, n, d), got shape {tuple(x.shape)}")
        return self.bn(x.transpose(1, 2)).transpose(1, 2)  # BatchNorm1d wants (batch, d, n)


def make_norm(kind: str, d_model: int) -> nn.Module:
    """A normalisation module by name: 'layer' (nn.LayerNorm) or 'batch' (SequenceBatchNorm)."""
    if kind == "layer":
        return nn.LayerNorm(d_model)
    if kind == "batch":
        return SequenceBatchNorm(d_model)
    raise ValueError(f"norm must be 'layer' or 'batch', got {kind!r}")

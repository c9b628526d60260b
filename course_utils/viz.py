"""Figures: attention heatmaps with tokens on the axes, grids over layers x heads,
training curves, scores by source length, and a style readable on a projector.

Taught in: 01_seq2seq_bottleneck (curves, scores by length), 02_bahdanau_attention
(heatmaps). Leaves out: interactive views (``course_utils.widgets``) and the offline
bertviz views (04_transformer).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

#: Font sizes for the screen and for a projector (``use_style(lecture=True)``).
STYLES = {
    False: {"font.size": 11, "axes.titlesize": 13, "axes.labelsize": 12, "figure.dpi": 100,
            "legend.fontsize": 10, "lines.linewidth": 1.8},
    True: {"font.size": 16, "axes.titlesize": 19, "axes.labelsize": 17, "figure.dpi": 110,
           "legend.fontsize": 14, "lines.linewidth": 3.0, "xtick.labelsize": 14,
           "ytick.labelsize": 14},
}


def use_style(lecture: bool = False) -> None:
    """Course figure style: PNG output, grid, colour-blind-safe colours; ``lecture`` makes
    fonts and lines large enough for a projector."""
    plt.rcParams.update({"axes.grid": True, "grid.alpha": 0.3, "figure.figsize": (7, 4.2),
                         "axes.spines.top": False, "axes.spines.right": False,
                         "axes.prop_cycle": plt.cycler(color=plt.get_cmap("tab10").colors),
                         "savefig.format": "png", **STYLES[bool(lecture)]})
    try:  # inline backend: PNG, never SVG (nbval compares SVG text)
        from matplotlib_inline.backend_inline import set_matplotlib_formats
        set_matplotlib_formats("png")
    except ImportError:
        pass


def _as_array(weights, ndim: int, name: str) -> np.ndarray:
    if torch.is_tensor(weights):
        weights = weights.detach().float().cpu().numpy()
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {weights.shape}")
    return weights


def _check_tokens(tokens, size: int, axis: str) -> list[str]:
    if tokens is None:
        return [str(i) for i in range(size)]
    tokens = list(tokens)
    if len(tokens) != size:
        raise ValueError(f"{axis} has {len(tokens)} tokens but the weights have {size} "
                         f"{'columns' if axis == 'x_tokens' else 'rows'}")
    return tokens


def attention_heatmap(weights, x_tokens: Sequence[str] | None = None,
                      y_tokens: Sequence[str] | None = None, ax=None, title: str | None = None,
                      xlabel: str = "source (keys)", ylabel: str = "output (queries)",
                      cmap: str = "Blues", annotate: bool = False, colorbar: bool = True):
    """Heatmap of a (queries, keys) weight matrix, keys on x, queries on y; returns the axes.

    Taught in: 02_bahdanau_attention.
    """
    w = _as_array(weights, 2, "weights")
    x_tokens = _check_tokens(x_tokens, w.shape[1], "x_tokens")
    y_tokens = _check_tokens(y_tokens, w.shape[0], "y_tokens")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4, 0.38 * w.shape[1] + 2), max(3, 0.38 * w.shape[0] + 1.5)))
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=max(1e-9, float(w.max())), aspect="auto")
    ax.set_xticks(range(w.shape[1]), x_tokens, rotation=90)
    ax.set_yticks(range(w.shape[0]), y_tokens)
    ax.grid(False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if w[i, j] > 0.6 * w.max() else "black")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.02)
    return ax


def attention_grid(weights, x_tokens: Sequence[str] | None = None,
                   y_tokens: Sequence[str] | None = None, title: str | None = None,
                   row_label: str = "layer", col_label: str = "head", cell_size: float = 2.6):
    """Grid of heatmaps for (layers, heads, queries, keys) weights; returns the figure.

    Taught in: 04_transformer.
    """
    w = _as_array(weights, 4, "weights (layers, heads, queries, keys)")
    layers, heads, nq, nk = w.shape
    x_tokens = _check_tokens(x_tokens, nk, "x_tokens")
    y_tokens = _check_tokens(y_tokens, nq, "y_tokens")
    fig, axes = plt.subplots(layers, heads, figsize=(cell_size * heads + 1, cell_size * layers + 0.8),
                             squeeze=False, sharex=True, sharey=True)
    for l in range(layers):
        for h in range(heads):
            ax = axes[l, h]
            ax.imshow(w[l, h], cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
            ax.grid(False)
            ax.set_xticks(range(nk), x_tokens, rotation=90, fontsize=7)
            ax.set_yticks(range(nq), y_tokens, fontsize=7)
            if l == 0:
                ax.set_title(f"{col_label} {h}")
            if h == 0:
                ax.set_ylabel(f"{row_label} {l}")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_history(histories, smooth: int = 50, ax=None, title: str = "training loss",
                 logy: bool = False):
    """Smoothed training loss per step for one ``History`` or a ``{name: History}`` dict."""
    if not isinstance(histories, Mapping):
        histories = {"": histories}
    if ax is None:
        _, ax = plt.subplots()
    for name, history in histories.items():
        if not history.losses:
            raise ValueError(f"history {name!r} has no recorded steps")
        ax.plot(history.steps, history.smoothed(smooth), label=name or None)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel(f"loss (mean of last {smooth} steps)")
    ax.set_title(title)
    if logy:
        ax.set_yscale("log")
    if any(histories):
        ax.legend()
    return ax


def plot_by_length(results: Mapping[str, Sequence[Mapping]], metric: str = "exact_match",
                   ax=None, title: str | None = None):
    """One line per model of ``metric`` per source-length bucket (rows from
    ``metrics.scores_by_length``). Taught in: 01_seq2seq_bottleneck."""
    if metric not in ("exact_match", "bleu"):
        raise ValueError(f"metric must be 'exact_match' or 'bleu', got {metric!r}")
    if ax is None:
        _, ax = plt.subplots()
    labels = None
    for name, rows in results.items():
        row_labels = [r["bucket"] for r in rows]
        if labels is not None and row_labels != labels:
            raise ValueError(f"{name!r} uses buckets {row_labels}, the others {labels}")
        labels = row_labels
        scale = 100.0 if metric == "exact_match" else 1.0
        ax.plot(range(len(rows)), [scale * r[metric] for r in rows], marker="o", label=name)
    ax.set_xticks(range(len(labels or [])), labels or [])
    ax.set_xlabel("source length (words)")
    ax.set_ylabel("exact match (%)" if metric == "exact_match" else "BLEU")
    ax.set_ylim(-2, 102)
    ax.set_title(title or f"{'exact match' if metric == 'exact_match' else 'BLEU'} by source length")
    ax.legend()
    return ax


def length_histogram(lengths: Mapping[str, Sequence[int]], ax=None, title: str = "sentence lengths",
                     bins: int | Sequence[int] | None = None):
    """Overlaid histograms of sentence lengths (in tokens), one per named list."""
    if ax is None:
        _, ax = plt.subplots()
    top = max(max(v) for v in lengths.values())
    bins = bins if bins is not None else np.arange(0, top + 2) - 0.5
    for name, values in lengths.items():
        ax.hist(values, bins=bins, alpha=0.55, label=name)
    ax.set_xlabel("length (tokens)")
    ax.set_ylabel("sentences")
    ax.set_title(title)
    ax.legend()
    return ax

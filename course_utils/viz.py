"""Figures: attention heatmaps with tokens on the axes, grids over layers x heads,
training curves, scores by source length, a style readable on a projector, and bertviz's
head and model views rendered with no internet (d3 and jQuery inlined from vendor/).

Taught in: 01_seq2seq_bottleneck (curves, scores by length), 02_bahdanau_attention
(heatmaps), 04_transformer (grids, offline bertviz views). Leaves out: interactive views
(``course_utils.widgets``).
"""

from __future__ import annotations

import sys
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
    # Inline backend: PNG, never SVG (nbval compares SVG text). Only inside IPython: outside
    # it, set_matplotlib_formats creates a shell that replaces sys.modules["__main__"], and a
    # script's process pool then cannot find its own functions.
    ipython = sys.modules.get("IPython")
    if ipython is not None and ipython.get_ipython() is not None:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
        set_matplotlib_formats("png")


def _as_array(weights, ndim: int, name: str) -> np.ndarray:
    if torch.is_tensor(weights):
        weights = weights.detach().float().cpu().numpy()
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {weights.shape}")
    if weights.size == 0:
        raise ValueError(f"nothing to draw: {name} is empty, shape {weights.shape}")
    return weights


def _nothing_to_draw(what: str):
    return ValueError(f"nothing to draw: {what}")


def _check_tokens(tokens, size: int, axis: str) -> list[str]:
    if tokens is None:
        return [str(i) for i in range(size)]
    if isinstance(tokens, str):
        raise TypeError(f"{axis} must be a list of tokens, got a str (split it: {axis}=text.split())")
    tokens = list(tokens)
    if len(tokens) != size:
        raise ValueError(f"{axis} has {len(tokens)} tokens but the weights have {size} "
                         f"{'columns' if axis == 'x_tokens' else 'rows'}")
    return tokens


def attention_heatmap(weights, x_tokens: Sequence[str] | None = None,
                      y_tokens: Sequence[str] | None = None, ax=None, title: str | None = None,
                      xlabel: str = "source (keys)", ylabel: str = "output (queries)",
                      cmap: str = "Blues", annotate: bool = False, colorbar: bool = True,
                      vmax: float | None = 1.0, colorbar_label: str = "attention weight"):
    """Heatmap of a (queries, keys) weight matrix, keys on x, queries on y; returns the axes.

    The colours run from 0 to ``vmax``: 1 by default, the range of attention weights, so that
    two heatmaps can be compared by eye; ``vmax=None`` stretches them to the largest weight.
    Taught in: 02_bahdanau_attention.
    """
    w = _as_array(weights, 2, "weights")
    x_tokens = _check_tokens(x_tokens, w.shape[1], "x_tokens")
    y_tokens = _check_tokens(y_tokens, w.shape[0], "y_tokens")
    if vmax is not None and not vmax > 0:
        raise ValueError(f"vmax must be a positive number or None, got {vmax!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4, 0.38 * w.shape[1] + 2), max(3, 0.38 * w.shape[0] + 1.5)))
    top = max(1e-9, float(w.max())) if vmax is None else vmax
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=top, aspect="auto")
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
                        color="white" if w[i, j] > 0.6 * top else "black")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.02, label=colorbar_label)
    return ax


def attention_grid(weights, x_tokens: Sequence[str] | None = None,
                   y_tokens: Sequence[str] | None = None, title: str | None = None,
                   row_label: str = "layer", col_label: str = "head", cell_size: float = 2.6,
                   row_names: Sequence[str] | None = None):
    """Grid of heatmaps for (layers, heads, queries, keys) weights; returns the figure.
    Rows are labelled "layer 0", "layer 1", ... unless ``row_names`` names them.

    Taught in: 04_transformer.
    """
    w = _as_array(weights, 4, "weights (layers, heads, queries, keys)")
    layers, heads, nq, nk = w.shape
    x_tokens = _check_tokens(x_tokens, nk, "x_tokens")
    y_tokens = _check_tokens(y_tokens, nq, "y_tokens")
    fig, axes = plt.subplots(layers, heads, figsize=(cell_size * heads + 1.6, cell_size * layers + 0.8),
                             squeeze=False, sharex=True, sharey=True)
    ticks = plt.rcParams["ytick.labelsize"]  # readable: the style's size (larger in lecture mode)
    ticks = max(8.0, 0.8 * (ticks if isinstance(ticks, (int, float)) else plt.rcParams["font.size"]))
    for l in range(layers):
        for h in range(heads):
            ax = axes[l, h]
            image = ax.imshow(w[l, h], cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
            ax.grid(False)
            ax.set_xticks(range(nk), x_tokens, rotation=90, fontsize=ticks)
            ax.set_yticks(range(nq), y_tokens, fontsize=ticks)
            if l == 0:
                ax.set_title(f"{col_label} {h}")
            if h == 0:
                ax.set_ylabel(row_names[l] if row_names is not None else f"{row_label} {l}")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.colorbar(image, ax=axes, fraction=0.02, pad=0.02, label="attention weight (0 to 1)")
    return fig


def plot_history(histories, smooth: int = 50, ax=None, title: str = "training loss",
                 logy: bool = False):
    """Smoothed training loss per step for one ``History`` or a ``{name: History}`` dict."""
    if not isinstance(histories, Mapping):
        histories = {"": histories}
    if not histories:
        raise _nothing_to_draw("histories is an empty dict")
    for name, history in histories.items():
        if not getattr(history, "losses", None):
            raise _nothing_to_draw(f"history {name!r} has no recorded steps")
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
    ``metrics.scores_by_length``). The buckets of the first model set the x axis; a model
    scored on other buckets (another corpus) is left out with a warning that names it.
    Taught in: 01_seq2seq_bottleneck."""
    import warnings
    if metric not in ("exact_match", "bleu"):
        raise ValueError(f"metric must be 'exact_match' or 'bleu', got {metric!r}")
    if not results or not any(results.values()):
        raise _nothing_to_draw("results holds no scored buckets")
    if ax is None:
        _, ax = plt.subplots()
    labels, counts = None, None
    for name, rows in results.items():
        row_labels = [r["bucket"] for r in rows]
        if labels is not None and row_labels != labels:
            warnings.warn(f"plot_by_length leaves out {name!r}: its buckets {row_labels} are not "
                          f"those of the others {labels}", stacklevel=2)
            continue
        if labels is None and all("count" in r for r in rows):
            counts = [r["count"] for r in rows]
        labels = row_labels
        scale = 100.0 if metric == "exact_match" else 1.0
        ax.plot(range(len(rows)), [scale * r[metric] for r in rows], marker="o", label=name)
    # the number of test sentences under each bucket: a point of 30 sentences moves by 3 %
    ticks = [f"{b}\n(n={n})" for b, n in zip(labels, counts)] if labels and counts else labels or []
    ax.set_xticks(range(len(ticks)), ticks)
    ax.set_xlabel("source length (words)")
    ax.set_ylabel("exact match (%)" if metric == "exact_match" else "BLEU")
    ax.set_ylim(-2, 102)
    ax.set_title(title or f"{'exact match' if metric == 'exact_match' else 'BLEU'} by source length")
    ax.legend()
    return ax


def beam_tree(kept: Sequence[Sequence[str]], finished: Mapping[tuple, float], winner=None,
              ax=None, title: str = "the beam"):
    """Draw a beam search as a tree of words: ``kept`` are the word lists the beam held at
    some step (every prefix of a kept list must be kept too, as a beam keeps it),
    ``finished`` maps each finished word tuple to its summed log-probability, ``winner`` is
    the tuple the search returned. x is the step, one row per leaf; finished hypotheses are
    green with their score, ``winner`` bold, prefixes pushed out of the beam grey.
    Taught in: 01_seq2seq_bottleneck."""
    nodes = {tuple(k[:n]) for k in [*kept, *finished] for n in range(1, len(k) + 1)}
    if not nodes:
        raise _nothing_to_draw("beam_tree needs at least one kept or finished word list, got none")
    if winner is not None and tuple(winner) not in finished:
        raise ValueError(f"winner must be one of the finished hypotheses, got {winner!r}")
    # siblings top to bottom by the best finished score below them (dead ends last)
    best = {k: max((v for f, v in finished.items() if f[:len(k)] == k), default=-np.inf) for k in nodes}
    order = lambda k: (-best[k], k)
    children = {k: sorted((c for c in nodes if len(c) == len(k) + 1 and c[:-1] == k), key=order)
                for k in nodes}
    rows: dict[tuple, float] = {}

    def place(k):  # leaves take the next row; a parent sits between its children
        if not children[k]:
            rows[k] = float(len([r for r in rows if not children[r]]))
        else:
            for c in children[k]:
                place(c)
            rows[k] = float(np.mean([rows[c] for c in children[k]]))

    roots = sorted((k for k in nodes if len(k) == 1), key=order)
    for r in roots:
        place(r)
    if ax is None:
        depth = max(len(k) for k in nodes)
        leaves = sum(1 for k in nodes if not children[k])
        _, ax = plt.subplots(figsize=(max(6, 1.1 * depth + 2.5), max(2.5, 0.32 * leaves + 1)))
    on_path = set() if winner is None else {tuple(winner)[:n] for n in range(1, len(winner) + 1)}
    finished_prefixes = {k[:n] for k in finished for n in range(1, len(k) + 1)}
    for k, y in rows.items():
        if len(k) > 1:
            ax.plot([len(k) - 1, len(k)], [rows[k[:-1]], y], color="0.3" if k in finished_prefixes else "0.75",
                    lw=2.2 if k in on_path else 1.0, zorder=1)
        dead = k not in finished_prefixes
        face = "#d9f2d9" if k in finished else ("#f0f0f0" if dead else "white")
        ax.text(len(k), y, k[-1], ha="center", va="center", zorder=2,
                color="0.55" if dead else "black", fontweight="bold" if k in on_path else "normal",
                bbox=dict(boxstyle="round,pad=0.25", fc=face, ec="0.6" if dead else "0.3"))
        if k in finished:
            ax.text(len(k) + 0.45, y, f"log p {finished[k]:.2f}", va="center", fontsize="small",
                    fontweight="bold" if k == (tuple(winner) if winner else None) else "normal")
    ax.set_xlim(0.4, max(len(k) for k in nodes) + 1.6)
    ax.set_ylim(max(rows.values()) + 0.7, -0.7)
    ax.set_xlabel("decoder step")
    ax.set_yticks([])
    ax.grid(False)
    ax.set_title(title)
    return ax


def length_histogram(lengths: Mapping[str, Sequence[int]], ax=None, title: str = "sentence lengths",
                     bins: int | Sequence[int] | None = None, unit: str = "words",
                     counted: str = "sentences"):
    """Histograms of lengths, one outline per named list (outlines, not translucent bars,
    so that overlaps keep the legend's colours): x is the length in ``unit``, y the number
    of ``counted`` items (sentences, verses, paragraphs). Taught in: 00_welcome."""
    if not lengths or not any(len(v) for v in lengths.values()):
        raise _nothing_to_draw("lengths holds no lengths")
    if ax is None:
        _, ax = plt.subplots()
    top = max(max(v) for v in lengths.values() if len(v))
    bins = bins if bins is not None else np.arange(0, top + 2) - 0.5
    for name, values in lengths.items():
        ax.hist(values, bins=bins, histtype="step", linewidth=2, label=name)
    ax.set_xlabel(f"length ({unit})")
    ax.set_ylabel(counted)
    ax.set_title(title)
    ax.legend()
    return ax


# ---- offline bertviz views (04) ----
# bertviz's head_view / model_view load require.js, d3 and jQuery from a CDN: offline the
# view stays blank, and JupyterLab has no require.js ("require is not defined"). Here the
# two libraries are inlined from course_utils/vendor/ (d3 5.7.0, jQuery 2.2.4; licences
# beside them), evaluated with define/module/exports hidden, and bertviz's script gets
# them through a stand-in for require/requirejs. The libraries go into the first view of
# a kernel session only (the page keeps them); later views wait for them. Div ids are
# numbered per session (bertviz-course-1, -2, ...), so re-executed notebooks match.

_VENDOR = __import__("pathlib").Path(__file__).resolve().parent / "vendor"
VENDORED_JS = {"d3": "d3-5.7.0.min.js", "jquery": "jquery-2.2.4.min.js"}
_GLOBAL = "__courseBertviz"  # window.__courseBertviz = {d3, jQuery}
_bertviz_state = {"views": 0, "libraries_sent": False}


def bertviz_libraries_html() -> str:
    """A <script> that defines ``window.__courseBertviz = {d3, jQuery}`` from the vendored
    files, without touching the page's own ``$``/``jQuery``/``d3``/AMD loader. Taught in: 04."""
    d3 = (_VENDOR / VENDORED_JS["d3"]).read_text(encoding="utf-8")
    jquery = (_VENDOR / VENDORED_JS["jquery"]).read_text(encoding="utf-8")
    return (
        "<script type=\"text/javascript\">\n"
        f"if (!window.{_GLOBAL}) {{ (function () {{\n"
        "  var define = undefined, module = undefined, exports = undefined;\n"
        "  var holder = {};\n"
        f"  (function () {{\n{d3}\n}}).call(holder);  // d3's UMD sets this.d3\n"
        f"  (function () {{\n{jquery}\n}}).call(window);\n"
        "  var jq = window.jQuery.noConflict(true);  // give back the page's $ and jQuery\n"
        f"  window.{_GLOBAL} = {{d3: holder.d3, jQuery: jq}};\n"
        "})(); }\n</script>\n")


def _offline_bertviz_html(bertviz_html: str, include_libraries: bool) -> str:
    """Rewrite the HTML that bertviz returns (``html_action='return'``) to run offline."""
    import re
    html = re.sub(r"<script src=\"https?://[^\"]*\"></script>", "", bertviz_html)
    _bertviz_state["views"] += 1
    div_id = f"bertviz-course-{_bertviz_state['views']}"
    html = re.sub(r"bertviz-[0-9a-f]{32}", div_id, html)
    head, sep, script = html.partition('<script type="text/javascript">')
    if not sep or "requirejs(" not in script:
        raise RuntimeError("this bertviz version returns HTML of an unknown shape; "
                           "pin bertviz 1.4 or update course_utils.viz")
    script = script.rsplit("</script>", 1)[0]
    # drop bertviz's loader configuration (CDN addresses); the stand-in below ignores it
    script = re.sub(r"require\.config\(\{.*?\}\);", "", script, count=1, flags=re.S)
    wrapped = (
        '<script type="text/javascript">\n(function () {\n'
        "  function start() {\n"
        f"    var libs = window.{_GLOBAL};\n"
        "    if (!libs) { setTimeout(start, 50); return; }  // libraries not evaluated yet\n"
        f"    document.querySelectorAll('[{_NOTE_ATTR}=\"{div_id}\"]').forEach(function (n) {{ n.remove(); }});\n"
        "    var require = {config: function () {}};  // no loader: nothing to configure\n"
        "    var requirejs = function (deps, callback) {\n"
        "      callback.apply(null, deps.map(function (d) { return d === 'd3' ? libs.d3 : libs.jQuery; }));\n"
        "    };\n"
        f"{script}\n"
        "  }\n  start();\n})();\n</script>\n")
    libs = bertviz_libraries_html() if include_libraries else ""
    return libs + _untrusted_note(div_id) + head + wrapped


# A stored notebook opened fresh is not trusted: JupyterLab (and GitHub, nbviewer) then show
# its HTML without running the scripts, so the view would be an empty "Layer:" selector. This
# line says what to do; the view's own script removes it as soon as it draws.
_NOTE_ATTR = "data-bertviz-note"


def _untrusted_note(div_id: str) -> str:
    return (f'<div {_NOTE_ATTR}="{div_id}" style="padding:6px 10px;border-left:4px solid #e69f00;'
            'background:#fff8e6;color:#222;font-family:sans-serif;font-size:14px;">'
            "<b>Interactive attention view (bertviz):</b> it is drawn by JavaScript when this "
            "cell runs. Run the cell to see it (a stored notebook opened fresh is not trusted, "
            "so its scripts do not run).</div>\n")


def _view_html(html: str, kind: str):
    """``IPython.display.HTML`` whose plain-text form names the view (consoles, text exports)
    instead of ``<IPython.core.display.HTML object>``; IPython is imported only here."""
    from IPython.display import HTML

    class BertvizView(HTML):
        def __repr__(self) -> str:
            return f"<bertviz {kind.replace('_', ' ')}: interactive, drawn by JavaScript when the cell runs>"

    return BertvizView(html)


def _as_layer_list(attention, name):
    """bertviz wants one (1, heads, q, k) tensor per layer; accept (layers, heads, q, k) too."""
    if attention is None:
        return None
    if torch.is_tensor(attention) or isinstance(attention, np.ndarray):
        a = torch.as_tensor(attention)
        if a.dim() != 4:
            raise ValueError(f"{name} must be (layers, heads, queries, keys) or a list of "
                             f"(1, heads, queries, keys) per layer, got shape {tuple(a.shape)}")
        attention = [layer.unsqueeze(0) for layer in a]
    # round to 3 decimals in float64 so the stored HTML stays small
    return [torch.round(torch.as_tensor(a).detach().cpu().double(), decimals=3) for a in attention]


def _bertviz_view(kind, include_libraries, attention=None, tokens=None, encoder_attention=None,
                  decoder_attention=None, cross_attention=None, **kwargs):
    import bertviz  # imported lazily: it takes seconds
    if include_libraries is None:
        include_libraries = not _bertviz_state["libraries_sent"]
    args = {"attention": _as_layer_list(attention, "attention"), "tokens": tokens,
            "encoder_attention": _as_layer_list(encoder_attention, "encoder_attention"),
            "decoder_attention": _as_layer_list(decoder_attention, "decoder_attention"),
            "cross_attention": _as_layer_list(cross_attention, "cross_attention"), **kwargs}
    args = {k: v for k, v in args.items() if v is not None}
    view = getattr(bertviz, kind)(html_action="return", **args)
    html = _offline_bertviz_html(view.data, include_libraries)
    if include_libraries:
        _bertviz_state["libraries_sent"] = True
    return _view_html(html, kind)


def head_view(attention=None, tokens=None, *, include_libraries: bool | None = None, **kwargs):
    """bertviz's head view, rendered with no internet (inlined d3 and jQuery); returns an
    ``IPython.display.HTML``. Takes bertviz's arguments: ``attention`` (layers, heads, n, n)
    or a list per layer, with ``tokens``; or ``encoder_attention``, ``decoder_attention``,
    ``cross_attention`` with ``encoder_tokens``/``decoder_tokens``. The libraries are
    included in the first view of the session (``include_libraries`` forces it on or off).
    Taught in: 04_transformer."""
    return _bertviz_view("head_view", include_libraries, attention, tokens, **kwargs)


def model_view(attention=None, tokens=None, *, include_libraries: bool | None = None, **kwargs):
    """bertviz's model view (every layer x head as a thumbnail), rendered with no internet;
    arguments as for ``head_view``. Taught in: 04_transformer."""
    return _bertviz_view("model_view", include_libraries, attention, tokens, **kwargs)


def standalone_html(*views, title: str = "attention views") -> str:
    """A complete HTML page of views made by ``head_view``/``model_view`` (the libraries
    are added once at the top), for a browser or a file. Taught in: 04_transformer."""
    body = "".join(getattr(v, "data", v) for v in views)
    if "window.__courseBertviz = " not in body:
        body = bertviz_libraries_html() + body
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n"
            f"<body>\n{body}\n</body></html>\n")

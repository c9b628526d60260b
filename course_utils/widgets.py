"""Interactive views built with ipywidgets. Each function returns the widget (an
``Explorer``: a VBox of controls over an HTML view), so a test can set ``.value`` on its
controls and read what the view shows. Moving a control never retrains anything: the
views are computed from models and data the notebook already has, and bad input typed by
a student (an empty sentence, an unknown word, a sentence too long) gets a message in the
view, never a traceback.

Every explorer also carries a **static fallback**: displayed, it sends the HTML of its
current view next to the widget, so a notebook read without a kernel (slides, a website,
GitHub) shows one state instead of "VBox(...)".

Taught in: 00_welcome (the datasets), 01_seq2seq_bottleneck (beam search),
02_bahdanau_attention (stepping through a decoding), 03_convs2s (receptive fields, attention
per layer),
04_transformer (softmax saturation, masks), 05_bert (masked-language-model guesses),
06_bpe (replaying the merges).
"""

from __future__ import annotations

import base64
import html
import io
import math
import random
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch


# ---- the common frame: controls over a view, with a static fallback ----

def _explorer_type():
    import ipywidgets as W

    class Explorer(W.VBox):
        """A VBox of ``controls`` over an HTML ``view``; displayed, it also sends the view's
        HTML as ``text/html`` (shown where widgets cannot be: slides, websites, GitHub)."""

        def static_html(self) -> str:
            settings = []
            for c in self.controls:
                label, value = getattr(c, "label", None), getattr(c, "value", None)
                if value is not None and getattr(c, "description", ""):
                    # a drop-down or selection slider shows its label, typed text is quoted
                    shown = label if label is not None else repr(value) if isinstance(value, str) else value
                    settings.append(f"{c.description} = {shown}")
            note = "static view (no kernel)" + (": " + ", ".join(settings) if settings else "")
            return (f'<div class="course-static-explorer"><div style="color: #666; font-style: italic">'
                    f'{html.escape(note)}</div>{self.view.value}</div>')

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            if bundle is not None:
                bundle["text/html"] = self.static_html()
            return bundle

    return Explorer


def explorer(controls: Mapping[str, object], render: Callable[..., str], *, watch: Sequence[str] | None = None):
    """An ``Explorer`` over ``controls`` (name -> ipywidget; each is also an attribute of
    the box) whose view is ``render(**values)``. The view is redrawn whenever a watched
    control changes (default: all); a ``ValueError`` from ``render`` is shown as a message."""
    import ipywidgets as W

    view = W.HTML()

    def refresh(*_):
        from course_utils.devicecheck import on_this_thread  # a widget's thread (see there)
        values = {name: c.value for name, c in controls.items() if hasattr(c, "value")}
        try:
            with on_this_thread():
                view.value = render(**values)
        except ValueError as err:
            view.value = message_html(str(err))

    for control in controls.values():
        if hasattr(getattr(control, "style", None), "description_width"):
            control.style.description_width = "initial"   # labels in full ("source words", not "source wo...")
    box = _explorer_type()([*controls.values(), view])
    box.controls, box.view, box.refresh = list(controls.values()), view, refresh
    for name, control in controls.items():
        setattr(box, name, control)
        if hasattr(control, "value") and (watch is None or name in watch):
            control.observe(refresh, names="value")
    refresh()
    return box


def fit_slider(slider, last: int) -> int:
    """Make ``slider`` range over 0..``last`` (the content behind it changed length), keeping
    its value where it can; returns the value to show."""
    if slider.max != last:
        slider.value = min(slider.value, last)
        slider.max = last
    return slider.value


def message_html(text: str) -> str:
    """A message in the view (what a student typed that cannot be shown)."""
    return (f'<div class="course-message" style="color: #a00; font-family: monospace; font-size: 14px">'
            f'{html.escape(text)}</div>')


def figure_html(fig, alt: str = "figure") -> str:
    """A matplotlib figure as an inline PNG ``<img>`` (closed afterwards)."""
    import matplotlib.pyplot as plt
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"/>'


def table_html(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None,
               shade: Callable[[int, int], float | None] | None = None) -> str:
    """A small HTML table; ``shade(i, j)`` in [0, 1] colours cell (i, j) blue."""
    out = ['<table style="border-collapse: collapse; font-family: monospace; font-size: 13px">']
    if header is not None:
        out.append("<tr>" + "".join(f'<th style="padding: 2px 6px">{html.escape(str(h))}</th>' for h in header) + "</tr>")
    for i, row in enumerate(rows):
        cells = []
        for j, value in enumerate(row):
            a = shade(i, j) if shade else None
            style = "padding: 2px 6px; border: 1px solid #ddd"
            if a is not None:
                style += f"; background: rgba(31,119,180,{max(0.0, min(1.0, a)):.3f})"
            cells.append(f'<td style="{style}">{html.escape(str(value))}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(out) + "</table>"


@dataclass
class Walkthrough:
    """One decoded sentence: source tokens, output tokens and the weights per step."""
    source: list[str]
    output: list[str]
    weights: torch.Tensor  # (len(output), len(source))

    def __post_init__(self):
        w = torch.as_tensor(self.weights, dtype=torch.float32)
        if w.shape != (len(self.output), len(self.source)):
            raise ValueError(f"weights must be (output, source) = ({len(self.output)}, "
                             f"{len(self.source)}), got {tuple(w.shape)}")
        self.weights = w


def step_html(item: Walkthrough, step: int) -> str:
    """HTML for decoding step ``step``: the source with each word shaded by its weight,
    and the output so far with the word produced at this step in bold."""
    if not 0 <= step < len(item.output):
        raise IndexError(f"step must be in 0..{len(item.output) - 1}, got {step}")
    w = item.weights[step]
    top = int(w.argmax())
    cells = []
    for j, (token, a) in enumerate(zip(item.source, w.tolist())):
        border = "2px solid #c00" if j == top else "1px solid #ddd"
        cells.append(f'<span title="{a:.3f}" style="background: rgba(31,119,180,{a:.3f}); '
                     f'border: {border}; padding: 2px 4px; margin: 1px; display: inline-block">'
                     f'{html.escape(token)}<br><small>{a:.2f}</small></span>')
    produced = " ".join(html.escape(t) for t in item.output[:step])
    current = html.escape(item.output[step])
    return (f'<div style="font-family: monospace; font-size: 15px; line-height: 2">'
            f'<div><b>step {step}</b>: attends most to <b>{html.escape(item.source[top])}</b> '
            f'({float(w[top]):.2f})</div>'
            f'<div>source: {"".join(cells)}</div>'
            f'<div>output: {produced} <b style="color: #c00">{current}</b></div></div>')


def attention_stepper(items: Sequence[Walkthrough], labels: Sequence[str] | None = None):
    """A sentence picker and a step slider; the view shades the source words by the
    attention weights of the chosen step. Returns an ``Explorer`` with ``.picker``,
    ``.slider`` and ``.view`` attributes. Taught in: 02_bahdanau_attention."""
    import ipywidgets as W

    if not items:
        raise ValueError("attention_stepper needs at least one decoded sentence")
    labels = list(labels) if labels is not None else [" ".join(it.source)[:60] for it in items]
    picker = W.Dropdown(options=[(label, i) for i, label in enumerate(labels)], value=0,
                        description="sentence", layout=W.Layout(width="95%"))
    slider = W.IntSlider(value=0, min=0, max=len(items[0].output) - 1, description="step",
                         continuous_update=True)

    def render(picker, slider):
        item = items[picker]
        return step_html(item, fit_slider(step_slider, len(item.output) - 1))  # sentences differ in length

    step_slider = slider
    return explorer({"picker": picker, "slider": slider}, render)


# ---- BPE (06) ----

def bpe_replay_html(tokenizer, text: str, step: int) -> str:
    """HTML for step ``step`` of ``tokenizer.replay(text)``: the merge just applied and
    the tokens so far, one box per token (byte-level tokens shown as text)."""
    steps = tokenizer.replay(text)
    if not 0 <= step < len(steps):
        raise IndexError(f"step must be in 0..{len(steps) - 1}, got {step}")
    pair, pieces = steps[step]
    tokens = [t for piece in pieces for t in piece]
    boxes = "".join(
        f'<span style="border: 1px solid #888; background: #e8f0fa; padding: 2px 4px; '
        f'margin: 1px; display: inline-block; white-space: pre">'
        f'{html.escape(t.replace(" ", "␣"))}</span>'
        for t in tokenizer.show(tokens))
    if pair is None:
        what = "start: one symbol per character" + (" byte" if tokenizer.byte_level else "")
    else:
        number = tokenizer.ranks[pair] + 1  # merges counted from 1, as in 06
        shown = " + ".join(html.escape(repr(s)) for s in tokenizer.show(list(pair)))
        what = f"merge #{number}: {shown}"
    return (f'<div style="font-family: monospace; font-size: 15px; line-height: 2">'
            f'<div><b>step {step} of {len(steps) - 1}</b> | {what} | '
            f'<b>{len(tokens)} tokens</b></div><div>{boxes}</div></div>')


def bpe_replay(tokenizer, text: str = "The unbelievably hug-loving pugs!"):
    """A text box and a step slider; the view shows the sentence after each merge that
    changes it, as boxes of tokens. Returns an ``Explorer`` with ``.text``, ``.slider``
    and ``.view`` attributes. Taught in: 06_bpe."""
    import ipywidgets as W

    if not isinstance(text, str) or not text:
        raise ValueError(f"bpe_replay needs a non-empty sentence, got {text!r}")
    box_text = W.Text(value=text, description="sentence", continuous_update=False,
                      layout=W.Layout(width="95%"))
    slider = W.IntSlider(value=0, min=0, max=len(tokenizer.replay(text)) - 1,
                         description="step", continuous_update=True)

    def render(text, slider):
        if not text.strip():
            raise ValueError("type a sentence to replay its merges")
        return bpe_replay_html(tokenizer, text, fit_slider(step_slider, len(tokenizer.replay(text)) - 1))

    step_slider = slider
    return explorer({"text": box_text, "slider": slider}, render)


# ---- softmax saturation and masks (04) ----

def saturation_html(d_k: int, scale: bool, seed: int = 0, num_keys: int = 10) -> str:
    """Why attention divides by sqrt(d_k): the spread of q.k for random unit-variance
    vectors (std sqrt(d_k) unscaled, 1 scaled) and the softmax weights of one query over
    ``num_keys`` keys, with their largest weight and entropy."""
    import matplotlib.pyplot as plt
    if not isinstance(d_k, int) or d_k < 1:
        raise ValueError(f"d_k must be a positive int, got {d_k!r}")
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2000, d_k, generator=g), torch.randn(2000, d_k, generator=g)
    scores = (q * k).sum(-1) / (math.sqrt(d_k) if scale else 1.0)
    one_q, keys = torch.randn(d_k, generator=g), torch.randn(num_keys, d_k, generator=g)
    weights = torch.softmax(keys @ one_q / (math.sqrt(d_k) if scale else 1.0), dim=0)
    entropy = float(-(weights * weights.clamp_min(1e-12).log()).sum())
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 2.6))
    left.hist(scores.numpy(), bins=40, color="#1f77b4")
    left.set(title=f"q·k{' / √d_k' if scale else ''} over 2000 pairs", xlabel="score", ylabel="pairs")
    right.bar(range(num_keys), weights.numpy(), color="#ff7f0e")
    right.set(title="softmax over 10 keys", xlabel="key", ylabel="weight", ylim=(0, 1))
    fig.tight_layout()
    stats = (f"d_k = {d_k}, {'scaled by 1/√d_k' if scale else 'not scaled'}: std of the scores "
             f"{float(scores.std()):.2f}; largest weight {float(weights.max()):.2f}; entropy "
             f"{entropy:.2f} nats (uniform: {math.log(num_keys):.2f})")
    return f'<div style="font-family: monospace; font-size: 14px">{html.escape(stats)}</div>' + figure_html(fig, stats)


def softmax_saturation(seed: int = 0):
    """d_k (a selection slider) and whether to scale: the distribution of q.k and the
    resulting attention weights of one query. Returns an ``Explorer`` with ``.d_k``,
    ``.scale`` and ``.view``. Taught in: 04_transformer."""
    import ipywidgets as W
    d_k = W.SelectionSlider(options=[1, 4, 16, 64, 256, 1024], value=64, description="d_k")
    scale = W.Checkbox(value=False, description="divide by √d_k")
    return explorer({"d_k": d_k, "scale": scale}, lambda d_k, scale: saturation_html(d_k, scale, seed))


MAX_MASK_LENGTH = 12


def parse_lengths(text: str, most: int = MAX_MASK_LENGTH) -> list[int]:
    """'3, 1, 4' -> [3, 1, 4]; a ``ValueError`` that says what was expected otherwise."""
    parts = [p for p in str(text).replace(";", ",").replace(" ", ",").split(",") if p]
    if not parts:
        raise ValueError("type the lengths of the sentences in the batch, e.g. 3, 1, 4")
    try:
        lengths = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"lengths must be whole numbers separated by commas, got {text!r}") from None
    if any(n < 1 or n > most for n in lengths) or len(lengths) > 8:
        raise ValueError(f"up to 8 lengths, each from 1 to {most}, got {text!r}")
    return lengths


def masks_html(layer, lengths: Sequence[int], causal: bool, row: int, seed: int = 0) -> str:
    """The boolean mask of batch row ``row`` (padding, and causal if asked) and the
    attention weights (head 0) that ``layer`` (a ``MultiHeadAttention``) gives it on random
    inputs: masked keys get weight 0, every real query's weights sum to 1."""
    from course_utils.attention import causal_mask, padding_mask
    lengths = list(lengths)
    if not 0 <= row < len(lengths):
        raise ValueError(f"row must be in 0..{len(lengths) - 1}, got {row}")
    n = max(lengths)
    keys_ok = padding_mask(torch.tensor(lengths), n)                 # (batch, n)
    mask = keys_ok[:, None, :].expand(len(lengths), n, n)            # every query: the real keys
    if causal:
        mask = mask & causal_mask(n)
    device = next(layer.parameters()).device
    x = torch.randn(len(lengths), n, layer.d_model, generator=torch.Generator().manual_seed(seed)).to(device)
    with torch.no_grad():
        was = layer.training
        layer.eval()
        _, weights = layer(x, x, x, mask.to(device))
        layer.train(was)
    w = weights[row, 0].cpu()
    real = lengths[row]
    symbols = [["■" if bool(mask[row, i, j]) else "·" for j in range(n)] for i in range(n)]
    numbers = [[f"{float(w[i, j]):.2f}" for j in range(n)] for i in range(n)]
    header = [f"k{j}" for j in range(n)]
    left = table_html([[f"q{i}"] + r for i, r in enumerate(symbols)], [""] + header,
                      shade=lambda i, j: 0.5 if j > 0 and symbols[i][j - 1] == "■" else None)
    right = table_html([[f"q{i}"] + r for i, r in enumerate(numbers)], [""] + header,
                       shade=lambda i, j: float(w[i, j - 1]) if j > 0 else None)
    hidden = ~mask[row].cpu()
    masked = (f"Masked keys get weight {float(w[hidden].abs().max()):.2f}" if hidden.any()
              else "No key is masked in this row")
    note = (f"row {row}: {real} real token(s) of {n}; {'causal + padding' if causal else 'padding'} mask. "
            f"{masked}; the weights of query q0 sum to {float(w[0].sum()):.2f}")
    return (f'<div style="font-family: monospace; font-size: 14px">{html.escape(note)}</div>'
            f'<div style="display: flex; gap: 24px"><div><b>mask (■ = may attend)</b>{left}</div>'
            f'<div><b>weights, head 0</b>{right}</div></div>')


def mask_explorer(layer, lengths: str = "3, 1, 4", seed: int = 0):
    """The lengths of a padded batch (typed), causal or not, and which row: the boolean
    mask and the weights of a real attention ``layer``. Returns an ``Explorer`` with
    ``.lengths``, ``.causal``, ``.row`` and ``.view``. Taught in: 04_transformer."""
    import ipywidgets as W
    text = W.Text(value=lengths, description="lengths", continuous_update=False)
    causal = W.Checkbox(value=False, description="causal")
    row = W.IntSlider(value=0, min=0, max=max(len(parse_lengths(lengths)) - 1, 0), description="row")
    last_good = [parse_lengths(lengths)]

    def render(lengths, causal, row):
        note = ""
        try:
            last_good[0] = parse_lengths(lengths)
        except ValueError as err:  # say so, and keep showing the last batch that made sense
            note = message_html(f"{err}; showing the last valid batch {last_good[0]}")
        parsed = last_good[0]
        return note + masks_html(layer, parsed, causal, fit_slider(row_slider, len(parsed) - 1), seed)

    row_slider = row
    return explorer({"lengths": text, "causal": causal, "row": row}, render)


# ---- receptive fields and attention per layer (03) ----

def reach(position: int, num_layers: int, kernel_size: int, length: int, causal: bool) -> list[set[int]]:
    """Per layer (0 = the input), the positions that output ``position`` of layer
    ``num_layers`` depends on, for stacked convolutions of width ``kernel_size``: centred
    (encoder, padding on both sides) or causal (decoder: only earlier positions)."""
    if not 0 <= position < length:
        raise ValueError(f"position must be in 0..{length - 1}, got {position}")
    if kernel_size < 1 or num_layers < 0:
        raise ValueError(f"need kernel_size >= 1 and num_layers >= 0, got {kernel_size}, {num_layers}")
    offsets = range(-(kernel_size - 1), 1) if causal else range(-((kernel_size - 1) // 2), kernel_size // 2 + 1)
    layers = [{position}]
    for _ in range(num_layers):
        layers.append({p + o for p in layers[-1] for o in offsets if 0 <= p + o < length})
    return layers[::-1]


def receptive_field_html(kernel_size: int, num_layers: int, causal: bool, position: int, length: int = 24) -> str:
    """A grid: one row per layer, the positions that reach output ``position`` shaded, and
    the formula r = 1 + L (k - 1) next to the count the grid shows."""
    from course_utils.convs2s import receptive_field
    layers = reach(position, num_layers, kernel_size, length, causal)
    rows = [[f"layer {l}" if l else "input"] + ["●" if p in layers[l] else "" for p in range(length)]
            for l in range(num_layers, -1, -1)]
    grid = table_html(rows, [""] + [str(p) for p in range(length)],
                      shade=lambda i, j: 0.6 if j > 0 and rows[i][j] == "●" else None)
    r = receptive_field(num_layers, kernel_size)
    seen = len(layers[0])
    clipped = "" if seen == r else f" (the grid shows {seen}: the sequence ends cut it off)"
    note = (f"{'decoder (causal)' if causal else 'encoder (centred)'}: output {position} of layer {num_layers} "
            f"sees r = 1 + L(k - 1) = 1 + {num_layers}·({kernel_size} - 1) = {r} input positions{clipped}")
    return f'<div style="font-family: monospace; font-size: 14px">{html.escape(note)}</div>{grid}'


def receptive_field_explorer(length: int = 24):
    """Kernel width, number of layers, encoder (centred) or decoder (causal) and an output
    position: the input positions that reach it, layer by layer, and the formula. Returns
    an ``Explorer`` with ``.kernel``, ``.layers``, ``.mode``, ``.position``. Taught in: 03_convs2s."""
    import ipywidgets as W
    kernel = W.IntSlider(value=3, min=1, max=7, description="kernel k")
    layers = W.IntSlider(value=2, min=0, max=8, description="layers L")
    mode = W.Dropdown(options=[("encoder (centred)", False), ("decoder (causal)", True)], value=False,
                      description="kind")
    position = W.IntSlider(value=length // 2, min=0, max=length - 1, description="output")
    return explorer({"kernel": kernel, "layers": layers, "mode": mode, "position": position},
                    lambda kernel, layers, mode, position: receptive_field_html(kernel, layers, mode, position, length))


@dataclass
class LayerAttention:
    """One decoded sentence and its attention weights in every decoder layer."""
    source: list[str]
    output: list[str]
    weights: torch.Tensor  # (layers, len(output), len(source))

    def __post_init__(self):
        w = torch.as_tensor(self.weights, dtype=torch.float32)
        if w.dim() != 3 or w.shape[1:] != (len(self.output), len(self.source)):
            raise ValueError(f"weights must be (layers, {len(self.output)}, {len(self.source)}), "
                             f"got {tuple(w.shape)}")
        self.weights = w


def layer_attention_html(item: LayerAttention, layer: int) -> str:
    """The attention of decoder layer ``layer`` as a shaded table (rows: output words)."""
    if not 0 <= layer < item.weights.shape[0]:
        raise ValueError(f"layer must be in 0..{item.weights.shape[0] - 1}, got {layer}")
    w = item.weights[layer]
    rows = [[out] + [f"{float(a):.2f}" for a in w[i]] for i, out in enumerate(item.output)]
    note = (f"decoder layer {layer + 1} of {item.weights.shape[0]}: mean largest weight "
            f"{float(w.max(-1).values.mean()):.2f}")
    return (f'<div style="font-family: monospace; font-size: 14px">{html.escape(note)}</div>'
            + table_html(rows, [""] + item.source, shade=lambda i, j: float(w[i, j - 1]) if j > 0 else None))


def layer_attention(items: Sequence[LayerAttention], labels: Sequence[str] | None = None):
    """A sentence picker and a layer slider over precomputed attention weights of every
    decoder layer. Returns an ``Explorer`` with ``.picker``, ``.layer``. Taught in: 03_convs2s."""
    import ipywidgets as W
    if not items:
        raise ValueError("layer_attention needs at least one decoded sentence")
    labels = list(labels) if labels is not None else [" ".join(it.source)[:60] for it in items]
    picker = W.Dropdown(options=[(label, i) for i, label in enumerate(labels)], value=0,
                        description="sentence", layout=W.Layout(width="95%"))
    layer = W.IntSlider(value=0, min=0, max=items[0].weights.shape[0] - 1, description="layer")
    return explorer({"picker": picker, "layer": layer},
                    lambda picker, layer: layer_attention_html(items[picker], layer))


# ---- beam search, step by step (01) ----

@dataclass
class BeamStep:
    """The candidates ranked at one step: (tokens, log-prob, status) with status 'kept',
    'finished' (ended in <eos>) or 'pruned' (ranked, but the beam was full)."""
    candidates: list[tuple[list[int], float, str]]


@dataclass
class BeamTrace:
    steps: list[BeamStep]
    tokens: list[int]     # the winner (with its <eos>)
    score: float          # its summed log-probability
    normalized: float     # score / length**alpha


def beam_trace(model, src_ids: Sequence[int], beam_size: int = 4, alpha: float = 0.0,
               max_len: int = 60) -> BeamTrace:
    """``decoding.beam_search`` on one sentence, with its steps recorded through its ``trace``
    hook: at every step the 2K best extensions and what became of them."""
    from course_utils.decoding import beam_search, length_normalized
    if not src_ids:
        raise ValueError("the source sentence is empty")
    device = next(model.parameters()).device
    steps: list[BeamStep] = []
    found = beam_search(model, torch.tensor([list(src_ids)], device=device), torch.tensor([len(src_ids)]),
                        beam_size=beam_size, max_len=max_len, alpha=alpha,
                        trace=lambda shown: steps.append(BeamStep(shown[0])))
    tokens, score = found.tokens[0], found.scores[0]
    return BeamTrace(steps, tokens, score, length_normalized(score, len(tokens), alpha))


def beam_html(trace: BeamTrace, step: int, decode: Callable[[Sequence[int]], list[str]], alpha: float) -> str:
    """The candidates of step ``step`` (kept in bold, finished in green, pruned in grey)
    under the winner and its score."""
    if not 0 <= step < len(trace.steps):
        raise ValueError(f"step must be in 0..{len(trace.steps) - 1}, got {step}")
    colours = {"kept": "#000", "finished": "#080", "pruned": "#aaa"}
    lines = []
    for tokens, score, status in trace.steps[step].candidates:
        text = html.escape(" ".join(decode(tokens)))
        weight = "bold" if status == "kept" else "normal"
        lines.append(f'<div style="color: {colours[status]}; font-weight: {weight}">{score:8.3f}  '
                     f'{status:<8} {text}</div>')
    winner = html.escape(" ".join(decode(trace.tokens)))
    return (f'<div style="font-family: monospace; font-size: 14px; white-space: pre">'
            f'<div>winner: <b>{winner}</b>  log-prob {trace.score:.3f}, / length^{alpha:g} = '
            f'{trace.normalized:.3f}; {len(trace.steps)} steps</div>'
            f'<div><b>step {step + 1}</b>: the best extensions, ranked (summed log-prob, what became of them)</div>'
            + "".join(lines) + "</div>")


def beam_explorer(model, data, sources: Sequence[str], max_len: int = 60):
    """Beam size K, length normalisation alpha, a sentence picker and a step slider over
    beam search on a trained model: the ranked extensions at each step, kept, finished
    or pruned, and the winner with its score. Returns an ``Explorer`` with ``.picker``,
    ``.beam``, ``.alpha``, ``.step``. Taught in: 01_seq2seq_bottleneck."""
    import ipywidgets as W
    from course_utils.data import tokenize
    if not sources:
        raise ValueError("beam_explorer needs at least one source sentence")
    picker = W.Dropdown(options=[(s[:70], i) for i, s in enumerate(sources)], value=0,
                        description="sentence", layout=W.Layout(width="95%"))
    beam = W.IntSlider(value=4, min=1, max=8, description="beam K")
    alpha = W.FloatSlider(value=0.0, min=0.0, max=1.5, step=0.25, description="alpha")
    step = W.IntSlider(value=0, min=0, max=0, description="step")
    cache: dict = {}

    def render(picker, beam, alpha, step):
        key = (picker, beam, alpha)
        if key not in cache:
            cache[key] = beam_trace(model, data.src_vocab.encode(tokenize(sources[picker])), beam, alpha, max_len)
        trace = cache[key]
        return beam_html(trace, fit_slider(step_slider, len(trace.steps) - 1), data.tgt_vocab.decode, alpha)

    step_slider = step
    return explorer({"picker": picker, "beam": beam, "alpha": alpha, "step": step}, render)


# ---- what a masked language model guesses (05) ----

def mlm_html(model, tokenizer, sentence: str, masked: str, rolls: int = 0, top_k: int = 5, seed: int = 0) -> str:
    """The model's ``top_k`` guesses (with probabilities) for each masked word of
    ``sentence`` (``masked``: the words to hide, comma-separated; every occurrence becomes
    one [MASK]), and BERT's training-time masking (15 % chosen; 80 % [MASK], 10 % random,
    10 % unchanged) drawn on the sentence (draw number ``rolls``)."""
    from course_utils.bert import mask_tokens
    from course_utils.novels import words
    tokens = words(sentence or "")
    if not tokens:
        raise ValueError("type a sentence (letters or punctuation) to see what the model guesses")
    hide = {w.strip().lower() for w in (masked or "").split(",") if w.strip()}
    missing = sorted(w for w in hide if w not in {t.lower() for t in tokens})
    if missing:
        raise ValueError(f"not a word of the sentence: {', '.join(missing)} (type words of the sentence, "
                         f"comma-separated)")
    if not hide:
        raise ValueError("type the words to mask (comma-separated), e.g. the last noun of the sentence")
    shown = [tokenizer.mask_token if t.lower() in hide else t for t in tokens]
    enc = tokenizer(" ".join(shown), return_tensors="pt")
    most = model.cfg.max_len
    if enc["input_ids"].shape[1] > most:
        raise ValueError(f"the sentence is {enc['input_ids'].shape[1]} pieces long; the model reads at most {most}")
    device = next(model.parameters()).device
    was = model.training
    model.eval()
    with torch.no_grad():
        logits, _ = model(*(enc[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")))
    model.train(was)
    ids = enc["input_ids"][0]
    unk = [t for t, piece_ids in zip(shown, [tokenizer(t, add_special_tokens=False)["input_ids"] for t in shown])
           if tokenizer.unk_token_id in piece_ids]
    blocks = []
    for n, where in enumerate((ids == tokenizer.mask_token_id).nonzero()[:, 0].tolist()):
        probs = torch.softmax(logits[0, where].float().cpu(), -1)
        best = probs.topk(top_k)
        rows = [[tokenizer.convert_ids_to_tokens(int(i)), f"{float(p):.1%}"] for p, i in zip(best.values, best.indices)]
        blocks.append(f"<div><b>[MASK] {n + 1}</b>" + table_html(rows, ["guess", "probability"],
                                                                  shade=lambda i, j: float(best.values[i]) if j == 1 else None) + "</div>")
    # BERT's masking rule on the unmasked sentence
    plain = tokenizer(" ".join(tokens), return_tensors="pt")["input_ids"]
    generator = torch.Generator().manual_seed(seed + rolls)
    special = [tokenizer.convert_tokens_to_ids(t) for t in tokenizer.all_special_tokens]
    inputs, labels = mask_tokens(plain, len(tokenizer), special, tokenizer.mask_token_id, generator=generator)
    pieces = []
    for original, now, label in zip(plain[0].tolist(), inputs[0].tolist(), labels[0].tolist()):
        text = html.escape(tokenizer.convert_ids_to_tokens(original))
        if label == -100:
            pieces.append(f'<span style="color: #555">{text}</span>')
        else:
            fate = ("[MASK]" if now == tokenizer.mask_token_id else
                    "kept" if now == original else "random: " + tokenizer.convert_ids_to_tokens(now))
            pieces.append(f'<span style="background: #fde2b8; padding: 1px 3px">{text} → {html.escape(fate)}</span>')
    chosen = int((labels != -100).sum())
    note = f"unknown to the vocabulary (read as [UNK]): {', '.join(unk)}" if unk else ""
    return (f'<div style="font-family: monospace; font-size: 14px">'
            f'<div>{html.escape(" ".join(shown))}</div>'
            f'<div style="display: flex; gap: 24px">{"".join(blocks)}</div>'
            f'<div style="color: #a60">{html.escape(note)}</div>'
            f'<div><b>training-time masking, draw {rolls}</b>: {chosen} of {plain.shape[1] - 2} pieces chosen '
            f'(15 %): {" ".join(pieces)}</div></div>')


def mlm_explorer(model, tokenizer, sentence: str, masked: str, seed: int = 0):
    """A sentence and the words to mask (typed; a new sentence without them masks its last
    word), how many guesses: the model's top guesses for each masked word with their
    probabilities, and BERT's 15 % / 80-10-10 masking of the sentence with a re-roll
    button. Returns an ``Explorer`` with ``.sentence``, ``.masked``, ``.top``, ``.draw``,
    ``.reroll`` and ``.view``. Taught in: 05_bert."""
    import ipywidgets as W
    from course_utils.novels import words
    text = W.Text(value=sentence, description="sentence", continuous_update=False, layout=W.Layout(width="95%"))
    hide = W.Text(value=masked, description="mask", continuous_update=False)
    top = W.IntSlider(value=5, min=1, max=10, description="guesses")
    rolls = W.IntText(value=0, description="draw")
    reroll = W.Button(description="re-roll the masking")
    box = explorer({"sentence": text, "masked": hide, "top": top, "draw": rolls, "reroll": reroll},
                   lambda sentence, masked, top, draw: mlm_html(model, tokenizer, sentence, masked, draw, top, seed))

    def new_sentence(change):
        """A new sentence whose words do not include the ones to mask: mask its last word."""
        present = {w.lower() for w in words(change["new"] or "")}
        wanted = {w.strip().lower() for w in hide.value.split(",") if w.strip()}
        candidates = [w for w in words(change["new"] or "") if w.isalpha()]
        if candidates and not wanted <= present:
            hide.value = candidates[-1]

    def again(_):
        rolls.value += 1

    text.observe(new_sentence, names="value")  # registered after the view's refresh: runs after it
    reroll.on_click(again)
    return box


# ---- the datasets (00) ----

def dataset_html(pairs: Sequence[tuple[str, str]], low: int, high: int, draw: int, per_page: int = 5,
                 lexicon=None, src_lengths: Sequence[int] | None = None) -> str:
    """``per_page`` random pairs (draw number ``draw``) whose source has ``low``..``high``
    words, with their word counts; with a lexicon, the alignment sketch of the first.
    ``src_lengths``: the source lengths of ``pairs``, if already counted."""
    from course_utils.data import alignment_sketch, tokenize
    if src_lengths is None:
        src_lengths = [len(tokenize(s)) for s, _ in pairs]
    fits = [pair for pair, n in zip(pairs, src_lengths) if low <= n <= high]
    if not fits:
        raise ValueError(f"no pair has {low}-{high} source words: widen the length range")
    chosen = random.Random(draw).sample(fits, min(per_page, len(fits)))
    rows = [[len(tokenize(s)), s, len(tokenize(t)), t] for s, t in chosen]
    out = (f'<div style="font-family: monospace; font-size: 14px">{len(fits):,} of {len(pairs):,} pairs have '
           f'{low}-{high} source words; {len(chosen)} drawn (draw {draw})</div>'
           + table_html(rows, ["words", "source", "words", "target"]))
    if lexicon is not None:
        links = alignment_sketch(*chosen[0], lexicon)
        shade = [d for _, _, d in links]
        out += ('<div style="font-family: monospace; font-size: 14px"><b>alignment sketch</b> of the first pair: '
                'each target word and the source word it co-occurs with most (Dice, over the training pairs)</div>'
                + table_html([[b, "←", a, f"{d:.2f}"] for b, a, d in links], ["target", "", "source", "Dice"],
                             shade=lambda i, j: shade[i] if j == 3 else None))
    return out


def dataset_browser(corpora: Mapping[str, Sequence[tuple[str, str]]],
                    lexicons: Mapping[str, Mapping] | None = None, per_page: int = 5):
    """Pick a corpus (name -> (source, target) pairs) and a range of source lengths, draw
    random pairs with their word counts; corpora with a lexicon also get the alignment
    sketch. Returns an ``Explorer`` with ``.corpus``, ``.lengths``, ``.draw``. Taught in: 00_welcome."""
    import ipywidgets as W
    from course_utils.data import tokenize
    if not corpora:
        raise ValueError("dataset_browser needs at least one corpus")
    counted = {name: [len(tokenize(s)) for s, _ in pairs] for name, pairs in corpora.items()}
    longest = max(max(n) for n in counted.values())
    corpus = W.Dropdown(options=list(corpora), value=next(iter(corpora)), description="corpus")
    lengths = W.IntRangeSlider(value=(5, 15), min=1, max=longest, description="source words")
    draw = W.IntSlider(value=0, min=0, max=99, description="draw")
    lexicons = lexicons or {}
    return explorer({"corpus": corpus, "lengths": lengths, "draw": draw},
                    lambda corpus, lengths, draw: dataset_html(corpora[corpus], lengths[0], lengths[1], draw,
                                                               per_page, lexicons.get(corpus), counted[corpus]))


# ---- where a Vision Transformer looks (08) ----

def vit_attention_html(model, images: torch.Tensor, labels: torch.Tensor, index: int, layer: int,
                       head: int) -> str:
    """Image ``index`` beside the class token's attention over the patches in ``layer``
    (1-based) and ``head`` (0-based; -1: the mean of the heads; -2: attention rollout up to
    that layer), with the model's prediction."""
    import matplotlib.pyplot as plt
    from course_utils.vit import attention_rollout
    if not 0 <= index < len(images):
        raise ValueError(f"image must be in 0..{len(images) - 1}, got {index}")
    if not 1 <= layer <= len(model.layers):
        raise ValueError(f"layer must be in 1..{len(model.layers)}, got {layer}")
    if not -2 <= head < model.cfg.num_heads:
        raise ValueError(f"head must be in -2..{model.cfg.num_heads - 1}, got {head}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits, weights = model(images[index:index + 1].to(device), return_attention=True)
    finally:
        model.train(was_training)  # a view leaves the model as it found it
    w = (attention_rollout(weights[:layer]) if head == -2 else
         weights[layer - 1].mean(1) if head == -1 else weights[layer - 1][:, head])[0, 0, 1:]
    side = model.cfg.image_size // model.cfg.patch_size
    grid = w.reshape(side, side).cpu()
    what = {-2: f"rollout, layers 1-{layer}", -1: f"layer {layer}, mean of heads"}.get(head, f"layer {layer}, head {head}")
    fig, axes = plt.subplots(1, 2, figsize=(6, 3.2))
    axes[0].imshow(images[index, 0].cpu(), cmap="gray_r", vmin=0, vmax=1)
    axes[0].set_title(f"label {int(labels[index])}, predicted {int(logits.argmax())}")
    axes[1].imshow(images[index, 0].cpu(), cmap="gray_r", vmin=0, vmax=1)
    shown = axes[1].imshow(grid.repeat_interleave(model.cfg.patch_size, 0).repeat_interleave(model.cfg.patch_size, 1),
                           cmap="Reds", alpha=0.6, vmin=0, vmax=float(grid.max()))
    axes[1].set_title(f"class token's attention\n{what}", fontsize=10)
    fig.colorbar(shown, ax=axes[1], fraction=0.046, label="weight")
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    caption = f"image {index}: label {int(labels[index])}, predicted {int(logits.argmax())}; {what}"
    return (f'<div style="font-family: monospace; font-size: 14px">{html.escape(caption)}</div>'
            + figure_html(fig, f"attention of image {index}, {what}"))


def vit_attention(model, images: torch.Tensor, labels: torch.Tensor):
    """An image slider, a layer slider and a head picker over a trained ViT's class-token
    attention. Returns an ``Explorer`` with ``.image``, ``.layer``, ``.head``. Taught in:
    08_vision_transformer."""
    import ipywidgets as W
    if len(images) == 0 or len(images) != len(labels):
        raise ValueError(f"vit_attention needs images and as many labels, got {len(images)} and {len(labels)}")
    image = W.IntSlider(value=0, min=0, max=len(images) - 1, description="image")
    layer = W.IntSlider(value=len(model.layers), min=1, max=len(model.layers), description="layer")
    heads = [("mean of heads", -1), ("rollout", -2)] + [(f"head {h}", h) for h in range(model.cfg.num_heads)]
    head = W.Dropdown(options=heads, value=-1, description="head")
    return explorer({"image": image, "layer": layer, "head": head},
                    lambda image, layer, head: vit_attention_html(model, images, labels, image, layer, head))


# ---- a GPT that writes (07) ----

def gpt_generate_html(model, tokenizer, prompt: str, temperature: float, top_k: int, top_p: float,
                      seed: int, max_new_tokens: int = 40) -> str:
    """The prompt (bold) and a continuation of ``max_new_tokens`` tokens drawn with
    ``temperature`` (0 = greedy), ``top_k`` (0 = off) and ``top_p`` (1 = off), reproducible
    from ``seed``."""
    from course_utils.gpt import generate
    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError("type a prompt: the model needs at least one token to continue")
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(int(seed))
    out = generate(model, torch.tensor([ids], device=device), max_new_tokens, temperature=temperature,
                   top_k=top_k or None, top_p=None if top_p >= 1 else top_p, generator=generator)
    continuation = tokenizer.decode(out[0, len(ids):].tolist())
    settings = (f"temperature {temperature:.2f}" + ("" if temperature else " (greedy)")
                + f", top-k {top_k or 'off'}, top-p {top_p:.2f}" + (" (off)" if top_p >= 1 else "")
                + f", seed {seed}")
    return (f'<div style="font-family: monospace; font-size: 13px; color: #555">{html.escape(settings)}</div>'
            f'<div style="font-family: serif; font-size: 16px; max-width: 46em; white-space: pre-wrap">'
            f"<b>{html.escape(prompt)}</b>{html.escape(continuation)}</div>")


def gpt_generate(model, tokenizer, prompt: str = "It is a truth universally acknowledged",
                 max_new_tokens: int = 40):
    """A prompt box and sliders for temperature, top-k, top-p and the random seed over a
    trained GPT's continuation. Returns an ``Explorer`` with ``.prompt``, ``.temperature``,
    ``.top_k``, ``.top_p``, ``.seed``. Taught in: 07_gpt."""
    import ipywidgets as W
    # each view is a generation (a forward pass per token): the sliders update on release,
    # not at every value they pass while dragged (which queued a dozen generations)
    slow = dict(continuous_update=False)
    controls = {"prompt": W.Text(value=prompt, description="prompt", layout=W.Layout(width="40em"), **slow),
                "temperature": W.FloatSlider(value=0.8, min=0.0, max=2.0, step=0.05, description="temperature",
                                             **slow),
                "top_k": W.IntSlider(value=0, min=0, max=100, description="top-k (0 off)", **slow),
                "top_p": W.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p", **slow),
                "seed": W.IntSlider(value=0, min=0, max=20, description="seed", **slow)}
    return explorer(controls, lambda prompt, temperature, top_k, top_p, seed: gpt_generate_html(
        model, tokenizer, prompt, temperature, top_k, top_p, seed, max_new_tokens))

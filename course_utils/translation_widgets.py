"""The interactive views of the translation half of the course (00-04), built on the frame
of ``course_utils.widgets``: each view returns an ``Explorer`` whose controls a test can move,
with a static fallback; moving a control never retrains anything, and bad input gets a message
in the view.

Taught in: 00_welcome (the datasets), 01_seq2seq_bottleneck (beam search, step by step),
02_bahdanau_attention (stepping through a decoding), 03_convs2s (receptive fields, attention
per layer), 04_transformer (softmax saturation, masks).
"""

from __future__ import annotations

import html
import math
import random
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from course_utils.widgets import explorer, figure_html, fit_slider, message_html, table_html


# ---- the datasets (00) ----

def dataset_html(pairs: Sequence[tuple[str, str]], low: int, high: int, draw: int, per_page: int = 5,
                 lexicon=None, src_lengths: Sequence[int] | None = None) -> str:
    """``per_page`` random pairs (draw number ``draw``) whose source has ``low``..``high``
    words, with their word counts; with a lexicon, the alignment sketch of the first.
    ``src_lengths``: the source lengths of ``pairs``, if already counted."""
    from course_utils.data.vocab import tokenize
    from course_utils.data.lexicon import alignment_sketch
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
    from course_utils.data.vocab import tokenize
    if not corpora:
        raise ValueError("nothing to draw: dataset_browser needs at least one corpus")
    empty = [name for name, pairs in corpora.items() if not len(pairs)]
    if empty:
        raise ValueError(f"nothing to draw: corpus {empty[0]!r} holds no pairs")
    counted = {name: [len(tokenize(s)) for s, _ in pairs] for name, pairs in corpora.items()}
    longest = max(max(n) for n in counted.values())
    corpus = W.Dropdown(options=list(corpora), value=next(iter(corpora)), description="corpus")
    lengths = W.IntRangeSlider(value=(5, 15), min=1, max=longest, description="source words")
    draw = W.IntSlider(value=0, min=0, max=99, description="draw")
    lexicons = lexicons or {}
    return explorer({"corpus": corpus, "lengths": lengths, "draw": draw},
                    lambda corpus, lengths, draw: dataset_html(corpora[corpus], lengths[0], lengths[1], draw,
                                                               per_page, lexicons.get(corpus), counted[corpus]))


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
    from course_utils.data.vocab import tokenize
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


# ---- stepping through a decoding (02) ----

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
        raise ValueError("nothing to draw: attention_stepper needs at least one decoded sentence")
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
        raise ValueError("nothing to draw: layer_attention needs at least one decoded sentence")
    labels = list(labels) if labels is not None else [" ".join(it.source)[:60] for it in items]
    picker = W.Dropdown(options=[(label, i) for i, label in enumerate(labels)], value=0,
                        description="sentence", layout=W.Layout(width="95%"))
    layer = W.IntSlider(value=0, min=0, max=items[0].weights.shape[0] - 1, description="layer")
    return explorer({"picker": picker, "layer": layer},
                    lambda picker, layer: layer_attention_html(items[picker], layer))


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

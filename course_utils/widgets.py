"""Interactive views built with ipywidgets. Each function returns the widget, so a test
can set ``.value`` on its controls and read what the view shows.

Taught in: 02_bahdanau_attention (stepping through a decoding).
Leaves out: anything that needs a running kernel to be read (the views are plain HTML,
so they also show in exported notebooks).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

import torch


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
    attention weights of the chosen step. Returns a ``VBox`` with ``.picker``,
    ``.slider`` and ``.view`` attributes. Taught in: 02_bahdanau_attention."""
    import ipywidgets as W

    if not items:
        raise ValueError("attention_stepper needs at least one decoded sentence")
    labels = list(labels) if labels is not None else [" ".join(it.source)[:60] for it in items]
    picker = W.Dropdown(options=[(label, i) for i, label in enumerate(labels)], value=0,
                        description="sentence", layout=W.Layout(width="95%"))
    slider = W.IntSlider(value=0, min=0, max=len(items[0].output) - 1, description="step",
                         continuous_update=True)
    view = W.HTML(step_html(items[0], 0))

    def refresh(*_):
        item = items[picker.value]
        if slider.max != len(item.output) - 1:
            slider.value = min(slider.value, len(item.output) - 1)
            slider.max = len(item.output) - 1
        view.value = step_html(item, slider.value)

    picker.observe(refresh, names="value")
    slider.observe(refresh, names="value")
    box = W.VBox([picker, slider, view])
    box.picker, box.slider, box.view = picker, slider, view
    return box


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
        rank = tokenizer.ranks[pair]
        shown = " + ".join(html.escape(repr(s)) for s in tokenizer.show(list(pair)))
        what = f"merge #{rank}: {shown}"
    return (f'<div style="font-family: monospace; font-size: 15px; line-height: 2">'
            f'<div><b>step {step} of {len(steps) - 1}</b> | {what} | '
            f'<b>{len(tokens)} tokens</b></div><div>{boxes}</div></div>')


def bpe_replay(tokenizer, text: str = "The unbelievably hug-loving pugs!"):
    """A text box and a step slider; the view shows the sentence after each merge that
    changes it, as boxes of tokens. Returns a ``VBox`` with ``.text``, ``.slider`` and
    ``.view`` attributes. Taught in: 06_bpe."""
    import ipywidgets as W

    if not isinstance(text, str) or not text:
        raise ValueError(f"bpe_replay needs a non-empty sentence, got {text!r}")
    box_text = W.Text(value=text, description="sentence", continuous_update=False,
                      layout=W.Layout(width="95%"))
    slider = W.IntSlider(value=0, min=0, max=len(tokenizer.replay(text)) - 1,
                         description="step", continuous_update=True)
    view = W.HTML(bpe_replay_html(tokenizer, text, 0))

    def refresh(*_):
        sentence = box_text.value or " "
        last = len(tokenizer.replay(sentence)) - 1
        if slider.max != last:
            slider.value = min(slider.value, last)
            slider.max = last
        view.value = bpe_replay_html(tokenizer, sentence, slider.value)

    box_text.observe(refresh, names="value")
    slider.observe(refresh, names="value")
    box = W.VBox([box_text, slider, view])
    box.text, box.slider, box.view = box_text, slider, view
    return box

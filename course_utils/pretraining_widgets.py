"""The interactive views of the pre-training half of the course (05-08), built on the frame
of ``course_utils.widgets``: each view returns an ``Explorer`` whose controls a test can move,
with a static fallback; moving a control never retrains anything, and bad input gets a message
in the view.

Taught in: 05_bert (masked-language-model guesses), 05b_bert_finetuning (what the fine-tuned
models make of a sentence), 06_bpe (replaying the merges), 07_gpt
(a GPT that writes), 08_vision_transformer (where a Vision Transformer looks).
"""

from __future__ import annotations

import html
from typing import Mapping

import torch

from course_utils.widgets import explorer, figure_html, fit_slider, table_html


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


# ---- what fine-tuning bought: taggers and span heads on a sentence of one's own (05) ----

@torch.no_grad()
def finetuned_html(starts: Mapping[str, Mapping[str, tuple]], sentence: str, word: str,
                   max_len: int = 48) -> str:
    """For each start (name -> {"names": (TokenClassifier, tokenizer), "span": (SpanExtractor,
    tokenizer)}): the words of ``sentence`` its name tagger marks, with the probability of
    "name", and its answer to "who ``word``?" read from the sentence. Bad input (no words, a
    ``word`` that is not in the sentence, a sentence too long) raises ``ValueError``."""
    from course_utils.bert import best_spans
    from course_utils.bert_training import encode_spans, encode_tagging
    from course_utils.novels import words as split_words
    passage = split_words(sentence or "")
    if not passage:
        raise ValueError("type a sentence (letters): there are no words to tag")
    word = (word or "").strip()
    if word.lower() not in {w.lower() for w in passage}:
        raise ValueError(f"the question is 'who {word} ...?': type a word of the sentence, got {word!r}")
    rows = []
    for name, models in starts.items():
        tagger, tok = models["names"]
        device = next(tagger.parameters()).device
        enc = encode_tagging(tok, [passage], [[0] * len(passage)], max_len)
        if int((enc["labels"][0] != -100).sum()) < len(passage):
            raise ValueError(f"the sentence is longer than the {max_len} pieces the models read: shorten it")
        tagger.eval()
        logits = tagger(*(enc[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")))
        p_name = logits[0].softmax(-1)[:, 1][enc["labels"][0].to(device) != -100].cpu().tolist()
        tagged = " ".join(f'<b style="color: #a00">{html.escape(w)}</b><sub>{p:.2f}</sub>' if p > 0.5
                          else html.escape(w) for w, p in zip(passage, p_name))
        spanner, tok = models["span"]
        question = ["who", next(w for w in passage if w.lower() == word.lower())]
        enc = encode_spans(tok, [question], [passage], [(0, 0)], max_len)
        spanner.eval()
        logits = spanner(*(enc[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")))
        first, last = (int(t) for t in best_spans(logits, enc["span_mask"].to(device).bool()))
        ids = tok(question, passage, is_split_into_words=True, truncation="only_second",
                  max_length=max_len).word_ids()
        answer = " ".join(passage[ids[first]:ids[last] + 1])
        rows.append(f'<tr><td style="padding: 4px 8px"><b>{html.escape(name)}</b></td>'
                    f'<td style="padding: 4px 8px">{tagged}</td>'
                    f'<td style="padding: 4px 8px">{html.escape(answer)}</td></tr>')
    return ('<table style="font-family: monospace; font-size: 14px; border-collapse: collapse">'
            '<tr><th>start</th><th>names tagged (probability of a name)</th>'
            f'<th>who {html.escape(word)} ...?</th></tr>' + "".join(rows) + "</table>")


def finetuned_explorer(starts: Mapping[str, Mapping[str, tuple]], sentence: str, word: str,
                       max_len: int = 48):
    """A sentence and a word of it (both typed): ``finetuned_html`` for every start. Returns
    an ``Explorer`` with ``.sentence``, ``.word`` and ``.view``. Taught in: 05b_bert_finetuning."""
    import ipywidgets as W
    text = W.Text(value=sentence, description="sentence", continuous_update=False, layout=W.Layout(width="95%"))
    asked = W.Text(value=word, description="who ...?", continuous_update=False)
    return explorer({"sentence": text, "word": asked},
                    lambda sentence, word: finetuned_html(starts, sentence, word, max_len))


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
    if len(images) == 0:
        raise ValueError("nothing to draw: images is empty")
    if len(images) != len(labels):
        raise ValueError(f"vit_attention needs as many labels as images, got {len(images)} images "
                         f"and {len(labels)} labels")
    image = W.IntSlider(value=0, min=0, max=len(images) - 1, description="image")
    layer = W.IntSlider(value=len(model.layers), min=1, max=len(model.layers), description="layer")
    heads = [("mean of heads", -1), ("rollout", -2)] + [(f"head {h}", h) for h in range(model.cfg.num_heads)]
    head = W.Dropdown(options=heads, value=-1, description="head")
    return explorer({"image": image, "layer": layer, "head": head},
                    lambda image, layer, head: vit_attention_html(model, images, labels, image, layer, head))

"""Data, training, evaluation and the shipped checkpoint around 07's GPT
(``course_utils.gpt``: the model, its losses and generation).

- the novels as one stream of token ids: ``novel_text``, ``encode_text``;
- windows of that stream: ``random_windows`` and ``window_batches`` (training),
  ``heldout_windows`` (a fixed held-out set);
- ``heldout_loss`` (nats per token) and the baselines it is held against, unigram and
  bigram models (``ngram_loss``);
- ``fit`` (AdamW, warm-up and cosine decay, on ``training.train``);
- fine-tuning for classification: ``encode_for_classification`` and ``predict``;
- the shipped checkpoint: ``save_pretrained`` and ``load_pretrained`` (``data/small_gpt.pt``).

Taught in: 07_gpt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

from course_utils.gpt import GPT, GPTClassifier, GPTConfig, lm_loss
from course_utils.runtime import check_device
from course_utils.training import load_model, predictions, save_checkpoint, train


def novel_text(paragraphs) -> str:
    """The paragraphs of the novels as one text, a newline after each paragraph."""
    return "".join(p.text + "\n" for p in paragraphs)


def encode_text(tokenizer, text: str) -> torch.Tensor:
    """A long text as one int64 tensor of token ids."""
    return torch.tensor(tokenizer.encode(text), dtype=torch.long)


def _check_stream(tokens, max_len: int) -> None:
    if not torch.is_tensor(tokens) or tokens.dim() != 1 or tokens.dtype != torch.long:
        raise ValueError(f"tokens must be a 1-D int64 tensor, got "
                         f"{tuple(tokens.shape) if torch.is_tensor(tokens) else type(tokens).__name__}")
    if len(tokens) < max_len + 1:
        raise ValueError(f"tokens must hold at least max_len + 1 = {max_len + 1} ids, got {len(tokens)}")


# -- windows of the token stream -----------------------------------------------------------

def random_windows(tokens: torch.Tensor, max_len: int, batch_size: int, generator=None) -> torch.Tensor:
    """(batch_size, max_len + 1) windows of ``tokens`` at random starts: inputs are
    [:, :-1], targets [:, 1:]."""
    _check_stream(tokens, max_len)
    starts = torch.randint(len(tokens) - max_len, (batch_size,), generator=generator)
    index = starts[:, None] + torch.arange(max_len + 1)   # (batch_size, max_len + 1), one gather
    return tokens[index.to(tokens.device)]


def window_batches(tokens: torch.Tensor, max_len: int, batch_size: int, seed: int = 0):
    """Endless random windows (``random_windows``), reproducible from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        yield random_windows(tokens, max_len, batch_size, generator)


def heldout_windows(tokens: torch.Tensor, max_len: int, count: int | None = None) -> torch.Tensor:
    """Non-overlapping (count, max_len + 1) windows from the start of ``tokens`` (all that
    fit when ``count`` is None): a fixed held-out set."""
    _check_stream(tokens, max_len)
    fit = (len(tokens) - 1) // max_len
    count = fit if count is None else min(count, fit)
    return torch.stack([tokens[i * max_len:i * max_len + max_len + 1] for i in range(count)])


# -- held-out loss, the n-gram baselines, training ----------------------------------------

@torch.no_grad()
def heldout_loss(model: GPT, windows: torch.Tensor, batch_size: int = 64) -> float:
    """Mean next-token loss (nats per token) of ``model`` on ``windows`` (eval mode)."""
    was_training = model.training
    model.eval()
    device = check_device(model, what="heldout_loss")
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        w = windows[i:i + batch_size].to(device)
        total += float(lm_loss(model, w)) * w[:, 1:].numel()
        count += w[:, 1:].numel()
    model.train(was_training)
    return total / count


def ngram_loss(train_tokens: torch.Tensor, windows: torch.Tensor, vocab_size: int, order: int,
               alpha: float = 0.1) -> float:
    """Held-out loss (nats per token) of a unigram (``order=1``) or bigram (``order=2``)
    model with add-``alpha`` smoothing, counted on ``train_tokens``, on the same targets
    as ``heldout_loss`` (every position of the windows but the first). Taught in: 07_gpt."""
    if order not in (1, 2):
        raise ValueError(f"order must be 1 (unigram) or 2 (bigram), got {order!r}")
    targets = windows[:, 1:].reshape(-1)
    if order == 1:
        counts = torch.bincount(train_tokens, minlength=vocab_size).double() + alpha
        logp = (counts / counts.sum()).log()
        return float(-logp[targets].mean())
    prev = windows[:, :-1].reshape(-1)
    pair_ids = train_tokens[:-1] * vocab_size + train_tokens[1:]
    pairs = torch.bincount(pair_ids, minlength=vocab_size * vocab_size).double().view(vocab_size, vocab_size)
    pairs += alpha
    logp = (pairs[prev, targets] / pairs[prev].sum(dim=1)).log()
    return float(-logp.mean())


def fit(model: GPT, tokens: torch.Tensor, recipe, max_steps: int | None = None,
        seed: int = 0, valid_fn=None, valid_every: int = 0, progress: bool = False):
    """Train ``model`` (already on its device) on random windows of ``tokens`` as ``recipe``
    (a ``recipes.GPTTraining``) says: AdamW (betas 0.9, 0.95, weight decay), linear warm-up
    and cosine decay; returns the ``History``. Taught in: 07_gpt."""
    from course_utils.schedules import cosine_schedule
    steps = recipe.steps if max_steps is None else max_steps
    device = check_device(model, what="fit")
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95),
                                  weight_decay=recipe.weight_decay)
    scheduler = cosine_schedule(optimizer, min(recipe.warmup, steps - 1), steps)
    batches = window_batches(tokens.to(device), model.config.max_len, recipe.batch_size, seed)
    return train(model, lambda epoch: batches, lm_loss, optimizer, scheduler=scheduler,
                 max_steps=steps, valid_fn=valid_fn, valid_every=valid_every, device=device,
                 progress=progress, desc="GPT")


# -- fine-tuning for classification ----------------------------------------------------------

def predict(model: GPTClassifier, tensors: dict, batch_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """(predicted classes, true labels) of ``tensors`` from ``encode_for_classification``,
    on the CPU (model in eval mode; ``training.predictions``)."""
    count = len(tensors["labels"])
    batches = ({k: v[i:i + batch_size] for k, v in tensors.items()} for i in range(0, count, batch_size))
    return predictions(model, batches, lambda m, batch: (
        m(batch["input_ids"], batch["lengths"], lm_logits=False)[0].argmax(-1), batch["labels"]))


def encode_for_classification(tokenizer, texts: Sequence[str], labels: Sequence[int],
                              max_len: int) -> dict[str, torch.Tensor]:
    """The first ``max_len`` tokens of each text, right-padded with id 0 (a causal model never
    reads padding placed after the text), with their lengths and labels."""
    if len(texts) != len(labels):
        raise ValueError(f"texts and labels must be as many, got {len(texts)} and {len(labels)}")
    ids = [tokenizer.encode(t)[:max_len] for t in texts]
    if not ids or min(len(i) for i in ids) < 1:
        raise ValueError("need at least one text, and every text must give at least one token")
    lengths = torch.tensor([len(i) for i in ids])
    input_ids = torch.zeros(len(ids), max_len, dtype=torch.long)
    for row, i in enumerate(ids):
        input_ids[row, :len(i)] = torch.tensor(i)
    return {"input_ids": input_ids, "lengths": lengths, "labels": torch.as_tensor(list(labels))}


# -- the shipped checkpoint ----------------------------------------------------------------

SHIPPED_CHECKPOINT = "small_gpt.pt"


def save_pretrained(path, model: GPT, tokenizer, info: dict) -> Path:
    """Write the model (float16 weights), its config, its byte-level BPE merges and ``info``
    as one checkpoint of ``training.save_checkpoint``."""
    return save_checkpoint(path, model, model.config, half=True,
                           extra={"merges": [list(m) for m in tokenizer.merges], "info": dict(info)})


def load_pretrained(path=None, device: str | torch.device = "cpu"):
    """(model, tokenizer, info) of ``path``, by default the shipped ``data/small_gpt.pt``
    after checking its sha256 (data card: data/small_gpt.md); loaded with
    ``weights_only=True``, in eval mode. Taught in: 07_gpt."""
    from course_utils.bpe import BPETokenizer
    from course_utils.data.corpora import verified_path
    path = verified_path(SHIPPED_CHECKPOINT) if path is None else Path(path)
    model, extra = load_model(path, lambda config: GPT(GPTConfig(**config)))
    tokenizer = BPETokenizer([tuple(m) for m in extra["merges"]], byte_level=True)
    if len(tokenizer) != model.config.vocab_size:
        raise ValueError(f"{path}: the tokenizer has {len(tokenizer)} tokens, the model {model.config.vocab_size}")
    return model.to(device).eval(), tokenizer, extra["info"]

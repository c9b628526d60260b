"""Tokenizers, batches and loops for BERT (05_bert, 05b_bert_finetuning): what surrounds the model of
``course_utils.bert``.

- ``train_wordpiece_tokenizer``: a WordPiece vocabulary trained with ``tokenizers``;
- ``encode_classification``, ``encode_tagging``, ``encode_spans``: texts, word lists and
  question-passage pairs to padded tensors;
  ``make_batches`` and ``pretraining_batches`` (dynamic masking, one masking per epoch);
- ``pretrain`` (AdamW, warm-up and linear decay, on ``training.train``),
  ``evaluate_pretraining``, ``predict`` and ``predict_spans``;
- the shipped checkpoint: ``save_pretrained`` and ``load_pretrained`` (``data/small_bert.pt``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import torch
from torch import nn

from course_utils.bert import (IGNORE_INDEX, SPECIAL_TOKENS, BertConfig, BertForPreTraining,
                               PretrainingLog, mask_tokens, pretraining_loss)
from course_utils.runtime import check_device
from course_utils.training import load_model, predictions, save_checkpoint, to_device, train

# -- tokenizers and batches --------------------------------------------------------------

def train_wordpiece_tokenizer(texts, vocab_size: int, lowercase: bool = True):
    """A WordPiece tokenizer (BERT's: ## marks a piece inside a word) trained with the
    ``tokenizers`` library on ``texts``, wrapped as a ``transformers`` fast tokenizer that
    adds [CLS]/[SEP] and token type ids like MiniLM's. 06_bpe shows how such a vocabulary
    is learned. The library breaks ties between equally frequent pairs at random, so a few
    pieces near the end of the vocabulary can differ between runs (1 run in 12 here, for
    05's 4,000 pieces): compare vocabularies with a tolerance. Taught in: 05_bert."""
    from tokenizers import BertWordPieceTokenizer
    from tokenizers.models import WordPiece
    from tokenizers.processors import TemplateProcessing
    if not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be an int > {len(SPECIAL_TOKENS)}, got {vocab_size!r}")
    wordpiece = BertWordPieceTokenizer(lowercase=lowercase)
    wordpiece.train_from_iterator(texts, vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  show_progress=False)
    backend = wordpiece._tokenizer  # the tokenizers.Tokenizer inside the wrapper
    # The trainer learns the same pieces every time but may number them differently
    # (ties in a hash map): number them in a fixed order, specials first.
    learned = backend.get_vocab()
    ordered = list(SPECIAL_TOKENS) + sorted(t for t in learned if t not in SPECIAL_TOKENS)
    backend.model = WordPiece({t: i for i, t in enumerate(ordered)}, unk_token="[UNK]")
    cls, sep = (backend.token_to_id(t) for t in ("[CLS]", "[SEP]"))
    backend.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return _wrap_tokenizer(backend)


def _wrap_tokenizer(backend):
    """A ``tokenizers.Tokenizer`` as a ``transformers`` fast tokenizer with BERT's specials."""
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"])


#: texts tokenised at a time by ``encode_classification`` (memory, not results)
ENCODE_CHUNK = 2048


def encode_classification(tokenizer, texts: Sequence[str], labels: Sequence[int], max_len: int,
                          texts_b: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    """Tokenise (pairs of) texts, truncated and padded to ``max_len``: a dict of
    (count, max_len) tensors and labels (count,). Taught in: 05_bert."""
    if len(texts) != len(labels) or (texts_b is not None and len(texts_b) != len(texts)):
        raise ValueError(f"got {len(texts)} texts, {len(labels)} labels"
                         + ("" if texts_b is None else f" and {len(texts_b)} second texts"))
    texts, texts_b = list(texts), None if texts_b is None else list(texts_b)
    keys = ("input_ids", "token_type_ids", "attention_mask")
    parts = {k: [] for k in keys}
    # in chunks: the tokenizer keeps each text's whole encoding (the truncated-off tokens
    # too) until it returns, 1.1 GB for 05's 30,000 pairs at once; the same tensors
    for start in range(0, len(texts), ENCODE_CHUNK):
        end = start + ENCODE_CHUNK
        enc = tokenizer(texts[start:end], None if texts_b is None else texts_b[start:end], truncation=True,
                        max_length=max_len, padding="max_length", return_tensors="pt")
        for k in keys:
            parts[k].append(enc[k])
    if not texts:
        return {**{k: torch.zeros(0, max_len, dtype=torch.long) for k in keys}, "labels": torch.zeros(0, dtype=torch.long)}
    return {**{k: torch.cat(v) for k, v in parts.items()}, "labels": torch.as_tensor(list(labels))}


def encode_tagging(tokenizer, word_lists: Sequence[Sequence[str]], tags: Sequence[Sequence[int]],
                   max_len: int) -> dict[str, torch.Tensor]:
    """Tokenise pre-split sentences and put each word's tag on its first piece (-100 on
    the other pieces, on [CLS], [SEP] and padding): (count, max_len) tensors.
    Taught in: 05_bert."""
    if len(word_lists) != len(tags):
        raise ValueError(f"got {len(word_lists)} sentences but {len(tags)} tag lists")
    enc = tokenizer([list(w) for w in word_lists], is_split_into_words=True, truncation=True,
                    max_length=max_len, padding="max_length", return_tensors="pt")
    labels = torch.full_like(enc["input_ids"], IGNORE_INDEX)
    for i, (ws, ts) in enumerate(zip(word_lists, tags)):
        if len(ws) != len(ts):
            raise ValueError(f"sentence {i} has {len(ws)} words but {len(ts)} tags")
        previous = None
        for position, word in enumerate(enc.word_ids(i)):
            if word is not None and word != previous:
                labels[i, position] = ts[word]
            previous = word
    return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
            "attention_mask": enc["attention_mask"], "labels": labels}


def encode_spans(tokenizer, questions: Sequence[Sequence[str]], passages: Sequence[Sequence[str]],
                 answers: Sequence[tuple[int, int]], max_len: int) -> dict[str, torch.Tensor]:
    """Extractive QA as tensors: ``[CLS] question [SEP] passage [SEP]`` (pre-split words; the
    passage is cut when the pair is too long), ``span_mask`` 1 on the passage's pieces, and
    ``start`` / ``end``: the first piece of the answer's first word and the last piece of
    its last word (``answers``: (first word, last word) in the passage, inclusive). An
    example whose answer does not fit in ``max_len`` raises. Taught in: 05b_bert_finetuning."""
    if not len(questions) == len(passages) == len(answers):
        raise ValueError(f"got {len(questions)} questions, {len(passages)} passages and {len(answers)} answers")
    if not len(answers):
        return {**{k: torch.zeros(0, max_len, dtype=torch.long) for k in ("input_ids", "token_type_ids", "attention_mask", "span_mask")},
                "start": torch.zeros(0, dtype=torch.long), "end": torch.zeros(0, dtype=torch.long)}
    question_words = [list(q) for q in questions]
    lengths = map(len, tokenizer(question_words, is_split_into_words=True)["input_ids"])
    for i, length in enumerate(lengths):   # [CLS] question [SEP], [SEP], and one piece of passage
        if length + 2 > max_len:
            raise ValueError(f"question {i} leaves no room for its passage in {max_len} tokens: {' '.join(questions[i])!r}")
    enc = tokenizer(question_words, [list(p) for p in passages], is_split_into_words=True,
                    truncation="only_second", max_length=max_len, padding="max_length", return_tensors="pt")
    span_mask = torch.zeros_like(enc["input_ids"])
    start, end = [], []
    for i, (first, last) in enumerate(answers):
        if not 0 <= first <= last < len(passages[i]):
            raise ValueError(f"answer {i}: words {first}..{last} are not a span of a passage of {len(passages[i])} words")
        words, segments = enc.word_ids(i), enc.sequence_ids(i)
        pieces = [k for k, (w, seg) in enumerate(zip(words, segments)) if seg == 1 and w is not None]
        span_mask[i, pieces] = 1
        inside = [k for k in pieces if first <= words[k] <= last]
        cut = bool(inside) and inside[-1] == pieces[-1] and sum(words[k] == last for k in inside) < len(
            tokenizer([passages[i][last]], is_split_into_words=True, add_special_tokens=False)["input_ids"])
        if not inside or words[inside[-1]] != last or cut:   # (cut: the passage ends inside the last word)
            raise ValueError(f"answer {i} (words {first}..{last}) does not fit in {max_len} tokens")
        start.append(inside[0])
        end.append(inside[-1])
    return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
            "attention_mask": enc["attention_mask"], "span_mask": span_mask,
            "start": torch.tensor(start), "end": torch.tensor(end)}


def make_batches(tensors: Mapping[str, torch.Tensor], batch_size: int, shuffle: bool = False,
                 seed: int = 0, bucket: int = 0):
    """Cut a dict of equally long tensors into batches (dicts), trimmed to the longest
    real sequence of each batch. With ``shuffle`` a function epoch -> batches (a new
    order each epoch, for ``training.train``), else a list. ``bucket`` (with ``shuffle``):
    if > 0, each epoch's shuffled examples are taken ``bucket * batch_size`` at a time,
    sorted by length inside such a group and cut into batches there, and all the epoch's
    batches are then shuffled: batches of similar lengths, so less padding to compute,
    every example still once an epoch, and no order from short to long.
    Taught in: 05_bert, 05b_bert_finetuning."""
    count = len(next(iter(tensors.values())))
    if any(len(t) != count for t in tensors.values()):
        raise ValueError(f"tensors of different lengths: { {k: len(t) for k, t in tensors.items()} }")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not isinstance(bucket, int) or isinstance(bucket, bool) or bucket < 0:
        raise ValueError(f"bucket must be an int >= 0 (0: no grouping by length), got {bucket!r}")
    if bucket and "attention_mask" not in tensors:
        raise ValueError("bucket needs an 'attention_mask' to know the lengths; got the keys "
                         f"{sorted(tensors)}")

    def cut(order):
        out = []
        for idx in order.split(batch_size):
            batch = {k: t[idx] for k, t in tensors.items()}
            if "attention_mask" in batch:
                n = int(batch["attention_mask"].sum(1).max())
                batch = {k: (t[:, :n] if t.dim() == 2 else t) for k, t in batch.items()}
            out.append(batch)
        return out

    if not shuffle:
        return cut(torch.arange(count))

    def epoch_batches(epoch):
        generator = torch.Generator().manual_seed(seed + epoch)
        order = torch.randperm(count, generator=generator)
        if not bucket:
            return cut(order)
        lengths = tensors["attention_mask"].sum(1)
        batches = [batch for group in order.split(bucket * batch_size)
                   for batch in cut(group[torch.sort(lengths[group], stable=True).indices])]
        return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
    return epoch_batches


def pretraining_batches(tokenizer, pairs: Sequence[tuple[str, str, int]], batch_size: int,
                        max_len: int, seed: int = 0, mlm_prob: float = 0.15):
    """epoch -> batches for ``pretraining_loss`` from NSP ``pairs``: tokenised once, masked
    anew each epoch with ``mask_tokens`` (RoBERTa's dynamic masking). Taught in: 05_bert."""
    tensors = encode_classification(tokenizer, [a for a, _, _ in pairs], [n for _, _, n in pairs],
                                    max_len, texts_b=[b for _, b, _ in pairs])
    tensors["next_sentence"] = tensors.pop("labels")
    special = tokenizer.all_special_ids
    vocab_size = len(tokenizer)
    shuffled = make_batches(tensors, batch_size, shuffle=True, seed=seed)

    def epoch(e):
        generator = torch.Generator().manual_seed(10_000 * seed + e)
        for batch in shuffled(e):
            inputs, labels = mask_tokens(batch["input_ids"], vocab_size, special,
                                         tokenizer.mask_token_id, mlm_prob, generator)
            yield {**batch, "input_ids": inputs, "labels": labels}
    return epoch


# -- pre-training and evaluation ---------------------------------------------------------

def pretrain(model: BertForPreTraining, tokenizer, pairs, recipe,
             max_steps: int | None = None, seed: int = 0, progress: bool = True):
    """Pre-train with MLM + NSP on ``pairs`` (from ``nsp_pairs``) as ``recipe`` (a
    ``recipes.BertPretraining``) says: AdamW, linear warm-up
    then linear decay to 0 over ``max_steps`` (default ``recipe.steps``). Returns the
    ``training.History`` and the ``PretrainingLog``. Taught in: 05_bert."""
    from course_utils.schedules import warmup_scheduler
    steps = recipe.steps if max_steps is None else max_steps
    batches = pretraining_batches(tokenizer, pairs, recipe.batch_size, recipe.max_len, seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay, foreach=True)
    warmup = min(recipe.warmup, max(steps - 1, 0))
    scheduler = warmup_scheduler(optimizer, warmup, decay_after=steps, total_steps=steps,
                                 cooldown=max(steps - warmup, 1))
    log = PretrainingLog()
    history = train(model, batches, lambda m, b: pretraining_loss(m, b, log), optimizer,
                    scheduler=scheduler, max_steps=steps, progress=progress, desc="pre-training")
    return history, log


@torch.no_grad()
def evaluate_pretraining(model: BertForPreTraining, tokenizer, pairs, max_len: int,
                         batch_size: int = 64, seed: int = 1) -> dict[str, float]:
    """Masked-LM accuracy, MLM loss and NSP accuracy on held-out ``pairs`` (masked with a
    fixed seed). Taught in: 05_bert."""
    was_training = model.training
    model.eval()
    total = {"mlm_correct": 0, "mlm_count": 0, "mlm_loss": 0.0, "nsp_correct": 0, "pairs": 0}
    device = check_device(model, what="evaluate_pretraining")
    for batch in pretraining_batches(tokenizer, pairs, batch_size, max_len, seed=seed)(0):
        batch = to_device(batch, device)  # made on the CPU
        mlm_logits, nsp_logits = model(batch["input_ids"], batch["token_type_ids"],
                                       batch["attention_mask"], labels=batch["labels"])
        targets = batch["labels"][batch["labels"] != IGNORE_INDEX]
        total["mlm_correct"] += int((mlm_logits.argmax(-1) == targets).sum())
        total["mlm_count"] += len(targets)
        total["mlm_loss"] += float(nn.functional.cross_entropy(mlm_logits, targets, reduction="sum"))
        total["nsp_correct"] += int((nsp_logits.argmax(-1) == batch["next_sentence"]).sum())
        total["pairs"] += len(batch["next_sentence"])
    model.train(was_training)
    return {"mlm_accuracy": total["mlm_correct"] / total["mlm_count"],
            "mlm_loss": total["mlm_loss"] / total["mlm_count"],
            "nsp_accuracy": total["nsp_correct"] / total["pairs"]}


SHIPPED_CHECKPOINT = "small_bert.pt"


def save_pretrained(path, model: BertForPreTraining, tokenizer, info: Mapping) -> Path:
    """Write the model (float16 weights), its config, its tokenizer and ``info`` as one
    checkpoint of ``training.save_checkpoint``."""
    return save_checkpoint(path, model, model.cfg, half=True,
                           extra={"tokenizer": tokenizer.backend_tokenizer.to_str(), "info": dict(info)})


def load_pretrained(path=None):
    """``(model, tokenizer, info)`` from ``save_pretrained``'s file; by default the shipped,
    checksum-verified ``data/small_bert.pt`` (made by scripts/pretrain_small_bert.py).
    Taught in: 05_bert."""
    from tokenizers import Tokenizer
    from course_utils.data.corpora import verified_path
    path = verified_path(SHIPPED_CHECKPOINT) if path is None else path
    model, extra = load_model(path, lambda config: BertForPreTraining(BertConfig(**config)))
    return model, _wrap_tokenizer(Tokenizer.from_str(extra["tokenizer"])), extra["info"]


@torch.no_grad()
def predict_spans(model: nn.Module, batches, max_tokens: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted and true (start, end) of a ``SpanExtractor`` over ``batches`` (from
    ``encode_spans``), in eval mode: two (count, 2) tensors on the CPU (the prediction by
    ``bert.best_spans``). Taught in: 05b_bert_finetuning."""
    from course_utils.bert import best_spans
    return _predicted_and_true(model, batches, "predict_spans", lambda logits, batch: (
        torch.stack(best_spans(logits, batch["span_mask"], max_tokens), 1),
        torch.stack([batch["start"], batch["end"]], 1)))


@torch.no_grad()
def predict(model: nn.Module, batches) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted and true labels over ``batches`` (positions labelled -100 dropped), in
    eval mode; batches go to the model's device, the labels come back on the CPU.
    Taught in: 05b_bert_finetuning."""
    def labels(logits, batch):
        keep = batch["labels"] != IGNORE_INDEX
        return logits.argmax(-1)[keep], batch["labels"][keep]
    return _predicted_and_true(model, batches, "predict", labels)


def _predicted_and_true(model: nn.Module, batches, what: str, pick) -> tuple[torch.Tensor, torch.Tensor]:
    """``pick(logits, batch) -> (predicted, true)`` over ``batches`` (``training.predictions``)."""
    return predictions(model, batches, lambda m, batch: pick(
        m(batch["input_ids"], batch.get("token_type_ids"), batch.get("attention_mask")), batch), what)

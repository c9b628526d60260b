"""The training runs of the course's translation models, one per family, each on
``training.train`` with the optimiser and schedule of its notebook's recipe (only the
Transformer's follows its paper: Bahdanau et al. trained with Adadelta, Gehring et al. with
Nesterov SGD); the models and their losses stay in their own files (``seq2seq``,
``convs2s``, ``transformer``).

- ``fit_seq2seq``: a GRU encoder-decoder of 02 (Adam at a constant rate; 01 and 02 write
  their loop out): 02's English -> Spanish model (``recipes.ES_EN_FULL``; the shipped
  ``SHIPPED_ES_EN``, made by scripts/train_es_en_attention.py) and 06's word and BPE
  translators;
- ``fit_convs2s``: 03's ConvS2S (Adam, linear warm-up and decay; 03 writes the same loop out);
- ``fit_transformer``: 04's Transformer (Adam with betas 0.9 and 0.98, warm-up then inverse
  square root, a cool-down, label smoothing, length-bucketed batches).

Each takes the model (on its device), a ``data.TranslationData`` and the recipe, in that order
(the shape of every fit, ``registry``), and returns the ``training.History``.

Used in: 02_bahdanau_attention, 03_convs2s (its loop written out beside it), 04_transformer,
06_bpe.
"""

from __future__ import annotations

import torch

from course_utils.convs2s import ConvS2S
from course_utils.data.vocab import TranslationData, tokenize
from course_utils.runtime import check_device
from course_utils.schedules import linear_schedule, warmup_scheduler
from course_utils.seq2seq import Seq2Seq, seq2seq_loss
from course_utils.training import train
from course_utils.transformer import Transformer, transformer_loss

#: 02's English -> Spanish model, trained once by scripts/train_es_en_attention.py (data/, with its card)
SHIPPED_ES_EN = "es_en_attention.pt"


def fit_seq2seq(model: Seq2Seq, data: TranslationData, recipe, progress: bool = True, desc: str = "seq2seq"):
    """Train a GRU encoder-decoder (``seq2seq.Seq2Seq``) as ``recipe`` says (any recipe with
    ``lr``, ``batch_size`` and ``steps``: ``recipes.EsEnTraining``, 06's
    ``BPETraining.mt_recipe()``, 01's and 02's): ``recipe.steps`` steps of ``recipe.batch_size``
    pairs of ``data``, a new order each pass, with Adam at the constant rate ``recipe.lr``; the
    loss is ``seq2seq.seq2seq_loss`` (teacher forcing). One run for 02's English -> Spanish model
    (``recipes.ES_EN_FULL``: its full profile, and the shipped weights) and 06's translators.
    Taught in: 02_bahdanau_attention, 06_bpe."""
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    return train(model, lambda epoch: data.batches(recipe.batch_size, shuffle=True, seed=epoch), seq2seq_loss,
                 optimizer, max_steps=recipe.steps, device=check_device(model, what="fit_seq2seq"),
                 progress=progress, desc=desc)


def fit_convs2s(model: ConvS2S, data: TranslationData, recipe, progress: bool = True, desc: str = "ConvS2S"):
    """Train ``model`` with ``recipe`` (a ``recipes.ConvS2STraining``) on ``data``, reshuffled
    every epoch: Adam at ``recipe.lr`` with a linear warm-up and a linear decay to a floor of
    ``recipe.final_lr`` times ``recipe.lr`` (``schedules.linear_schedule``).
    Taught in: 03_convs2s (which writes the same loop out)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    scheduler = linear_schedule(optimizer, recipe.warmup, recipe.steps, recipe.final_lr)
    return train(model, lambda epoch: data.batches(recipe.batch_size, shuffle=True, seed=epoch),
                 seq2seq_loss, optimizer, scheduler=scheduler, max_steps=recipe.steps,
                 device=check_device(model, what="fit_convs2s"), progress=progress, desc=desc)


def fit_transformer(model: Transformer, data: TranslationData, recipe, max_steps: int | None = None,
                    progress: bool = True, desc: str = "transformer"):
    """Train as ``recipe`` (a ``recipes.TransformerTraining``) says: Adam (betas 0.9, 0.98),
    the warm-up schedule (peak ``recipe.lr`` after ``recipe.warmup`` steps, 1/sqrt decay after
    ``recipe.decay_after``, a linear cool-down over the last ``recipe.cooldown``) and
    length-bucketed batches of ``data`` (only pairs up to ``recipe.max_src_len`` source words if
    set), reshuffled every epoch. ``max_steps`` overrides the recipe's (as in every fit); other
    variations are a recipe of their own (``dataclasses.replace``). Taught in: 04_transformer."""
    if recipe.max_src_len is not None:
        data = data.with_pairs([p for p in data.pairs if len(tokenize(p[0])) <= recipe.max_src_len])
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr, betas=(0.9, 0.98), eps=1e-9)
    max_steps = max_steps or recipe.max_steps
    scheduler = warmup_scheduler(optimizer, recipe.warmup, decay_after=recipe.decay_after,
                                 total_steps=max_steps, cooldown=min(recipe.cooldown, max_steps))
    return train(model, lambda epoch: data.batches(recipe.batch_size, shuffle=True, seed=epoch),
                 lambda m, batch: transformer_loss(m, batch, recipe.label_smoothing), optimizer,
                 scheduler=scheduler, max_steps=max_steps, device=check_device(model, what="fit_transformer"),
                 progress=progress, desc=desc)

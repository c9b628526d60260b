"""The translation models' training runs (``course_utils.translation_training``): each follows
its recipe (steps, learning rates, which pairs it trains on) and lowers the loss."""

import math
from dataclasses import replace

import pytest
import torch

from course_utils.data import tokenize
from course_utils.recipes import AttentionTraining, ConvS2STraining, TransformerTraining
from course_utils.seq2seq import seq2seq_loss
from course_utils.transformer import Transformer, transformer_loss
from course_utils.translation_training import fit_convs2s, fit_seq2seq, fit_transformer
from test_convs2s import _model as _convs2s     # the small models of the models' own tests
from test_seq2seq import _model as _seq2seq

TINY_TRANSFORMER = TransformerTraining(d_model=16, num_heads=2, num_layers=1, d_ff=32, batch_size=32,
                                       lr=1e-2, warmup=4, max_steps=10, cooldown=0)


def _transformer(data, recipe, device):
    torch.manual_seed(0)
    return Transformer(recipe.model_config(len(data.src_vocab), len(data.tgt_vocab))).to(device)


def test_fit_seq2seq_takes_its_steps_at_a_constant_rate_and_lowers_the_loss(padded_batch, device):
    data, b = padded_batch
    model, b = _seq2seq(data, attention="additive").to(device), b.to(device)
    before = seq2seq_loss(model.eval(), b).item()
    recipe = AttentionTraining(lr=1e-2, batch_size=32, steps=12)
    history = fit_seq2seq(model.train(), data, recipe, progress=False)
    assert history.num_steps == 12 and history.lrs == [pytest.approx(1e-2)] * 12
    assert seq2seq_loss(model.eval(), b).item() < before


def test_fit_convs2s_follows_the_recipe_and_lowers_the_loss(padded_batch, device):
    data, b = padded_batch
    model, b = _convs2s(data).to(device).train(), b.to(device)
    before = seq2seq_loss(model, b).item()
    recipe = ConvS2STraining(batch_size=len(data), lr=1e-2, warmup=2, steps=8)
    history = fit_convs2s(model, data, recipe, progress=False)
    assert history.num_steps == 8
    # its schedule (``History.lrs`` holds the rate after each step: the one the next step takes)
    assert history.lrs == pytest.approx([1e-2 * recipe.lr_factor(s) for s in range(1, 9)])
    assert seq2seq_loss(model.eval(), b).item() < before


def _noam(lr, warmup, decay_after, steps):
    """The rate after each of ``steps`` steps (as ``History.lrs`` holds it), written out: a
    linear warm-up, then lr * sqrt(decay_after / s) at the s-th step (1-based)."""
    return [lr * min(1, s / warmup) * (math.sqrt(decay_after / s) if s > decay_after else 1)
            for s in range(2, steps + 2)]


def test_fit_transformer_follows_the_recipes_warmup_schedule(padded_batch, device):
    data, b = padded_batch
    model = _transformer(data, TINY_TRANSFORMER, device)
    b = b.to(device)
    before = transformer_loss(model.eval(), b).item()
    history = fit_transformer(model.train(), data, TINY_TRANSFORMER, progress=False)
    assert history.num_steps == 10
    assert history.lrs == pytest.approx(_noam(1e-2, 4, 4, 10))
    assert transformer_loss(model.eval(), b).item() < before
    # a variation is a recipe of its own: another peak, a shorter warm-up, the decay still after
    # 4 steps (04's warm-up comparison); max_steps, as in every fit
    varied = replace(TINY_TRANSFORMER, lr=2e-2, warmup=2, decay_after=4)
    history = fit_transformer(_transformer(data, varied, device), data, varied, max_steps=6, progress=False)
    assert history.lrs == pytest.approx(_noam(2e-2, 2, 4, 6))
    # without decay_after the decay starts after the warm-up, as the Noam schedule's
    shorter = replace(TINY_TRANSFORMER, warmup=2)
    history = fit_transformer(_transformer(data, shorter, device), data, shorter, progress=False)
    assert history.lrs == pytest.approx(_noam(1e-2, 2, 2, 10))
    with pytest.raises(TypeError):
        fit_transformer(model, data, TINY_TRANSFORMER, lr=2e-2, progress=False)   # no loose overrides
    # a cool-down takes the rate linearly to 0 over the last steps
    cooled = TransformerTraining(**{**vars(TINY_TRANSFORMER), "cooldown": 4})
    history = fit_transformer(_transformer(data, cooled, device), data, cooled, progress=False)
    assert history.lrs[:6] == pytest.approx(_noam(1e-2, 4, 4, 10)[:6])
    assert history.lrs[6:] == pytest.approx([r * (9 - i) / 4 for i, r in enumerate(_noam(1e-2, 4, 4, 10)) if i >= 6])
    assert history.lrs[-1] == 0


def test_fit_transformer_trains_only_on_pairs_up_to_max_src_len(small_synthetic, device):
    from course_utils.data import TranslationData
    data = TranslationData.build(small_synthetic.train)
    short = [p for p in data.pairs if len(tokenize(p[0])) <= 5]
    assert 0 < len(short) < len(data.pairs)
    recipe = TransformerTraining(**{**vars(TINY_TRANSFORMER), "max_src_len": 5, "batch_size": len(data),
                                    "max_steps": 1})
    history = fit_transformer(_transformer(data, recipe, device), data, recipe, progress=False)
    assert history.tokens == data.with_pairs(short).batches(len(data))[0].num_tokens   # one batch: every short pair
    whole = fit_transformer(_transformer(data, recipe, device), data,
                            TransformerTraining(**{**vars(recipe), "max_src_len": None}), progress=False)
    assert whole.tokens == data.batches(len(data))[0].num_tokens > history.tokens

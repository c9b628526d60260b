"""Which model, loss and training run each recipe has: for every recipe of ``recipes`` that
trains a model (those with a ``model_config``), the model class its config builds, the loss
that model trains on and the fit that runs the recipe. The one table the benchmark
(``bench.models``), scripts/gpu_step_probe.py and the tests read.

- ``"seq2seq"``, ``"attention"``, ``"es_en"``: ``seq2seq.Seq2Seq``, ``seq2seq_loss``,
  ``translation_training.fit_seq2seq``;
- ``"convs2s"``: ``convs2s.ConvS2S``, ``seq2seq_loss``, ``translation_training.fit_convs2s``;
- ``"transformer"``, ``"transformer_comparison"``: ``transformer.Transformer``,
  ``transformer_loss``, ``translation_training.fit_transformer``;
- ``"bert"``: ``bert.BertForPreTraining``, ``pretraining_loss``, ``bert_training.pretrain``;
- ``"gpt"``: ``gpt.GPT``, ``lm_loss``, ``gpt_training.fit``;
- ``"vit"``: ``vit.ViT``, ``vit_training.classification_loss``, ``vit_training.fit``.

Every fit has one shape, ``fit(model, data..., recipe, ...)``: the model (on its device), what
it trains on, then the recipe, whose fields give the steps, the batch size, the learning rate
and the schedule; what follows are keywords (progress bar, seed, the overrides a notebook's
comparison needs). What it trains on is one argument for the translation models (a
``data.TranslationData``) and GPT (a stream of token ids), two for the ViT (images, labels)
and BERT (tokenizer, NSP pairs). ``entry.build(recipe, *sizes)`` is
``entry.model(recipe.model_config(*sizes))``: the sizes are the data's (vocabularies; 02's
``es_en`` takes the training data itself, the ViT and BERT none).

Not a section of ``recipes``: ``recipes`` is data, in the training modules' layer, and imports
only the models' configs; this table imports the training modules' fits, so it sits in a layer
above them (docs/ARCHITECTURE.md). ``bpe`` and ``llm`` have no entry: 06 trains tokenisers (its two
translators run ``BPETraining.mt_recipe()``, an ``"es_en"`` recipe) and 07b measures a
pre-trained model. The notebooks call the fits by name, as they teach them.

Used by: bench, scripts/gpu_step_probe.py, tests/test_recipes.py (no notebook).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from torch import nn

from course_utils import bert_training, gpt_training, vit_training
from course_utils.bert import BertForPreTraining, pretraining_loss
from course_utils.convs2s import ConvS2S
from course_utils.gpt import GPT, lm_loss
from course_utils.seq2seq import Seq2Seq, seq2seq_loss
from course_utils.transformer import Transformer, transformer_loss
from course_utils.translation_training import fit_convs2s, fit_seq2seq, fit_transformer
from course_utils.vit import ViT


class Entry(NamedTuple):
    """One recipe's model class, loss and fit."""
    model: type[nn.Module]   # built from the recipe's model_config(...)
    loss: Callable           # (model, batch) -> scalar loss
    fit: Callable            # (model, data..., recipe, ...) -> training.History (BERT: (History, log))

    def build(self, recipe, *sizes, **overrides) -> nn.Module:
        """The model of ``recipe``: ``model(recipe.model_config(*sizes, **overrides))``
        (``sizes``: the vocabularies' sizes, or 02's training data for ``es_en``)."""
        return self.model(recipe.model_config(*sizes, **overrides))


_GRU = Entry(Seq2Seq, seq2seq_loss, fit_seq2seq)
_TRANSFORMER = Entry(Transformer, transformer_loss, fit_transformer)

#: recipe name (``recipes.RECIPES``) -> its model, loss and fit
REGISTRY: dict[str, Entry] = {
    "seq2seq": _GRU,                       # 01 writes this loop out
    "attention": _GRU,                     # 02 writes this loop out
    "es_en": _GRU,
    "convs2s": Entry(ConvS2S, seq2seq_loss, fit_convs2s),   # 03 writes it out beside the fit
    "transformer": _TRANSFORMER,
    "transformer_comparison": _TRANSFORMER,
    "bert": Entry(BertForPreTraining, pretraining_loss, bert_training.pretrain),
    "gpt": Entry(GPT, lm_loss, gpt_training.fit),
    "vit": Entry(ViT, vit_training.classification_loss, vit_training.fit),
}

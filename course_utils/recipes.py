"""Every notebook's recipe, as data: the model sizes, the data sizes and the training budget
of the ``fast`` profile (CPU, CI) and the ``full`` one (GPU), side by side, one pair per
notebook. One convention: a frozen dataclass per recipe (``...Training``; 05's is
``BertPretraining``), a ``NAME_FAST`` and a ``NAME_FULL`` instance of it, and
``recipe(name)``, which picks the one the active profile asks for and, in a smoke test
(``COURSE_SMOKE_STEPS``), caps it: every field that counts steps and every batch size, and
``SMOKE_CAPS``: training and the fits run the steps they are given. The
notebooks, the benchmark (``bench``), the tuning, training and pre-training scripts and the tests
all read the recipes from here: changing 04's recipe is one edit, in this file. A notebook
that wants a variation makes one with ``dataclasses.replace(recipe, ...)``.

==============================  ===============================  ========================
``recipe(name)``                fast and full                    taught in
==============================  ===============================  ========================
``"seq2seq"``                   ``SEQ2SEQ_FAST``, ``_FULL``      01_seq2seq_bottleneck
``"attention"``                 ``ATTENTION_FAST``, ``_FULL``    02_bahdanau_attention
``"es_en"``                     ``ES_EN_FAST`` = ``_FULL``       02 (English -> Spanish)
``"convs2s"``                   ``CONVS2S_FAST``, ``_FULL``      03_convs2s
``"transformer"``               ``TRANSFORMER_FAST``, ``_FULL``  04_transformer (and a2)
``"transformer_comparison"``    ``TRANSFORMER_COMPARISON_...``   04 (side-by-side runs)
``"bert"``                      ``BERT_FAST``, ``_FULL``         05_bert, 05b_bert_finetuning (and 07)
``"bpe"``                       ``BPE_FAST``, ``_FULL``          06_bpe
``"gpt"``                       ``GPT_FAST``, ``_FULL``          07_gpt
``"llm"``                       ``LLM_FAST``, ``_FULL``          07b_small_llm
``"vit"``                       ``VIT_FAST``, ``_FULL``          08_vision_transformer
==============================  ===============================  ========================

A model's recipe has ``model_config(...)``, which builds the model's own config
(``Seq2SeqConfig``, ``TransformerConfig``, ...; 06's recipe describes tokenisers and two small
translation models and has none: ``mt_recipe()`` gives the translators' ``EsEnTraining``): the
model files hold only models and their configs. Which model class, loss and fit each recipe
has is ``registry.REGISTRY``.

Taught in: every notebook that trains (the table above).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable, NamedTuple

from course_utils.bert import BertConfig
from course_utils.convs2s import ConvS2SConfig
from course_utils.gpt import GPTConfig
from course_utils.runtime import pick, smoke_eval_size, smoke_steps
from course_utils.schedules import linear_factor
from course_utils.seq2seq import Seq2SeqConfig
from course_utils.transformer import TransformerConfig
from course_utils.vit import ViTConfig


# -- 01: the fixed-context GRU encoder-decoder -------------------------------------------

@dataclass(frozen=True)
class Seq2SeqTraining:
    """01's recipe: the GRU encoder-decoder whose last state is its only context, Adam at a
    constant rate, the same budget for every model of the notebook."""
    emb_size: int = 64
    hidden_size: int = 128          # size of the one context vector
    batch_size: int = 64
    lr: float = 5e-3
    steps: int = 500                # optimiser steps per model (the "budget")
    sweep: tuple = (64, 256)        # other hidden sizes to try (section 7)
    variant_size: int = 128         # the size of section 8's variants (and of the model beside them)

    def model_config(self, src_vocab_size: int, tgt_vocab_size: int, **overrides) -> Seq2SeqConfig:
        """The ``Seq2SeqConfig`` for these sizes (``overrides`` change single fields)."""
        kwargs = dict(emb_size=self.emb_size, hidden_size=self.hidden_size)
        kwargs.update(overrides)
        return Seq2SeqConfig(src_vocab_size, tgt_vocab_size, **kwargs)


SEQ2SEQ_FAST = Seq2SeqTraining()
# full: d=256, and the sweep's d=64 compared with it on the validation split (section 7);
# section 8's variants of d=64, beside the sweep's model (two more of d=256 would pass 20 min on a CPU)
SEQ2SEQ_FULL = Seq2SeqTraining(hidden_size=256, steps=3000, sweep=(64,), variant_size=64)


# -- 02: Bahdanau attention ---------------------------------------------------------------

@dataclass(frozen=True)
class AttentionTraining:
    """02's recipe: the bidirectional GRU encoder with additive attention, trained on 01's
    data and budget, beside 01's fixed-context model."""
    emb_size: int = 64
    hidden_size: int = 64      # per direction: encoder states and decoder state have 128 numbers
    baseline_hidden: int = 128 # the fixed-context model of notebook 01
    batch_size: int = 64
    lr: float = 5e-3
    steps: int = 500           # notebook 01's fast budget (its full one: 3,000 steps of 64)
    compare_steps: int = 100   # budget per score function in section 9

    def model_config(self, src_vocab_size: int, tgt_vocab_size: int, **overrides) -> Seq2SeqConfig:
        """The attention model's ``Seq2SeqConfig`` (``overrides`` change single fields)."""
        kwargs = dict(emb_size=self.emb_size, hidden_size=self.hidden_size, bidirectional=True,
                      attention="additive")
        kwargs.update(overrides)
        return Seq2SeqConfig(src_vocab_size, tgt_vocab_size, **kwargs)


ATTENTION_FAST = AttentionTraining()
# full: wider models and twice the pairs per step, the same number of steps (on a GPU a step
# is host-bound: its cost hardly depends on the batch). Not notebook 01's full recipe, so the
# baseline is trained in 02. Run times: docs/BENCHMARKS.md
ATTENTION_FULL = AttentionTraining(hidden_size=128, baseline_hidden=256, batch_size=128)


# -- 02, English -> Spanish -------------------------------------------------------------------

@dataclass(frozen=True)
class EsEnTraining:
    """The English -> Spanish run of notebook 02 (Bible verses of at most ``max_len`` words,
    ``data.es_en_splits``; ``translation_training.fit_seq2seq``): its full profile trains it, and the shipped
    ``data/es_en_attention.pt`` (``training.save_checkpoint``, float16, the vocabularies in
    its ``extra``) is this recipe run once (scripts/train_es_en_attention.py), which the fast
    profile loads. 06's two translators are this model too (``BPETraining.mt_recipe()``)."""
    max_len: int | None = 20   # words per verse, both sides (None: every verse)
    min_freq: int = 2          # a word seen once in training is <unk>
    emb_size: int = 128
    hidden_size: int = 128     # per direction
    batch_size: int = 64
    lr: float = 2e-3
    steps: int = 700           # four passes over the 11,191 training pairs

    def model_config(self, train_data) -> Seq2SeqConfig:
        """The bidirectional GRU with additive attention for ``train_data``'s vocabularies."""
        return Seq2SeqConfig(len(train_data.src_vocab), len(train_data.tgt_vocab), emb_size=self.emb_size,
                             hidden_size=self.hidden_size, bidirectional=True, attention="additive")


ES_EN_FAST = EsEnTraining()
ES_EN_FULL = ES_EN_FAST   # one recipe: the full profile runs it, the fast one loads its shipped weights


# -- 03: ConvS2S --------------------------------------------------------------------------

@dataclass(frozen=True)
class ConvS2STraining:
    """Model sizes and the training recipe used in 03 for the synthetic task: Adam, a linear
    warm-up over ``warmup`` steps, then a linear decay to ``final_lr`` times the peak by the
    last of ``steps`` steps (``final_lr=1``: constant), length-bucketed batches."""
    emb_size: int = 64
    hidden_size: int = 64
    encoder_layers: int = 3
    decoder_layers: int = 3
    kernel_size: int = 3
    emb_std: float = 0.1        # word and position embeddings ~ N(0, emb_std^2); PyTorch's default is 1
    batch_size: int = 64
    lr: float = 5e-3            # peak learning rate
    warmup: int = 100           # steps of linear warm-up (0: none)
    final_lr: float = 0.05      # the rate decays linearly to this fraction of lr (1.0: constant)
    steps: int = 1300

    def model_config(self, src_vocab_size: int, tgt_vocab_size: int, **overrides) -> ConvS2SConfig:
        """The ``ConvS2SConfig`` for these sizes (``overrides`` change single fields)."""
        kwargs = dict(emb_size=self.emb_size, hidden_size=self.hidden_size,
                      encoder_layers=self.encoder_layers, decoder_layers=self.decoder_layers,
                      kernel_size=self.kernel_size, emb_std=self.emb_std)
        kwargs.update(overrides)
        return ConvS2SConfig(src_vocab_size, tgt_vocab_size, **kwargs)

    def lr_factor(self, step: int) -> float:
        """The learning rate at optimiser step ``step`` (0-based) as a fraction of ``lr``
        (``schedules.linear_factor``)."""
        return linear_factor(step, self.warmup, self.steps, self.final_lr)


# Chosen on the validation split (03's appendix, scripts/tune_convs2s.py).
CONVS2S_FAST = ConvS2STraining()
CONVS2S_FULL = ConvS2STraining(emb_size=128, hidden_size=128, encoder_layers=4, decoder_layers=4, lr=2e-3, steps=3000)



# -- 04: the Transformer -------------------------------------------------------------------

@dataclass(frozen=True)
class TransformerTraining:
    """Model sizes and the training recipe used in 04 for the synthetic task."""
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2         # encoder and decoder layers each
    d_ff: int = 128
    dropout: float = 0.0        # the synthetic task has no noise to regularise against
    norm_first: bool = True     # pre-LN trains stably with a high peak learning rate
    batch_size: int = 64
    lr: float = 6e-3            # peak learning rate, reached at the end of the warm-up
    warmup: int = 150           # optimiser steps of linear warm-up
    max_steps: int = 1300
    decay_after: int | None = None  # the 1/sqrt decay starts after this step (None: after the warm-up)
    label_smoothing: float = 0.0
    max_src_len: int | None = None  # train only on sentences up to this many source words
    cooldown: int = 300         # last steps in which the lr falls linearly to 0 (0: none)

    def model_config(self, src_vocab_size: int, tgt_vocab_size: int, **overrides) -> TransformerConfig:
        """The ``TransformerConfig`` for these sizes (``overrides`` change single fields)."""
        kwargs = dict(d_model=self.d_model, num_heads=self.num_heads,
                      num_encoder_layers=self.num_layers, num_decoder_layers=self.num_layers,
                      d_ff=self.d_ff, dropout=self.dropout, norm_first=self.norm_first)
        kwargs.update(overrides)
        return TransformerConfig(src_vocab_size, tgt_vocab_size, **kwargs)


# Chosen on the validation split (greedy exact match by source-length bucket; 04's appendix,
# scripts/tune_transformer.py): peak lr 6e-3 after 150 warm-up steps, 1/sqrt decay and a
# linear cool-down over the last 300 of 1,300 steps gives 96.5-100 % in every bucket with two
# seeds. Without the cool-down the high final lr leaves noisy weights (30+ words: 92.9 and
# 87.1 % with two seeds); lr 2e-3 reaches 91.8 % there after 1,500 steps; one layer each side
# 44.7 %. d_model=128 costs about twice as much per step.
# Assignment a2_transformer trains with this recipe too: its model's sizes are the graded
# checkpoint's (assignments/source/a2_transformer: the reference transformer.pt and checks.py),
# so a change here means retraining that checkpoint (the source notebook run with
# skip_training = False: its solution trains and saves it) and `make assignments` again.
TRANSFORMER_FAST = TransformerTraining(d_model=64, num_heads=4, num_layers=2, d_ff=128, lr=6e-3, warmup=150,
                                       max_steps=1300, cooldown=300)
# The full recipe is the fast one scaled up (d_model twice, d_ff four times, three layers each
# side, batches of 128, more steps at a lower peak rate), not tuned again: 04's full run is its
# measurement. It fits issue 32's budget: about 0.4 s a step on a busy 2-core CPU (783 s for the
# 2,000 steps), about 20 ms on a GPU (6,000 steps of d_model 256 took 80 min on that CPU).
TRANSFORMER_FULL = TransformerTraining(d_model=128, num_heads=4, num_layers=3, d_ff=512, batch_size=128,
                                       lr=4e-3, warmup=200, max_steps=2000, cooldown=300)
# The side-by-side comparisons of 04 (positions, norms, warm-up): short runs of a small
# post-LN model on short sentences, three seeds each, the same in both profiles (17 runs;
# a comparison model of width 128 and 1,000 steps a run took about 5 min of a GPU).
# (Measured: with lr 1e-2, warm-up of 50 steps took this model to loss 0.77 in 200 steps,
# without warm-up it stalled at 1.8.)
TRANSFORMER_COMPARISON_FAST = TransformerTraining(d_model=32, num_heads=2, num_layers=2, d_ff=64, lr=1e-2,
                                                  warmup=50, max_steps=200, cooldown=0, norm_first=False,
                                                  max_src_len=10)
TRANSFORMER_COMPARISON_FULL = TRANSFORMER_COMPARISON_FAST



# -- 05: BERT ------------------------------------------------------------------------------

@dataclass(frozen=True)
class BertPretraining:
    """How 05_bert pre-trains its small BERT and 05b_bert_finetuning runs its fine-tuning
    comparison (per profile)."""
    vocab_size: int          # WordPiece vocabulary trained on the novels
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int
    max_len: int             # tokens per [CLS] a [SEP] b [SEP] pair
    num_pairs: int           # NSP pairs drawn (each is masked anew every epoch)
    batch_size: int
    steps: int
    lr: float
    warmup: int
    dropout: float           # off: less than one pass over the pairs does not overfit
    fine_tune_steps: int     # steps of each fine-tuning run of 05 (same for every model)
    fine_tune_batch: int
    # fine-tuning learning rates, start -> task -> rate (05b sections 7 and 8; 07 takes the shipped
    # BERT's on books): each the best mean validation score of a grid, on splits held out of the
    # training data (scripts/choose_fine_tuning_rates.py, whose STARTS table names the starts;
    # record: results/fine_tuning_rates.json, which tests/test_fine_tuning_rates.py holds these to)
    fine_tune_lr: dict = field(hash=False)
    task_max_len: int        # tokens per example in the fine-tuning tasks
    book_train_per_class: int  # 'which novel': training passages per novel
    book_test_per_class: int
    names_train: int         # 'names': training sentences
    names_test: int          # 'names': at most this many test sentences
    probe_words: int         # words the per-layer probes of 'names' train on
    minilm_frozen_layers: int  # MiniLM's embeddings and this many lower layers stay fixed in fine-tuning
    pair_train: int          # 'does b follow a?': training pairs (section 8)
    pair_test: int
    qa_train: int            # 'who ...?': at most this many training questions (section 8)
    qa_test: int             # ...and test questions
    heldout_pairs: int = 2000  # NSP pairs of held-out paragraphs, to score pre-training
    weight_decay: float = 0.01  # AdamW's, in pre-training and fine-tuning (BERT's paper: 0.01)
    # the tasks on which MiniLM's architecture is also fine-tuned from random weights (the
    # control of 05b_bert_finetuning); fast: names only, a MiniLM run costs about 15-25 s of one core
    minilm_control_tasks: tuple[str, ...] = ("books", "names")
    # fine-tuning batches grouped by length, this many batches' examples sorted at a time
    # (bert_training.make_batches; 0: none). Fast: on a CPU padding costs time (a names batch
    # of 16 was about 40 % padding); full: a GPU pays for steps, not widths, so none
    fine_tune_bucket: int = 0

    def model_config(self) -> BertConfig:
        return BertConfig(self.vocab_size, self.d_model, self.num_layers, self.num_heads,
                          self.d_ff, self.max_len, dropout=self.dropout)


BERT_FAST = BertPretraining(vocab_size=4000, d_model=128, num_layers=2, num_heads=4, d_ff=256,
                            max_len=48, num_pairs=30_000, batch_size=32, steps=800, lr=1e-3,
                            warmup=80, dropout=0.0, fine_tune_steps=60, fine_tune_batch=16,
                            fine_tune_lr=dict(minilm=dict(books=1e-3, names=3e-3), random_minilm=dict(names=1e-3),
                                              shipped=dict(books=2e-3, names=1e-3),
                                              section4=dict(books=2e-3, names=2e-3),
                                              scratch=dict(books=2e-3, names=5e-3),
                                              shipped_pair=dict(pair=5e-4), shipped_span=dict(span=2e-3),
                                              scratch_pair=dict(pair=2e-4), scratch_span=dict(span=5e-3)),
                            task_max_len=48,
                            book_train_per_class=100, book_test_per_class=50, names_train=800,
                            names_test=400, probe_words=4000, minilm_frozen_layers=4,
                            pair_train=2000, pair_test=600, qa_train=800, qa_test=400,
                            minilm_control_tasks=("names",), fine_tune_bucket=8)
# Full: the same small BERT (and vocabulary) as fast and as the shipped checkpoint
# (data/small_bert.pt, 8,000 steps of 32), pre-trained in the notebook for 800 steps of 128
# pairs: 4x fast's text, drawn from the 120,000 pairs the shipped run drew (102,400 seen
# once; the shipped run saw 256,000). Fine-tuning: the same 60 steps, in batches of 32 on
# 3x the passages and ~4x the name sentences, all six of MiniLM's layers trained. On a GPU the
# steps count, not their size: 800 + 22 runs x 60 = 2,120 steps, as many as fast. Learning rates:
# the full profile's own validation search. Run times: docs/BENCHMARKS.md
BERT_FULL = replace(BERT_FAST, num_pairs=120_000, batch_size=128, fine_tune_batch=32,
                    fine_tune_lr=dict(minilm=dict(books=3e-4, names=3e-4), random_minilm=dict(books=2e-4, names=1e-3),
                                      shipped=dict(books=2e-3, names=1e-3), section4=dict(books=2e-3, names=2e-3),
                                      scratch=dict(books=2e-3, names=2e-3), shipped_pair=dict(pair=5e-4),
                                      shipped_span=dict(span=5e-3), scratch_pair=dict(pair=2e-4),
                                      scratch_span=dict(span=5e-3)),
                    book_train_per_class=300, book_test_per_class=100, names_train=3000, names_test=3000,
                    probe_words=20000, minilm_frozen_layers=0, pair_train=6000, pair_test=1500,
                    minilm_control_tasks=("books", "names"), fine_tune_bucket=0)



# -- 06: tokenisers -------------------------------------------------------------------------

@dataclass(frozen=True)
class BPETraining:
    """06's recipe: the tokenisers' sizes and the two English-Spanish models of section 7."""
    num_merges: int = 8000        # merges learned on the five training novels
    wordpiece_words: int = 2000   # the most frequent words the WordPiece demo learns from
    wordpiece_merges: int = 150   # WordPiece merges (its trainer recounts: keep it small)
    mt_merges: int = 4000         # merges per language for English-Spanish
    mt_min_freq: int = 2          # word-level vocabulary: words seen at least this often
    mt_emb_size: int = 64         # the two translation models (words, BPE pieces) of section 7;
    mt_hidden_size: int = 64      # fast: small and short, on the verse pairs of <= 12 words
    mt_steps: int = 100           # (2,279): about 20 s for both on one CPU thread, too short to
    mt_batch_size: int = 32       # learn to translate (BLEU about 1) but enough to show <unk>
    mt_max_words: int | None = 12  # in the output; None: every training pair
    mt_lr: float = 2e-3

    def mt_recipe(self) -> EsEnTraining:
        """The two translators' recipe, an ``EsEnTraining`` of the ``mt_`` fields (02's model
        and ``fit_seq2seq``; the word model's ``min_freq``, the BPE model takes every piece)."""
        return EsEnTraining(max_len=self.mt_max_words, min_freq=self.mt_min_freq, emb_size=self.mt_emb_size,
                            hidden_size=self.mt_hidden_size, batch_size=self.mt_batch_size, lr=self.mt_lr,
                            steps=self.mt_steps)


BPE_FAST = BPETraining()
# full: 128 units, 700 steps of 64 (4 epochs of the 11,191 pairs): both models in 15 min on a
# 2-core CPU, 164 s on an H200 shared five ways (issue 32's budget)
BPE_FULL = BPETraining(num_merges=12000, wordpiece_words=4000, wordpiece_merges=400, mt_merges=8000,
                       mt_emb_size=128, mt_hidden_size=128, mt_steps=700, mt_batch_size=64, mt_max_words=None)


#: In a smoke test (``COURSE_SMOKE_STEPS``) the BPE trainers learn at most this many merges:
#: training tokenisers is what a smoke run of 06 spends its time on, not the models.
SMOKE_MERGES = 2000


# -- 07: GPT -------------------------------------------------------------------------------

@dataclass(frozen=True)
class GPTTraining:
    """How 07 trains its GPT (one recipe per profile): the model, the language-model run, the
    samplers' measurement and the classification comparison with 05."""
    num_merges: int            # byte-level BPE merges (06's tokenizer) learned on the novels
    max_len: int               # context length in tokens
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int
    dropout: float
    batch_size: int            # windows of max_len + 1 tokens per step
    steps: int                 # the notebook's own language-model run
    lr: float
    warmup: int
    weight_decay: float = 0.1
    eval_windows: int = 200    # held-out windows that perplexities are measured on
    num_samples: int = 48      # continuations per sampler setting
    sample_tokens: int = 48    # tokens per continuation
    fine_tune_lm_weight: float = 0.5   # the GPT paper's auxiliary LM loss in fine-tuning...
    fine_tune_aux: bool = False        # ...measured as a third contestant (full profile: time allows)
    fine_tune_seeds: tuple[int, ...] = (0, 1, 2)
    fine_tune_steps: int | None = None  # section 8's fine-tuning budget, for BERT and GPT alike;
    fine_tune_batch: int | None = None  # None: 05's recipe (the fast profile), so that both
    fine_tune_lr: float | None = None   # notebooks fine-tune the shipped BERT the same way (its rate on books)

    def model_config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(vocab_size, self.max_len, self.d_model, self.num_heads, self.num_layers,
                         self.d_ff, self.dropout)

    def fine_tuning(self, bert_recipe) -> tuple[int, int, float]:
        """(steps, batch size, learning rate) of 07's fine-tuning runs: this recipe's where it
        sets them, else those of 05's recipe ``bert_recipe`` (a ``BertPretraining``)."""
        return (self.fine_tune_steps or bert_recipe.fine_tune_steps,
                self.fine_tune_batch or bert_recipe.fine_tune_batch,
                self.fine_tune_lr or bert_recipe.fine_tune_lr["shipped"]["books"])


GPT_FAST = GPTTraining(num_merges=2000, max_len=64, d_model=64, num_heads=4, num_layers=2, d_ff=256,
                       dropout=0.0, batch_size=16, steps=400, lr=3e-3, warmup=30)
#: The full profile: the shipped GPT's layout (scripts/pretrain_small_gpt.py) with twice its
#: context, trained in the notebook on about eight times the fast run's tokens (within the
#: full profile's 20 minutes a notebook on a 2-core CPU; run times: docs/BENCHMARKS.md).
GPT_FULL = GPTTraining(num_merges=2000, max_len=128, d_model=128, num_heads=4, num_layers=4, d_ff=512,
                       dropout=0.1, batch_size=16, steps=1500, lr=2e-3, warmup=100, eval_windows=500,
                       num_samples=100, fine_tune_aux=True,
                       fine_tune_steps=300, fine_tune_batch=32, fine_tune_lr=3e-4)  # longer than 05's full



# -- 07b: a real small LLM ------------------------------------------------------------------

@dataclass(frozen=True)
class LLMTraining:
    """07b's recipe: how much it measures on SmolLM2-135M (questions per in-context task, seeds
    that draw and order the examples, shot counts, the induction probe's repeated random
    sequences) and the LoRA comparison on 05's MiniLM (scripts/lora_comparison.py: 05's
    name tagging, a head alone, LoRA on the query and value projections, full fine-tuning)."""
    num_test: int = 24
    seeds: tuple = (0, 1, 2)
    shots: tuple = (0, 1, 2, 4, 8)
    period: int = 40              # random tokens, then the same again
    induction_batch: int = 4
    lora_rank: int = 4
    lora_alpha: float = 8.0
    lora_steps: int = 60          # 05's fine_tune_steps
    lora_batch: int = 16
    lora_seeds: tuple = (0, 1, 2)
    lora_train: int = 800         # training sentences (05's fast names_train)
    lora_test: int = 400
    lora_max_len: int = 48        # 05's task_max_len
    # learning rates: a head alone and LoRA train few weights from zero or near it; full
    # fine-tuning moves pre-trained ones (05's fine_tune_lr_minilm)
    lora_lr: tuple = (("head", 2e-3), ("lora", 2e-3), ("full", 1e-4))


LLM_FAST = LLMTraining()
# the full profile: four times the questions, five seeds and 16 shots, longer induction sequences
# (the LoRA comparison is the fast profile's: a run record, results/fast/07b_lora.json)
LLM_FULL = LLMTraining(num_test=96, seeds=(0, 1, 2, 3, 4), shots=(0, 1, 2, 4, 8, 16), period=60, induction_batch=8)


# -- 08: the Vision Transformer --------------------------------------------------------------

@dataclass(frozen=True)
class ViTTraining:
    """Model sizes and the training recipe of 08 (every model of its comparisons trains
    with the same steps, batches, optimiser and schedule)."""
    patch_size: int = 2
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 3
    d_ff: int = 128
    dropout: float = 0.0
    batch_size: int = 64
    lr: float = 2e-3            # AdamW peak learning rate, after a linear warm-up
    weight_decay: float = 0.05
    warmup: int = 50
    max_steps: int = 600        # then a cosine decay to 0 over the remaining steps
    augment: bool = False       # random shifts of up to one pixel
    seeds: tuple = (0, 1)       # the comparisons' seeds
    data_sizes: tuple = (100, 300)  # training images in the data-efficiency runs (and all)
    patch_sizes: tuple = (2, 4, 8)  # the patch-size comparison (8: one patch, the whole image)
    caption_steps: int = 500    # the digit captioner of the side note (Adam, lr 3e-3)
    shifted_steps: int = 1600   # section 8's longer runs on shifted images
    pretrain_steps: int = 1200  # pre-training on the digits 0-4 (shifted copies), section 8
    fine_tune_sizes: tuple = (25, 100)  # images of the digits 5-9 to fine-tune on, section 8
    fine_tune_steps: int = 150  # steps of each of section 8's fine-tuning runs (and from-scratch ones)

    def model_config(self, **overrides) -> ViTConfig:
        """The ``ViTConfig`` for these sizes (``overrides`` change single fields)."""
        kwargs = dict(patch_size=self.patch_size, d_model=self.d_model, num_heads=self.num_heads,
                      num_layers=self.num_layers, d_ff=self.d_ff, dropout=self.dropout)
        kwargs.update(overrides)
        return ViTConfig(**kwargs)


# Chosen on the validation split (one thread of a 2-core CPU, two seeds): 2 layers of width 48
# reach the accuracy of 3 layers of width 64 (94-96 % after 400 steps at lr 2e-3) in 60 % of
# the time; 300 steps at lr 3e-3 do as well or better (97-98 %) in 75 % of that, and keep the
# CNN and the MLP where they were. Shifted copies (augment) need more steps: in 300 steps the ViT
# has not fit them (08 section 8 trains three times as long in the fast profile, four in the full).
# Section 8's budgets (five seeds, scored on images of 5-9 no model saw): 150 fine-tuning steps
# score within about a point of 300 at half the cost; 900 pre-training steps on shifted copies keep
# a gain at 25 images in every seed (fewer, or unshifted, lose it in some); 900 steps on shifted
# images win back most of what the shifts cost. The runs: docs/BENCHMARKS.md.
VIT_FAST = ViTTraining(d_model=48, num_heads=4, num_layers=2, d_ff=96, lr=3e-3, warmup=40, max_steps=300,
                       shifted_steps=900, pretrain_steps=900)
# The full profile: 3 layers of width 64 for 400 steps (the sizes above), three seeds, the 1x1
# patch, two data sizes (50 and 300 images), section 8's shifted runs of 1,600 steps, the
# pre-training (1,200 steps) and the fine-tuning on 25 and 100 images, cut to fit a GPU's few
# minutes a notebook (run times: docs/BENCHMARKS.md). It adds seeds and sizes, not a better ViT
# (see the comment above).
VIT_FULL = ViTTraining(max_steps=400, seeds=(0, 1, 2), data_sizes=(50, 300),
                       patch_sizes=(1, 2, 4, 8), caption_steps=1000, pretrain_steps=1200,
                       fine_tune_sizes=(25, 100), fine_tune_steps=400)


# -- picking one, and the smoke test ----------------------------------------------------------

class Pair(NamedTuple):
    """A notebook's two recipes."""
    fast: object
    full: object


#: name -> (fast, full): every recipe of the course
RECIPES: dict[str, Pair] = {
    "seq2seq": Pair(SEQ2SEQ_FAST, SEQ2SEQ_FULL),
    "attention": Pair(ATTENTION_FAST, ATTENTION_FULL),
    "es_en": Pair(ES_EN_FAST, ES_EN_FULL),
    "convs2s": Pair(CONVS2S_FAST, CONVS2S_FULL),
    "transformer": Pair(TRANSFORMER_FAST, TRANSFORMER_FULL),
    "transformer_comparison": Pair(TRANSFORMER_COMPARISON_FAST, TRANSFORMER_COMPARISON_FULL),
    "bert": Pair(BERT_FAST, BERT_FULL),
    "bpe": Pair(BPE_FAST, BPE_FULL),
    "gpt": Pair(GPT_FAST, GPT_FULL),
    "llm": Pair(LLM_FAST, LLM_FULL),
    "vit": Pair(VIT_FAST, VIT_FULL),
}


def _bert_smoke(r: BertPretraining, size: int) -> dict:
    per_book = max(2, size // 32)   # MiniLM's features and fine-tuning at full length cost most
    return dict(num_pairs=min(r.num_pairs, 8 * size), heldout_pairs=min(r.heldout_pairs, size),
                book_train_per_class=min(r.book_train_per_class, per_book),
                book_test_per_class=min(r.book_test_per_class, per_book),
                names_train=min(r.names_train, size), names_test=min(r.names_test, size),
                pair_train=min(r.pair_train, size), pair_test=min(r.pair_test, size),
                qa_train=min(r.qa_train, size), qa_test=min(r.qa_test, size))


#: In a smoke test (``COURSE_SMOKE_STEPS``: the profile's models, a few steps each, numbers
#: that mean nothing), what each recipe gives up beyond its steps and batch sizes (every
#: field that counts steps is capped at the smoke test's steps, every field that names a batch
#: size at ``SMOKE_BATCH``): ``name -> (recipe, smoke test's evaluation size) -> changed fields``.
SMOKE_CAPS: dict[str, Callable[[object, int], dict]] = {
    "bert": _bert_smoke,
    # training tokenisers is what a smoke run of 06 spends its time on, not the models
    "bpe": lambda r, size: dict(num_merges=min(r.num_merges, SMOKE_MERGES), mt_merges=min(r.mt_merges, SMOKE_MERGES),
                                wordpiece_words=min(r.wordpiece_words, 1000),
                                wordpiece_merges=min(r.wordpiece_merges, 100)),
    "gpt": lambda r, size: dict(eval_windows=min(r.eval_windows, size), num_samples=min(r.num_samples, 8),
                                sample_tokens=min(r.sample_tokens, 16), fine_tune_seeds=r.fine_tune_seeds[:1]),
    # a real 135 M model: every question and every shot costs a forward pass of it
    "llm": lambda r, size: dict(num_test=min(r.num_test, max(4, size // 16)), seeds=r.seeds[:1],
                                shots=tuple(k for k in r.shots if k <= 8), period=min(r.period, 40),
                                lora_seeds=r.lora_seeds[:1],
                                lora_train=min(r.lora_train, size), lora_test=min(r.lora_test, size)),
}

#: in a smoke test, the most examples per training batch
SMOKE_BATCH = 8


class Smoke(NamedTuple):
    """A smoke test's caps: optimiser steps per training run, examples per evaluation."""
    steps: int
    eval_size: int


def smoke() -> Smoke | None:
    """The smoke test's caps (``runtime.smoke_steps``, ``runtime.smoke_eval_size``), or None
    outside a smoke test (train as the profile says)."""
    steps = smoke_steps()
    return None if steps is None else Smoke(steps, smoke_eval_size())


def _step_fields(chosen) -> list[str]:
    return [f.name for f in fields(chosen) if f.name.endswith("steps")]


def _batch_fields(chosen) -> list[str]:
    return [f.name for f in fields(chosen) if f.name.endswith(("batch_size", "_batch"))]


def recipe(name: str, profile: str | None = None):
    """The recipe ``name`` (see ``RECIPES``) for the active profile, or for ``profile``
    ('fast' or 'full'). In a smoke test (``smoke()``) the same models with every count of steps
    capped at the smoke test's steps, batches of at most ``SMOKE_BATCH`` and the caps of
    ``SMOKE_CAPS``; outside one, ``RECIPES[name].fast`` or ``.full`` itself."""
    if name not in RECIPES:
        raise ValueError(f"no recipe named {name!r}: expected one of {', '.join(sorted(RECIPES))}")
    chosen = pick(*RECIPES[name], profile)
    caps = smoke()
    if caps is None:
        return chosen
    changes = {f: min(getattr(chosen, f), caps.steps) for f in _step_fields(chosen) if getattr(chosen, f) is not None}
    changes.update({f: min(getattr(chosen, f), SMOKE_BATCH) for f in _batch_fields(chosen)
                    if getattr(chosen, f) is not None})
    capped = replace(chosen, **changes)
    return replace(capped, **SMOKE_CAPS.get(name, lambda r, s: {})(capped, caps.eval_size))

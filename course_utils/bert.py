"""BERT: an encoder-only Transformer, pre-trained on raw text, then fine-tuned.

Taught in: 05_bert. Built from ``course_utils.transformer.EncoderLayer`` (04): a BERT is
the encoder half of the Transformer with three embedding tables, two pre-training heads
(masked LM and next-sentence prediction) and, after pre-training, a small task head.

What is here:

- the input representation: ``build_input`` ([CLS] a [SEP] b [SEP], token type ids,
  attention mask) and ``truncate_pair``;
- the pre-training data: ``mask_tokens`` (15 % chosen; of those 80 % [MASK], 10 % a random
  token, 10 % unchanged), ``split_sentences`` and ``nsp_pairs`` (50 % true next sentence,
  50 % a sentence of another document);
- a small BERT: ``BertConfig``, ``BertEncoder``, ``BertForPreTraining``,
  ``pretraining_loss``; ``HFEncoder`` puts a Hugging Face encoder (all-MiniLM-L6-v2)
  behind the same interface;
- fine-tuning heads: ``SequenceClassifier`` and ``TokenClassifier``;
- two tasks built from the shipped novels: ``book_passages`` (which novel a passage comes
  from) and ``name_tagging`` (which words are character names), with ``CHARACTER_NAMES``.

Leaves out: whole-word and span masking, sentence-order prediction (ALBERT), dropping NSP
(RoBERTa), relative positions, the post-LN layout of the original (the small BERT here is
pre-LN, which trains without a long warm-up), GELU in the feed-forward layers (04's layers
use ReLU), mixed precision.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence

import torch
from torch import nn

from course_utils.attention import causal_mask
from course_utils.runtime import check_device, pick
from course_utils.transformer import EncoderLayer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
IGNORE_INDEX = -100  # label of positions that the loss skips (torch's cross_entropy default)


# -- masked language modelling ---------------------------------------------------------

def mask_tokens(input_ids: torch.Tensor, vocab_size: int, special_ids: Sequence[int], mask_id: int,
                mlm_prob: float = 0.15, generator: torch.Generator | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking for a batch of ids (any shape, e.g. (batch, n)). Each non-special
    token is chosen with probability ``mlm_prob``; a chosen token becomes ``mask_id`` with
    probability 0.8, a random non-special token with 0.1, and stays as it is with 0.1.
    Returns ``(inputs, labels)``: labels hold the original id where a token was chosen and
    -100 elsewhere (special tokens and padding are never chosen). Taught in: 05_bert."""
    if not torch.is_tensor(input_ids) or input_ids.dtype != torch.long:
        raise TypeError(f"input_ids must be a torch.long tensor, got "
                        f"{getattr(input_ids, 'dtype', type(input_ids).__name__)}")
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab_size):
        raise ValueError(f"input_ids must lie in [0, {vocab_size}), got values "
                         f"{int(input_ids.min())}..{int(input_ids.max())}")
    special = sorted({int(i) for i in special_ids})
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id must lie in [0, {vocab_size}), got {mask_id}")
    if mask_id not in special:
        raise ValueError(f"mask_id {mask_id} must be one of the special_ids {special}")
    if not 0.0 < mlm_prob <= 1.0:
        raise ValueError(f"mlm_prob must be in (0, 1], got {mlm_prob}")
    is_special = torch.zeros(vocab_size, dtype=torch.bool)
    is_special[special] = True
    ordinary = torch.nonzero(~is_special).squeeze(1)  # ids a random replacement may take
    if len(ordinary) == 0:
        raise ValueError("every id of the vocabulary is special: nothing to predict")

    device, ids = input_ids.device, input_ids.cpu()
    chosen = (torch.rand(ids.shape, generator=generator) < mlm_prob) & ~is_special[ids]
    action = torch.rand(ids.shape, generator=generator)  # < 0.8 mask, < 0.9 random, else keep
    replacement = ordinary[torch.randint(len(ordinary), ids.shape, generator=generator)]
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs[to_random] = replacement[to_random]
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    return inputs.to(device), labels.to(device)


# -- the input representation ----------------------------------------------------------

class BertInput(NamedTuple):
    """One encoded example: the tokens and the three id lists a BERT reads."""
    tokens: list[str]
    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]


def truncate_pair(tokens_a: Sequence[str], tokens_b: Sequence[str] | None, max_tokens: int
                  ) -> tuple[list[str], list[str] | None]:
    """Drop tokens from the end of the longer segment until both fit in ``max_tokens``
    (BERT's 'longest first'). Taught in: 05_bert."""
    needed = 1 if tokens_b is None else 2  # at least one token per segment
    if max_tokens < needed:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for the segments")
    a, b = list(tokens_a), (None if tokens_b is None else list(tokens_b))
    while len(a) + (len(b) if b is not None else 0) > max_tokens:
        if b is not None and len(b) > len(a):
            b.pop()
        else:
            a.pop()
    return a, b


def build_input(tokens_a: Sequence[str], tokens_b: Sequence[str] | None = None, *,
                vocab: Mapping[str, int], max_len: int | None = None,
                unk_token: str = "[UNK]") -> BertInput:
    """``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` as ids, with token type 0 for the
    first segment (and its [CLS] and [SEP]) and 1 for the second; padded with [PAD] (and
    attention mask 0) to ``max_len`` if given, after truncating the longer segment.
    Taught in: 05_bert."""
    if isinstance(tokens_a, str) or (isinstance(tokens_b, str)):
        raise TypeError("tokens_a and tokens_b must be lists of tokens (word pieces), not strings")
    for token in ("[CLS]", "[SEP]", "[PAD]", unk_token):
        if token not in vocab:
            raise KeyError(f"the vocabulary has no {token} token")
    if max_len is not None:
        specials = 3 if tokens_b is not None else 2
        tokens_a, tokens_b = truncate_pair(tokens_a, tokens_b, max_len - specials)
    tokens = ["[CLS]", *tokens_a, "[SEP]"]
    types = [0] * len(tokens)
    if tokens_b is not None:
        tokens += [*tokens_b, "[SEP]"]
        types += [1] * (len(tokens_b) + 1)
    unk = vocab[unk_token]
    ids = [vocab.get(t, unk) for t in tokens]
    mask = [1] * len(ids)
    pad = (max_len or len(ids)) - len(ids)
    return BertInput(tokens + ["[PAD]"] * pad, ids + [vocab["[PAD]"]] * pad,
                     types + [0] * pad, mask + [0] * pad)


# -- next-sentence prediction ------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!Mr\.)(?<!Mrs\.)(?<!Dr\.)(?<!St\.)"
                           r"[\"'\u201d\u2019]?\s+(?=[\"'\u201c\u2018]?[A-Z])")


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences at . ! ? followed by a capital (a rule, not a parser:
    after Mr., Mrs., Dr. and St. it does not split). Taught in: 05_bert."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def nsp_pairs(documents: Sequence[Sequence[str]], num_pairs: int, seed: int = 0
              ) -> list[tuple[str, str, int]]:
    """``(a, b, is_next)`` triples for next-sentence prediction: ``a`` is a sentence with a
    successor in its document; half the time ``b`` is that successor (is_next = 1), half
    the time a random sentence of another document (is_next = 0). ``documents``: lists
    of sentences. Taught in: 05_bert."""
    if not isinstance(num_pairs, int) or num_pairs < 1:
        raise ValueError(f"num_pairs must be a positive int, got {num_pairs!r}")
    docs = [list(d) for d in documents if len(d) > 0]
    if len(docs) < 2:
        raise ValueError(f"need at least two non-empty documents, got {len(docs)}")
    starts = [(d, i) for d, doc in enumerate(docs) for i in range(len(doc) - 1)]
    if not starts:
        raise ValueError("no document has two sentences: there is no true next sentence")
    rng = random.Random(seed)
    pairs = []
    for _ in range(num_pairs):
        d, i = rng.choice(starts)
        if rng.random() < 0.5:
            pairs.append((docs[d][i], docs[d][i + 1], 1))
        else:
            other = rng.randrange(len(docs) - 1)
            other += other >= d  # any document but d
            pairs.append((docs[d][i], rng.choice(docs[other]), 0))
    return pairs


# -- the model -------------------------------------------------------------------------

@dataclass
class BertConfig:
    """Sizes of a small BERT (BERT-base: d_model 768, 12 layers, 12 heads, d_ff 3072)."""
    vocab_size: int
    d_model: int = 128
    num_layers: int = 2
    num_heads: int = 4
    d_ff: int = 512
    max_len: int = 64
    type_vocab_size: int = 2
    dropout: float = 0.1
    pad_id: int = 0

    def __post_init__(self):
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        for name in ("vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


@dataclass
class BertPretraining:
    """How 05 pre-trains its small BERT and runs its fine-tuning comparison (per profile)."""
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
    dropout: float           # off in fast: one pass over the data does not overfit
    fine_tune_steps: int     # steps of each fine-tuning run of 05 (same for every model)
    fine_tune_batch: int
    fine_tune_lr_large: float  # for MiniLM
    fine_tune_lr_small: float  # for the small BERTs (pre-trained or not)
    task_max_len: int        # tokens per example in the fine-tuning tasks
    book_train_per_class: int  # 'which novel': training passages per novel
    book_test_per_class: int
    names_train: int         # 'names': training sentences
    names_test: int          # 'names': at most this many test sentences
    probe_words: int         # words the per-layer probes of 'names' train on
    minilm_frozen_layers: int  # MiniLM's embeddings and this many lower layers stay fixed in fine-tuning
    heldout_pairs: int = 2000  # NSP pairs of held-out paragraphs, to score pre-training

    def model_config(self) -> BertConfig:
        return BertConfig(self.vocab_size, self.d_model, self.num_layers, self.num_heads,
                          self.d_ff, self.max_len, dropout=self.dropout)


FAST = BertPretraining(vocab_size=4000, d_model=128, num_layers=2, num_heads=4, d_ff=256,
                       max_len=48, num_pairs=30_000, batch_size=32, steps=800, lr=1e-3,
                       warmup=80, dropout=0.0, fine_tune_steps=60, fine_tune_batch=16,
                       fine_tune_lr_large=1e-4, fine_tune_lr_small=5e-4, task_max_len=48,
                       book_train_per_class=100, book_test_per_class=50, names_train=800,
                       names_test=400, probe_words=4000, minilm_frozen_layers=4)
FULL = BertPretraining(vocab_size=8000, d_model=256, num_layers=4, num_heads=8, d_ff=1024,
                       max_len=128, num_pairs=200_000, batch_size=64, steps=20_000, lr=5e-4,
                       warmup=1000, dropout=0.1, fine_tune_steps=300, fine_tune_batch=32,
                       fine_tune_lr_large=5e-5, fine_tune_lr_small=3e-4, task_max_len=128,
                       book_train_per_class=300, book_test_per_class=100, names_train=3000,
                       names_test=3000, probe_words=20000, minilm_frozen_layers=0)


def pretraining_recipe(profile: str | None = None) -> BertPretraining:
    """The fast or full recipe of 05; in a smoke test (``COURSE_SMOKE_STEPS``) the same
    models with few examples (``runtime.smoke_eval_size()``) in small batches
    (``runtime.cap_batch``). Taught in: 05_bert."""
    from dataclasses import replace
    from course_utils.runtime import cap_batch, smoke_eval_size
    recipe = pick(FAST, FULL, profile)
    size = smoke_eval_size()
    if size is not None:
        per_book = max(2, size // 32)   # MiniLM's features and fine-tuning at full length cost most
        recipe = replace(recipe, num_pairs=min(recipe.num_pairs, 8 * size),
                         heldout_pairs=min(recipe.heldout_pairs, size),
                         book_train_per_class=min(recipe.book_train_per_class, per_book),
                         book_test_per_class=min(recipe.book_test_per_class, per_book),
                         names_train=min(recipe.names_train, size),
                         names_test=min(recipe.names_test, size),
                         batch_size=cap_batch(recipe.batch_size),
                         fine_tune_batch=cap_batch(recipe.fine_tune_batch))
    return recipe


@dataclass
class EncoderOutput:
    """What an encoder returns: the last layer (batch, n, d), every layer's output
    including the embeddings (layers + 1 tensors) and every layer's attention weights
    (batch, heads, n, n)."""
    last: torch.Tensor
    hidden_states: list[torch.Tensor] = field(default_factory=list)
    attentions: list[torch.Tensor] = field(default_factory=list)


class BertEmbeddings(nn.Module):
    """token + segment + position embeddings, then LayerNorm and dropout:
    (batch, n) ids and token types -> (batch, n, d). Taught in: 05_bert."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.token = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.segment = nn.Embedding(cfg.type_vocab_size, cfg.d_model)
        self.position = nn.Embedding(cfg.max_len, cfg.d_model)
        self.norm = nn.LayerNorm(cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def parts(self, input_ids, token_type_ids):
        """The three summands, each (batch, n, d)."""
        n = input_ids.shape[1]
        if n > self.position.num_embeddings:
            raise ValueError(f"sequence of {n} tokens is longer than max_len={self.position.num_embeddings}")
        positions = torch.arange(n, device=input_ids.device).expand_as(input_ids)
        return self.token(input_ids), self.segment(token_type_ids), self.position(positions)

    def forward(self, input_ids, token_type_ids):
        token, segment, position = self.parts(input_ids, token_type_ids)
        return self.dropout(self.norm(token + segment + position))


def _check_ids(input_ids, token_type_ids, attention_mask):
    if not torch.is_tensor(input_ids) or input_ids.dim() != 2:
        raise ValueError(f"input_ids must be a (batch, n) tensor, got "
                         f"{tuple(input_ids.shape) if torch.is_tensor(input_ids) else type(input_ids).__name__}")
    token_type_ids = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
    attention_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
    for name, t in (("token_type_ids", token_type_ids), ("attention_mask", attention_mask)):
        if t.shape != input_ids.shape:
            raise ValueError(f"{name} must have the shape of input_ids {tuple(input_ids.shape)}, "
                             f"got {tuple(t.shape)}")
    return token_type_ids, attention_mask


class BertEncoder(nn.Module):
    """Embeddings and a stack of 04's (pre-LN) encoder layers with full, padding-masked
    self-attention. ``forward(input_ids, token_type_ids=None, attention_mask=None,
    causal=False, need_weights=True)`` returns an ``EncoderOutput`` (its attentions are
    Nones with ``need_weights=False``: the fused kernel, for training); ``causal=True`` adds
    GPT's mask (each token sees only itself and the tokens before it). Taught in: 05_bert."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.layers = nn.ModuleList(EncoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout)
                                    for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.d_model)  # pre-LN leaves the last residual un-normalised
        self.apply(_init_weights)

    @property
    def d_model(self) -> int:
        return self.cfg.d_model

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, causal: bool = False,
                need_weights: bool = True):
        token_type_ids, attention_mask = _check_ids(input_ids, token_type_ids, attention_mask)
        mask = attention_mask.bool()[:, None, :]  # (batch, 1, n): every query sees the real keys
        if causal:
            mask = mask & causal_mask(input_ids.shape[1], device=input_ids.device)
        x = self.embeddings(input_ids, token_type_ids)
        hidden, attentions = [x], []
        for layer in self.layers:
            x, weights = layer(x, mask, need_weights)
            hidden.append(x)
            attentions.append(weights)
        x = self.norm(x)
        hidden[-1] = x
        return EncoderOutput(x, hidden, attentions)


def _init_weights(module):
    """BERT's initialisation: N(0, 0.02) for linear maps and embeddings, zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()


class BertForPreTraining(nn.Module):
    """A ``BertEncoder`` with the two pre-training heads: masked LM (a transform, then the
    token embedding matrix, tied, as output layer) and NSP (tanh 'pooler' on [CLS], then
    2 classes: not next / next). ``forward(input_ids, token_type_ids, attention_mask,
    labels=None)`` returns ``(mlm_logits, nsp_logits (batch, 2))``; mlm_logits are
    (batch, n, vocab), or (chosen, vocab) for the positions where ``labels`` != -100.
    Taught in: 05_bert."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        self.bert = BertEncoder(cfg)
        d = cfg.d_model
        self.mlm_transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d))
        self.mlm_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.pooler = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        self.nsp = nn.Linear(d, 2)
        for m in (self.mlm_transform, self.pooler, self.nsp):
            m.apply(_init_weights)

    def mlm_logits(self, hidden):
        """(..., d) -> (..., vocab) with the output layer tied to the token embeddings."""
        return self.mlm_transform(hidden) @ self.bert.embeddings.token.weight.T + self.mlm_bias

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        out = self.bert(input_ids, token_type_ids, attention_mask, need_weights=False)  # fused kernel
        hidden = out.last if labels is None else out.last[labels != IGNORE_INDEX]
        return self.mlm_logits(hidden), self.nsp(self.pooler(out.last[:, 0]))


@dataclass
class PretrainingLog:
    """Per-step numbers of a pre-training run, filled by ``pretraining_loss``."""
    mlm_loss: list[float] = field(default_factory=list)
    nsp_loss: list[float] = field(default_factory=list)
    mlm_accuracy: list[float] = field(default_factory=list)
    nsp_accuracy: list[float] = field(default_factory=list)


def pretraining_loss(model: BertForPreTraining, batch: Mapping[str, torch.Tensor],
                     log: PretrainingLog | None = None) -> torch.Tensor:
    """MLM cross-entropy over the chosen positions + NSP cross-entropy. ``batch`` holds
    input_ids, token_type_ids, attention_mask, labels (-100 where not chosen) and
    next_sentence (1 = b follows a). Taught in: 05_bert."""
    labels = batch["labels"]
    mlm_logits, nsp_logits = model(batch["input_ids"], batch["token_type_ids"],
                                   batch["attention_mask"], labels=labels)
    targets = labels[labels != IGNORE_INDEX]
    if targets.numel() == 0:
        raise ValueError("no position of the batch was chosen for masked LM")
    mlm = nn.functional.cross_entropy(mlm_logits, targets)
    nsp = nn.functional.cross_entropy(nsp_logits, batch["next_sentence"])
    if log is not None:
        log.mlm_loss.append(mlm.item())
        log.nsp_loss.append(nsp.item())
        log.mlm_accuracy.append((mlm_logits.argmax(-1) == targets).float().mean().item())
        log.nsp_accuracy.append((nsp_logits.argmax(-1) == batch["next_sentence"]).float().mean().item())
    return mlm + nsp


class HFEncoder(nn.Module):
    """A Hugging Face encoder (e.g. all-MiniLM-L6-v2 loaded with ``AutoModel``) behind the
    interface of ``BertEncoder``: ``forward(input_ids, token_type_ids, attention_mask)``
    returns an ``EncoderOutput`` (with attention weights if ``attentions``: load the model
    with ``attn_implementation="eager"`` for them). Taught in: 05_bert."""

    def __init__(self, model: nn.Module, attentions: bool = False):
        super().__init__()
        self.model = model
        self.attentions = attentions  # also return the attention weights (costs time)

    @property
    def d_model(self) -> int:
        return self.model.config.hidden_size

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, causal: bool = False):
        if causal:
            raise ValueError("a pre-trained BERT was trained with full attention; causal=True is not offered")
        token_type_ids, attention_mask = _check_ids(input_ids, token_type_ids, attention_mask)
        out = self.model(input_ids=input_ids, token_type_ids=token_type_ids,
                         attention_mask=attention_mask, output_hidden_states=True,
                         output_attentions=self.attentions)
        return EncoderOutput(out.last_hidden_state, list(out.hidden_states),
                             list(out.attentions or []))


# -- fine-tuning heads -----------------------------------------------------------------

class EncoderWithHead(nn.Module):
    """An encoder plus dropout and a new linear layer on the vectors that ``features``
    picks from its output; the base of the two fine-tuning models. Taught in: 05_bert."""

    def __init__(self, encoder: nn.Module, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.d_model, num_labels)
        _init_weights(self.head)

    def features(self, out: EncoderOutput) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        out = self.encoder(input_ids, token_type_ids, attention_mask)
        return self.head(self.dropout(self.features(out)))


class SequenceClassifier(EncoderWithHead):
    """Classify a whole input from its [CLS] vector: input_ids, token_type_ids,
    attention_mask (batch, n) -> logits (batch, num_labels). Taught in: 05_bert."""

    def features(self, out):
        return out.last[:, 0]


class TokenClassifier(EncoderWithHead):
    """Classify every token from its own vector: -> logits (batch, n, num_labels).
    Taught in: 05_bert."""

    def features(self, out):
        return out.last


def classification_loss(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of a ``SequenceClassifier`` ((batch,) labels) or a
    ``TokenClassifier`` ((batch, n) labels, -100 where not scored). Taught in: 05_bert."""
    logits = model(batch["input_ids"], batch.get("token_type_ids"), batch.get("attention_mask"))
    return nn.functional.cross_entropy(logits.flatten(0, -2), batch["labels"].flatten(),
                                       ignore_index=IGNORE_INDEX)


@torch.no_grad()
def predict(model: nn.Module, batches) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted and true labels over ``batches`` (positions labelled -100 dropped), in
    eval mode; batches go to the model's device, the labels come back on the CPU.
    Taught in: 05_bert."""
    from course_utils.training import to_device
    device = check_device(model, what="predict")
    was_training = model.training
    model.eval()
    predicted, true = [], []
    for batch in batches:
        batch = to_device(batch, device)
        logits = model(batch["input_ids"], batch.get("token_type_ids"), batch.get("attention_mask"))
        keep = batch["labels"] != IGNORE_INDEX
        predicted.append(logits.argmax(-1)[keep].cpu())
        true.append(batch["labels"][keep].cpu())
    model.train(was_training)
    return torch.cat(predicted), torch.cat(true)


# -- tasks built from the shipped novels -------------------------------------------------

# Main characters per novel (first names and surnames as they appear capitalised in the
# text), for the token-level task: a word is a name if it is one of these. A name list
# gives 'silver' labels: 'Bath' is a place and not on the list; a 'Miss Bates' is tagged on
# 'Bates' only.
CHARACTER_NAMES: dict[str, tuple[str, ...]] = {
    "Emma": ("Emma", "Woodhouse", "Knightley", "Harriet", "Smith", "Weston", "Elton",
             "Jane", "Fairfax", "Frank", "Churchill", "Bates", "Isabella", "John", "Perry",
             "Martin", "Robert", "Taylor", "Cole", "Goddard", "Campbell", "Dixon"),
    "Mansfield Park": ("Fanny", "Price", "Edmund", "Thomas", "Bertram", "Crawford", "Henry",
                       "Mary", "Norris", "Rushworth", "Grant", "William", "Julia", "Maria",
                       "Tom", "Susan", "Yates", "Betsey"),
    "Northanger Abbey": ("Catherine", "Morland", "Tilney", "Henry", "Eleanor", "Thorpe",
                         "Isabella", "John", "James", "Allen", "Frederick", "Anne"),
    "Persuasion": ("Anne", "Elliot", "Wentworth", "Frederick", "Walter", "Russell", "Mary",
                   "Musgrove", "Musgroves", "Charles", "Louisa", "Henrietta", "Elizabeth",
                   "Benwick", "Harville", "Smith", "Clay", "Croft", "Hayter", "Shepherd"),
    "Pride & Prejudice": ("Elizabeth", "Lizzy", "Eliza", "Bennet", "Bennets", "Darcy", "Jane",
                          "Bingley", "Bingleys", "Wickham", "Collins", "Lydia", "Catherine",
                          "Kitty", "Mary", "Charlotte", "Lucas", "Gardiner", "Fitzwilliam",
                          "Georgiana", "Hurst", "Phillips", "Forster", "Bourgh", "William"),
    "Sense & Sensibility": ("Elinor", "Marianne", "Margaret", "Dashwood", "Dashwoods",
                            "Edward", "Ferrars", "Willoughby", "Brandon", "Jennings", "Lucy",
                            "Steele", "John", "Fanny", "Middleton", "Palmer", "Charlotte",
                            "Robert", "Anne", "Nancy"),
}

_WORD = re.compile(r"[A-Za-z]+|[^\sA-Za-z]")


def words(text: str) -> list[str]:
    """Words (letters only, so "Emma's" -> Emma ' s) and single punctuation marks."""
    return _WORD.findall(text)


def name_tagging(paragraphs, books: Sequence[str], max_words: int = 40, min_names: int = 1,
                 seed: int = 0) -> list[tuple[list[str], list[int]]]:
    """Sentences of ``books`` as (words, tags), tag 1 where the word is a character name of
    that book (case-sensitive, see ``CHARACTER_NAMES``), 0 elsewhere; only sentences of at
    most ``max_words`` words with at least ``min_names`` names, shuffled. Taught in: 05_bert."""
    unknown = sorted(set(books) - set(CHARACTER_NAMES))
    if unknown:
        raise ValueError(f"no name list for {unknown}; books with one: {sorted(CHARACTER_NAMES)}")
    examples = []
    for p in paragraphs:
        if p.book not in books:
            continue
        names = set(CHARACTER_NAMES[p.book])
        for sentence in split_sentences(p.text):
            ws = words(sentence)
            tags = [int(w in names) for w in ws]
            if 3 <= len(ws) <= max_words and sum(tags) >= min_names:
                examples.append((ws, tags))
    random.Random(seed).shuffle(examples)
    return examples


def split_paragraphs(paragraphs, test_every: int = 5):
    """(train, test): every ``test_every``-th paragraph of each novel is held out for
    testing, the rest may be used for pre-training and fine-tuning. Taught in: 05_bert."""
    if not isinstance(test_every, int) or test_every < 2:
        raise ValueError(f"test_every must be an int >= 2, got {test_every!r}")
    train, test = [], []
    for p in paragraphs:
        (test if p.paragraph % test_every == 0 else train).append(p)
    return train, test


def book_passages(paragraphs, per_book: int, min_words: int = 25, seed: int = 0
                  ) -> list[tuple[str, int]]:
    """``per_book`` paragraphs of at least ``min_words`` words from each novel, as
    (text, index of the book in sorted order), shuffled. Taught in: 05_bert."""
    books = sorted({p.book for p in paragraphs})
    rng = random.Random(seed)
    chosen = []
    for label, book in enumerate(books):
        pool = [p for p in paragraphs if p.book == book and p.chapter > 0
                and len(p.text.split()) >= min_words]
        if len(pool) < per_book:
            raise ValueError(f"{book} has only {len(pool)} paragraphs of >= {min_words} words, "
                             f"asked for {per_book}")
        chosen += [(p.text, label) for p in rng.sample(pool, per_book)]
    rng.shuffle(chosen)
    return chosen


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


def encode_classification(tokenizer, texts: Sequence[str], labels: Sequence[int], max_len: int,
                          texts_b: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    """Tokenise (pairs of) texts, truncated and padded to ``max_len``: a dict of
    (count, max_len) tensors and labels (count,). Taught in: 05_bert."""
    if len(texts) != len(labels) or (texts_b is not None and len(texts_b) != len(texts)):
        raise ValueError(f"got {len(texts)} texts, {len(labels)} labels"
                         + ("" if texts_b is None else f" and {len(texts_b)} second texts"))
    enc = tokenizer(list(texts), None if texts_b is None else list(texts_b), truncation=True,
                    max_length=max_len, padding="max_length", return_tensors="pt")
    return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
            "attention_mask": enc["attention_mask"], "labels": torch.as_tensor(list(labels))}


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


def make_batches(tensors: Mapping[str, torch.Tensor], batch_size: int, shuffle: bool = False,
                 seed: int = 0):
    """Cut a dict of equally long tensors into batches (dicts), trimmed to the longest
    real sequence of each batch. With ``shuffle`` a function epoch -> batches (a new
    order each epoch, for ``training.train``), else a list. Taught in: 05_bert."""
    count = len(next(iter(tensors.values())))
    if any(len(t) != count for t in tensors.values()):
        raise ValueError(f"tensors of different lengths: { {k: len(t) for k, t in tensors.items()} }")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")

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
    return lambda epoch: cut(torch.randperm(count, generator=torch.Generator().manual_seed(seed + epoch)))


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


# -- pre-training end to end, and the shipped longer-trained checkpoint ------------------

def chapter_documents(paragraphs) -> list[list[str]]:
    """The novels as NSP 'documents': one list of sentences per chapter. Taught in: 05_bert."""
    documents: dict = {}
    for p in paragraphs:
        if p.chapter > 0:  # chapter 0 holds title lines
            documents.setdefault((p.book, p.chapter), []).extend(split_sentences(p.text))
    return [d for d in documents.values() if d]


def pretrain(model: BertForPreTraining, tokenizer, pairs, recipe: BertPretraining,
             steps: int | None = None, seed: int = 0, progress: bool = True):
    """Pre-train with MLM + NSP on ``pairs`` (from ``nsp_pairs``): AdamW, linear warm-up
    then linear decay to 0 over ``steps`` (default ``recipe.steps``). Returns the
    ``training.History`` and the ``PretrainingLog``. Taught in: 05_bert."""
    from course_utils.training import train
    from course_utils.transformer import warmup_scheduler
    steps = recipe.steps if steps is None else steps
    batches = pretraining_batches(tokenizer, pairs, recipe.batch_size, recipe.max_len, seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01, foreach=True)
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
    from course_utils.training import to_device
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


def save_pretrained(path, model: BertForPreTraining, tokenizer, info: Mapping) -> None:
    """Write the model (float16 weights), its config and its tokenizer to one file."""
    from dataclasses import asdict
    state = {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    torch.save({"config": asdict(model.cfg), "state_dict": state,
                "tokenizer": tokenizer.backend_tokenizer.to_str(), "info": dict(info)}, path)


def load_pretrained(path=None):
    """``(model, tokenizer, info)`` from ``save_pretrained``'s file; by default the shipped,
    checksum-verified ``data/small_bert.pt`` (made by scripts/pretrain_small_bert.py).
    Taught in: 05_bert."""
    from tokenizers import Tokenizer
    from course_utils.data import verified_path
    path = verified_path(SHIPPED_CHECKPOINT) if path is None else path
    saved = torch.load(path, map_location="cpu", weights_only=True)
    model = BertForPreTraining(BertConfig(**saved["config"]))
    model.load_state_dict({k: v.float() if v.is_floating_point() else v
                           for k, v in saved["state_dict"].items()})
    return model, _wrap_tokenizer(Tokenizer.from_str(saved["tokenizer"])), saved["info"]

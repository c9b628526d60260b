"""BERT: an encoder-only Transformer, pre-trained on raw text, then fine-tuned.

Taught in: 05_bert, 05b_bert_finetuning. Built from ``course_utils.transformer.EncoderLayer``
(04): a BERT is the encoder half of the Transformer with three embedding tables, two pre-training heads
(masked LM and next-sentence prediction) and, after pre-training, a small task head. This
module is the model, top to bottom:

- masked language modelling: ``mask_tokens`` (15 % chosen; of those 80 % [MASK], 10 % a
  random token, 10 % unchanged);
- the input representation: ``build_input`` ([CLS] a [SEP] b [SEP], token type ids,
  attention mask) and ``truncate_pair``;
- a small BERT: ``BertConfig`` (its recipes: ``course_utils.recipes``), ``BertEncoder``,
  ``BertForPreTraining``, ``pretraining_loss``; ``HFEncoder`` puts a Hugging Face encoder
  (all-MiniLM-L6-v2) behind the same interface;
- fine-tuning heads: ``SequenceClassifier`` and ``TokenClassifier``, ``classification_loss``;
  ``SpanExtractor``, ``span_loss`` and ``best_spans`` for extractive question answering.

Around it: ``course_utils.novels`` (sentences, next-sentence pairs and the four tasks built
from the shipped novels) and ``course_utils.bert_training`` (the WordPiece tokenizer,
batches, ``pretrain``, ``evaluate_pretraining``, ``predict`` and the shipped checkpoint).
A notebook imports each from where it lives (05 and 07: ``from course_utils import bert as B,
bert_training as BT, novels``).

Leaves out: whole-word and span masking, sentence-order prediction (ALBERT), dropping NSP
(RoBERTa), relative positions, the post-LN layout of the original (the small BERT here is
pre-LN, which trains without a long warm-up), GELU in the feed-forward layers (04's layers
use ReLU), mixed precision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence

import torch
from torch import nn

from course_utils.attention import causal_mask
from course_utils.checks import check_config, check_ids, check_tensor
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
        check_config(self, positive=("vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "max_len",
                                     "type_vocab_size"),
                     divides=[("d_model", "num_heads")], fractions=("dropout",))


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
            raise ValueError(f"input_ids holds sequences of {n} tokens, longer than max_len="
                             f"{self.position.num_embeddings}")
        positions = torch.arange(n, device=input_ids.device).expand_as(input_ids)
        return self.token(input_ids), self.segment(token_type_ids), self.position(positions)

    def forward(self, input_ids, token_type_ids):
        token, segment, position = self.parts(input_ids, token_type_ids)
        return self.dropout(self.norm(token + segment + position))


def _check_ids(input_ids, token_type_ids, attention_mask):
    sizes = {}
    check_ids("input_ids", input_ids, shape=("batch", "n"), sizes=sizes)
    token_type_ids = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
    attention_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
    check_ids("token_type_ids", token_type_ids, shape=("batch", "n"), sizes=sizes)
    check_tensor("attention_mask", attention_mask, shape=("batch", "n"), sizes=sizes)
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
    picks from its output; the base of the two fine-tuning models. Taught in: 05b_bert_finetuning."""

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
    attention_mask (batch, n) -> logits (batch, num_labels). Given a ``pooler`` (a module
    from d to d, such as a copy of ``BertForPreTraining.pooler``, trained by NSP), the head
    reads ``pooler([CLS])`` instead, as BERT's released code classifies. Taught in:
    05b_bert_finetuning."""

    def __init__(self, encoder: nn.Module, num_labels: int, dropout: float = 0.1,
                 pooler: nn.Module | None = None):
        super().__init__(encoder, num_labels, dropout)
        self.pooler = pooler

    def features(self, out):
        cls = out.last[:, 0]
        return cls if self.pooler is None else self.pooler(cls)


class TokenClassifier(EncoderWithHead):
    """Classify every token from its own vector: -> logits (batch, n, num_labels).
    Taught in: 05b_bert_finetuning."""

    def features(self, out):
        return out.last


class SpanExtractor(EncoderWithHead):
    """Extractive question answering (SQuAD style): for every token a *start* and an *end*
    score, the dot products of its vector with two learned vectors (Devlin et al.'s S and
    E): -> logits (batch, n, 2), ``[..., 0]`` start, ``[..., 1]`` end. Taught in: 05b_bert_finetuning."""

    def __init__(self, encoder: nn.Module, dropout: float = 0.1):
        super().__init__(encoder, 2, dropout)

    def features(self, out):
        return out.last


def _span_scores(logits: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if logits.dim() != 3 or logits.shape[-1] != 2:
        raise ValueError(f"span logits must be (batch, n, 2), got {tuple(logits.shape)}")
    if allowed.shape != logits.shape[:2]:
        raise ValueError(f"allowed must be (batch, n) = {tuple(logits.shape[:2])}, got {tuple(allowed.shape)}")
    if not bool(allowed.any(1).all()):
        raise ValueError("every example needs at least one token a span may use (allowed is all False in a row)")
    hidden = torch.finfo(logits.dtype).min
    return (logits[..., 0].masked_fill(~allowed, hidden), logits[..., 1].masked_fill(~allowed, hidden))


def span_loss(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The loss of a ``SpanExtractor``: the mean of two cross-entropies, of the start scores
    against ``batch["start"]`` and of the end scores against ``batch["end"]`` (token
    positions), each a softmax over the tokens ``batch["span_mask"]`` allows (the
    passage's pieces). Taught in: 05b_bert_finetuning."""
    logits = model(batch["input_ids"], batch.get("token_type_ids"), batch.get("attention_mask"))
    start, end = _span_scores(logits, batch["span_mask"].bool())
    return (nn.functional.cross_entropy(start, batch["start"]) + nn.functional.cross_entropy(end, batch["end"])) / 2


def best_spans(logits: torch.Tensor, allowed: torch.Tensor, max_tokens: int = 8
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The answer span of each example: the positions (start, end) with start <= end <
    start + ``max_tokens``, both allowed, that maximise start score + end score.
    logits (batch, n, 2), allowed (batch, n) -> two (batch,) tensors. Taught in: 05b_bert_finetuning."""
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
    start, end = _span_scores(logits.float(), allowed.bool())
    n = logits.shape[1]
    score = start.unsqueeze(2) + end.unsqueeze(1)                 # (batch, start, end)
    ok = torch.ones(n, n, dtype=torch.bool, device=logits.device).triu().tril(max_tokens - 1)
    ok = ok & allowed.bool().unsqueeze(2) & allowed.bool().unsqueeze(1)
    best = score.masked_fill(~ok, float("-inf")).flatten(1).argmax(1)
    return best // n, best % n


def classification_loss(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of a ``SequenceClassifier`` ((batch,) labels) or a
    ``TokenClassifier`` ((batch, n) labels, -100 where not scored). Taught in: 05b_bert_finetuning."""
    logits = model(batch["input_ids"], batch.get("token_type_ids"), batch.get("attention_mask"))
    return nn.functional.cross_entropy(logits.flatten(0, -2), batch["labels"].flatten(),
                                       ignore_index=IGNORE_INDEX)

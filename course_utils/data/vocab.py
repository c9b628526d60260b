"""Words to ids to batches: word-level tokenisation, vocabularies, the pairs of a translation
task with their vocabularies (``TranslationData``), padded length-bucketed batches, the check
of a source batch every encoder makes, and the length buckets the evaluation reports by.

Taught in: 01_seq2seq_bottleneck (vocabularies, padding, batches). Leaves out: subword
tokenisation (see ``course_utils.bpe``, 06); where the pairs come from
(``course_utils.data.synthetic``, ``course_utils.data.corpora``).
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

from course_utils.checks import check_ids, check_list, check_positive, check_tensor

# --------------------------------------------------------------------------------------
# Special tokens and word-level tokenisation
# --------------------------------------------------------------------------------------

PAD, SOS, EOS, UNK = "<pad>", "<sos>", "<eos>", "<unk>"
SPECIALS = (PAD, SOS, EOS, UNK)
PAD_ID, SOS_ID, EOS_ID, UNK_ID = range(4)

_PUNCT = re.compile(r"([.,!?;:¿¡()\"«»“”\-–—])")
_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Lower-case, NFC-normalise, put spaces around punctuation and hyphens, squeeze spaces.

    Taught in: 01_seq2seq_bottleneck.
    """
    if not isinstance(text, str):
        raise TypeError(f"normalize expects a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text).lower().replace("’", "'")
    text = _PUNCT.sub(r" \1 ", text)
    return _SPACES.sub(" ", text).strip()


def tokenize(text: str) -> list[str]:
    """Word-level tokens of ``normalize(text)``. Taught in: 01_seq2seq_bottleneck."""
    return normalize(text).split()


class Vocab:
    """Word <-> id mapping with ``<pad>=0 <sos>=1 <eos>=2 <unk>=3``.

    Taught in: 01_seq2seq_bottleneck.
    """

    def __init__(self, tokens: Iterable[str] = ()):
        self.itos: list[str] = list(SPECIALS)  # id -> token
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}  # token -> id
        for token in tokens:
            if token not in self.stoi:
                self.stoi[token] = len(self.itos)
                self.itos.append(token)

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1,
              max_size: int | None = None) -> "Vocab":
        """Vocabulary of the tokens seen at least ``min_freq`` times (most frequent first)."""
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, got {min_freq}")
        counts = Counter()
        for tokens in sentences:
            if isinstance(tokens, str):
                raise TypeError("Vocab.build expects token lists, got a str; use tokenize() first")
            counts.update(tokens)
        ranked = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS),
                        key=lambda t: (-counts[t], t))
        if max_size is not None:
            ranked = ranked[: max(0, max_size - len(SPECIALS))]
        return cls(ranked)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __getitem__(self, token: str) -> int:
        return self.stoi.get(token, UNK_ID)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, first={self.itos[4:10]})"

    def encode(self, tokens: str | Sequence[str], add_sos: bool = False,
               add_eos: bool = True) -> list[int]:
        """Ids of ``tokens`` (a str is tokenised first); unknown words become ``<unk>``."""
        if isinstance(tokens, str):
            tokens = tokenize(tokens)
        tokens = check_list("tokens", tokens, "str tokens")
        if tokens and not isinstance(tokens[0], str):
            raise TypeError(f"tokens must be a str or a list of str tokens, got a list of "
                            f"{type(tokens[0]).__name__} (ids? use decode for ids)")
        ids = [self[t] for t in tokens]
        return ([SOS_ID] if add_sos else []) + ids + ([EOS_ID] if add_eos else [])

    def decode(self, ids: Sequence[int] | torch.Tensor, strip: bool = True) -> list[str]:
        """Tokens of ``ids``; with ``strip``, stop at ``<eos>`` and drop ``<pad>``/``<sos>``."""
        if isinstance(ids, torch.Tensor):
            check_tensor("ids", ids, dims=1, dtype="int")
            ids = ids.tolist()
        ids = check_list("ids", ids, "int ids")
        tokens = []
        for i in ids:
            if not 0 <= i < len(self.itos):
                raise IndexError(f"id {i} is outside the vocabulary (size {len(self)})")
            if strip and i == EOS_ID:
                break
            if strip and i in (PAD_ID, SOS_ID):
                continue
            tokens.append(self.itos[i])
        return tokens

    def to_list(self) -> list[str]:
        """The id -> token list (what a checkpoint stores)."""
        return list(self.itos)

    @classmethod
    def from_list(cls, itos: Sequence[str]) -> "Vocab":
        """Inverse of ``to_list``."""
        if tuple(itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary list must start with {SPECIALS}, got {tuple(itos[:4])}")
        return cls(itos[len(SPECIALS):])


# --------------------------------------------------------------------------------------
# Padded batches and length buckets
# --------------------------------------------------------------------------------------

def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists into a (batch, max_len) long tensor; also return lengths (batch,)."""
    seqs = check_list("seqs", seqs, "id lists")
    if len(seqs) == 0:
        raise ValueError("seqs must hold at least one sequence, got none")
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    if (lengths == 0).any():
        raise ValueError(f"seqs holds an empty sequence at positions {torch.nonzero(lengths == 0).flatten().tolist()}")
    longest = int(lengths.max())
    # one tensor from padded lists: the same as filling a (batch, max_len) tensor row by
    # row, without a small tensor per row
    rows = [seq.tolist() if torch.is_tensor(seq) else list(seq) for seq in seqs]
    out = torch.tensor([row + [pad_id] * (longest - len(row)) for row in rows], dtype=torch.long)
    return out, lengths


@dataclass
class Batch:
    """A padded batch of pairs. ``src``: (batch, src_len) ids ending in <eos>;
    ``tgt``: (batch, tgt_len) ids ``<sos> ... <eos>``; lengths count real tokens."""
    src: torch.Tensor
    src_lengths: torch.Tensor
    tgt: torch.Tensor
    tgt_lengths: torch.Tensor
    index: torch.Tensor  # (batch,) positions of the pairs in the dataset they came from

    def to(self, device) -> "Batch":
        """The same batch on ``device``."""
        return Batch(*(getattr(self, f).to(device) for f in
                       ("src", "src_lengths", "tgt", "tgt_lengths", "index")))

    def __len__(self) -> int:
        return self.src.shape[0]

    @property
    def num_tokens(self) -> int:
        """Target tokens predicted in this batch (excludes <sos> and padding)."""
        return int((self.tgt_lengths - 1).sum())


def _check_pairs(name: str, pairs) -> list[tuple[str, str]]:
    """``pairs`` as a list, refused unless each item is a (source, target) pair of strings."""
    pairs = check_list(name, pairs, "(source, target) pairs of str")
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(s, str) for s in pair)):
            raise TypeError(f"{name}[{i}] must be a (source, target) pair of str, got {pair!r:.60}")
    return pairs


class TranslationData:
    """Tokenised pairs and their vocabularies; makes padded, length-bucketed batches.

    Taught in: 01_seq2seq_bottleneck.
    """

    def __init__(self, pairs: Sequence[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab):
        self.pairs = _check_pairs("pairs", pairs)
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.src_tokens = [tokenize(s) for s, _ in self.pairs]
        self.tgt_tokens = [tokenize(t) for _, t in self.pairs]
        self.src_ids = [src_vocab.encode(t) for t in self.src_tokens]
        self.tgt_ids = [tgt_vocab.encode(t, add_sos=True) for t in self.tgt_tokens]

    @classmethod
    def build(cls, train_pairs: Sequence[tuple[str, str]], min_freq: int = 1,
              max_size: int | None = None) -> "TranslationData":
        """Training data with vocabularies built from it."""
        train_pairs = _check_pairs("train_pairs", train_pairs)
        src_vocab = Vocab.build((tokenize(s) for s, _ in train_pairs), min_freq, max_size)
        tgt_vocab = Vocab.build((tokenize(t) for _, t in train_pairs), min_freq, max_size)
        return cls(train_pairs, src_vocab, tgt_vocab)

    def with_pairs(self, pairs: Sequence[tuple[str, str]]) -> "TranslationData":
        """Other pairs (validation, test) encoded with these vocabularies."""
        return TranslationData(pairs, self.src_vocab, self.tgt_vocab)

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def src_lengths(self) -> list[int]:
        """Source lengths in words (without <eos>)."""
        return [len(t) for t in self.src_tokens]

    def batch(self, indices: Sequence[int]) -> Batch:
        """The padded batch of the pairs at ``indices``."""
        src, src_len = pad_sequences([self.src_ids[i] for i in indices])
        tgt, tgt_len = pad_sequences([self.tgt_ids[i] for i in indices])
        return Batch(src, src_len, tgt, tgt_len, torch.as_tensor(list(indices), dtype=torch.long))

    def batches(self, batch_size: int, shuffle: bool = False, by_length: bool = True,
                seed: int = 0, drop_last: bool = False) -> list[Batch]:
        """All pairs in padded batches.

        ``by_length`` groups sentences of similar source length (little padding: each
        batch is a slice of the pairs sorted by length); ``shuffle`` then shuffles the
        order of the batches (and which pairs share a batch, within pools of 50 batches).
        """
        check_positive("batch_size", batch_size)
        rng = random.Random(seed)
        order = list(range(len(self)))
        if shuffle:
            rng.shuffle(order)
        if by_length:
            pool = batch_size * 50
            order = [i for start in range(0, len(order), pool)
                     for i in sorted(order[start:start + pool],
                                     key=lambda i: (len(self.src_ids[i]), len(self.tgt_ids[i])))]
        chunks = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
        if drop_last and chunks and len(chunks[-1]) < batch_size:
            chunks.pop()
        if shuffle:
            rng.shuffle(chunks)
        return [self.batch(c) for c in chunks]


def check_src_batch(src: torch.Tensor, src_lengths, vocab_size: int | None = None,
                    sizes: dict | None = None) -> torch.Tensor:
    """Raise a clear error unless ``src`` is (batch, src_len) token ids (in 0..vocab_size - 1
    if given) and ``src_lengths`` (batch,) integer lengths (a list is accepted); returns the
    lengths as a tensor on ``src``'s device. On the CPU the lengths are also checked to lie in
    1..src_len. ``sizes``: a dict that records batch and src_len (see ``checks.check_tensor``)."""
    sizes = {} if sizes is None else sizes
    check_ids("src", src, vocab_size, shape=("batch", "src_len"), sizes=sizes)
    if isinstance(src_lengths, (list, tuple)):
        src_lengths = torch.tensor(src_lengths, dtype=torch.long, device=src.device)
    check_tensor("src_lengths", src_lengths, dtype="int", shape=("batch",), sizes=sizes)
    if src_lengths.device.type == "cpu" and src_lengths.numel():
        low, high = src_lengths.min().item(), src_lengths.max().item()
        if low < 1 or high > src.shape[1]:
            raise ValueError(f"src_lengths must lie in 1..{src.shape[1]} (src_len), got {low}..{high}")
    return src_lengths


DEFAULT_BUCKET_EDGES = (0, 10, 20, 30)


def bucket_label(length: int, edges: Sequence[int] = DEFAULT_BUCKET_EDGES) -> str:
    """Name of the length bucket ``length`` falls in: '0-9', '10-19', ..., '30+'."""
    if length < edges[0]:
        raise ValueError(f"length {length} is below the first bucket edge {edges[0]}")
    for lo, hi in zip(edges, edges[1:]):
        if lo <= length < hi:
            return f"{lo}-{hi - 1}"
    return f"{edges[-1]}+"


def bucket_labels(edges: Sequence[int] = DEFAULT_BUCKET_EDGES) -> list[str]:
    """All bucket names for ``edges``, shortest first."""
    if list(edges) != sorted(set(edges)):
        raise ValueError(f"bucket edges must be strictly increasing, got {list(edges)}")
    return [f"{lo}-{hi - 1}" for lo, hi in zip(edges, edges[1:])] + [f"{edges[-1]}+"]

"""Data for the course: the synthetic translation task, the shipped corpora, vocabularies
and padded, length-bucketed batches.

Taught in: 00_welcome (the data at a glance), 01_seq2seq_bottleneck (vocabularies,
padding, batches). Leaves out: subword tokenisation (see ``course_utils.bpe``, 06).

Data card: the synthetic task (``synthetic_pairs``, ``load_synthetic``)
-------------------------------------------------------------------------
English -> German numbers, counts, dates and events, written out in words, generated
deterministically from the installed packages num2words (number words) and babel
(month and weekday names). Four kinds of sentence::

    number   three hundred and twenty - one      -> drei hundert ein und zwanzig
    count    twenty - one apples                 -> ein und zwanzig äpfel
    date     monday , march third , nineteen ninety - seven
             -> montag , der dritte märz neunzehn hundert sieben und neunzig
    event    twenty - one apples arrived on monday , march third , nineteen ninety - seven
             -> am montag , dem dritten märz neunzehn hundert sieben und neunzig
                kamen ein und zwanzig äpfel an

German compounds are split into their parts (``einundzwanzig`` -> ``ein und zwanzig``) so
that every alignment can be seen: *reordering* inside numbers (twenty - one -> ein und
zwanzig), inside dates (march third -> dritte märz) and across the sentence (the count
moves behind the date, the verb to second place and its prefix ``an`` to the end);
*one-to-many* (nineteen -> neunzehn hundert, arrived -> kamen ... an, the article
der/dem for nothing) and *many-to-one* (thirty - first -> ein und dreißigste is
many-to-many). Counts of 1 take singular nouns, ``ein``/``eine`` by gender and ``kam``.
Numbers are drawn with 1 to 9 digits uniformly, dates from 1800-2099 (the weekday is the
real one). Source sentences have 3 to about 35 tokens, which is what shows the
bottleneck of a fixed-size context. Everything is lower case; punctuation and hyphens
are separate tokens. The German is formulaic but correct.

Splits are fixed by the seed: test and validation sentences are drawn first and no
source sentence of either appears in the training split, whatever its size.

Data cards of the shipped corpora: ``data/es_en_bible.md`` and ``data/austen_novels.md``.
"""

from __future__ import annotations

import csv
import datetime as _dt
import functools
import gzip
import hashlib
import json
import os
import random
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, NamedTuple, Sequence

import torch

from course_utils.checks import check_ids, check_list, check_positive, check_tensor
from course_utils.files import write_atomic

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


# --------------------------------------------------------------------------------------
# The synthetic English -> German task
# --------------------------------------------------------------------------------------

# (English singular, English plural, German singular, German plural, German gender)
NOUNS = (
    ("apple", "apples", "apfel", "äpfel", "m"),
    ("book", "books", "buch", "bücher", "n"),
    ("cat", "cats", "katze", "katzen", "f"),
    ("letter", "letters", "brief", "briefe", "m"),
    ("ship", "ships", "schiff", "schiffe", "n"),
    ("bird", "birds", "vogel", "vögel", "m"),
    ("flower", "flowers", "blume", "blumen", "f"),
    ("car", "cars", "auto", "autos", "n"),
    ("guest", "guests", "gast", "gäste", "m"),
    ("parcel", "parcels", "paket", "pakete", "n"),
    ("coin", "coins", "münze", "münzen", "f"),
    ("student", "students", "student", "studenten", "m"),
)

# German number words are split into these parts (longest first wins).
_DE_PARTS = sorted(
    "null eins ein eine zwei drei vier fünf sechs sieben acht neun zehn elf zwölf "
    "dreizehn vierzehn fünfzehn sechzehn siebzehn achtzehn neunzehn zwanzig dreißig vierzig "
    "fünfzig sechzig siebzig achtzig neunzig hundert tausend und million millionen "
    "erste zweite dritte vierte fünfte sechste siebte achte neunte zehnte elfte zwölfte "
    "dreizehnte vierzehnte fünfzehnte sechzehnte siebzehnte achtzehnte neunzehnte "
    "zwanzigste dreißigste".split(), key=len, reverse=True)

#: German unit and tens words of the synthetic task with their English counterparts: where
#: attention should look when the German word is written (02 and 04 measure it).
NUMBER_COUNTERPARTS: dict[str, str] = dict(zip(
    "ein zwei drei vier fünf sechs sieben acht neun "
    "zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig".split(),
    "one two three four five six seven eight nine "
    "twenty thirty forty fifty sixty seventy eighty ninety".split()))

SYNTHETIC_KINDS = ("number", "count", "date", "event")
_KIND_WEIGHTS = (0.2, 0.2, 0.2, 0.4)


@functools.lru_cache(maxsize=None)
def split_german_number(word: str) -> tuple[str, ...]:
    """Split a German number word into parts: 'einundzwanzig' -> ('ein', 'und', 'zwanzig')."""
    word = word.lower()
    best = {0: ()}  # prefix length -> fewest parts covering it
    for end in range(1, len(word) + 1):
        options = [best[start] + (p,) for p in _DE_PARTS
                   for start in [end - len(p)] if start in best and word[start:end] == p]
        if options:
            best[end] = min(options, key=len)
    if len(word) not in best:
        raise ValueError(f"cannot split German number word {word!r} into known parts")
    return best[len(word)]


@functools.lru_cache(maxsize=None)
def _words(number: int, lang: str, to: str = "cardinal") -> str:
    """Number words (num2words), German compounds split, hyphens and commas spaced."""
    from num2words import num2words
    text = num2words(number, lang=lang, to=to).lower()
    if lang == "de":
        text = " ".join(" ".join(split_german_number(w)) for w in text.split())
    return normalize(text)


@functools.lru_cache(maxsize=None)
def _calendar_names(lang: str) -> tuple[dict, dict]:
    """Month (1-12) and weekday (0=Monday) names from babel's locale data, lower case."""
    from babel.dates import get_day_names, get_month_names
    months = {k: v.lower() for k, v in get_month_names("wide", locale=lang).items()}
    days = {k: v.lower() for k, v in get_day_names("wide", locale=lang).items()}
    return months, days


def _draw_number(rng: random.Random) -> int:
    digits = rng.randint(1, 9)
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits - 1)


def _count_phrase(n: int, noun) -> tuple[str, str]:
    en_sg, en_pl, de_sg, de_pl, gender = noun
    if n == 1:
        return f"one {en_sg}", f"{'eine' if gender == 'f' else 'ein'} {de_sg}"
    return f"{_words(n, 'en')} {en_pl}", f"{_words(n, 'de')} {de_pl}"


def _date_phrases(date: _dt.date) -> tuple[str, str, str]:
    """English date, German nominative date ('der dritte ...'), German dative ('dem dritten ...')."""
    en_months, en_days = _calendar_names("en")
    de_months, de_days = _calendar_names("de")
    en_year, de_year = _words(date.year, "en", "year"), _words(date.year, "de", "year")
    en_day, de_day = _words(date.day, "en", "ordinal"), _words(date.day, "de", "ordinal")
    wd = date.weekday()
    en = f"{en_days[wd]} , {en_months[date.month]} {en_day} , {en_year}"
    de_nom = f"{de_days[wd]} , der {de_day} {de_months[date.month]} {de_year}"
    de_dat = f"{de_days[wd]} , dem {de_day}n {de_months[date.month]} {de_year}"
    return en, de_nom, de_dat


def synthetic_example(rng: random.Random, kind: str | None = None) -> tuple[str, str]:
    """One (English, German) pair of the synthetic task, drawn with ``rng``."""
    kind = kind or rng.choices(SYNTHETIC_KINDS, _KIND_WEIGHTS)[0]
    if kind not in SYNTHETIC_KINDS:
        raise ValueError(f"kind must be one of {SYNTHETIC_KINDS}, got {kind!r}")
    n, noun = _draw_number(rng), rng.choice(NOUNS)
    date = _dt.date(1800, 1, 1) + _dt.timedelta(days=rng.randrange(109573))  # up to 2099-12-31
    if kind == "number":
        return _words(n, "en"), _words(n, "de")
    if kind == "count":
        return _count_phrase(n, noun)
    en_date, de_nom, de_dat = _date_phrases(date)
    if kind == "date":
        return en_date, de_nom
    en_count, de_count = _count_phrase(n, noun)
    verb = "kam" if n == 1 else "kamen"
    return (f"{en_count} arrived on {en_date}", f"am {de_dat} {verb} {de_count} an")


_NOUN_WORDS = frozenset(w for noun in NOUNS for w in noun[:2])  # English singular and plural


def synthetic_kind(source: str) -> str:
    """Which of ``SYNTHETIC_KINDS`` an English source sentence of the synthetic task is
    ('event' has *arrived*, a 'date' a weekday, a 'count' a noun, a 'number' none of these).
    Taught in: 01_seq2seq_bottleneck (accuracy by kind and length)."""
    words = source.split()
    if not words:
        raise ValueError("synthetic_kind needs a source sentence, got an empty string")
    if "arrived" in words:
        return "event"
    if set(_calendar_names("en")[1].values()).intersection(words):
        return "date"
    return "count" if _NOUN_WORDS.intersection(words) else "number"


def synthetic_pairs(num_pairs: int, seed: int = 0, min_len: int = 3,
                    exclude: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``num_pairs`` distinct pairs with at least ``min_len`` source tokens, none of whose
    source sentences is in ``exclude``. Deterministic given the seed."""
    if num_pairs < 0:
        raise ValueError(f"num_pairs must be >= 0, got {num_pairs}")
    rng = random.Random(seed)
    seen = set(exclude)
    pairs = []
    while len(pairs) < num_pairs:
        src, tgt = synthetic_example(rng)
        if src in seen or len(src.split()) < min_len:
            continue
        seen.add(src)
        pairs.append((src, tgt))
    return pairs


class Splits(NamedTuple):
    """Train, validation and test pairs."""
    train: list
    valid: list
    test: list


SYNTHETIC_VERSION = 1  # bump when the generator changes: it invalidates the caches


def load_synthetic(num_train: int = 20000, num_valid: int = 1000, num_test: int = 1000,
                   seed: int = 0, cache: bool = True) -> Splits:
    """Fixed splits of the synthetic task: test and validation do not depend on ``num_train``
    and share no source sentence with training. Taught in: 00_welcome, 01.

    Generating 20k pairs takes a few seconds (num2words); with ``cache`` the result is kept
    in memory and in ``.cache/`` beside ``data/`` (git-ignored), keyed by the arguments and
    the versions of the generator, num2words and babel.
    """
    key = (num_train, num_valid, num_test, seed)
    splits = (Splits(*(list(split) for split in _cached_synthetic(*key))) if cache
              else _generate_synthetic(*key))
    return _smoke_capped(splits)


def _generate_synthetic(num_train, num_valid, num_test, seed) -> Splits:
    test = synthetic_pairs(num_test, seed=seed)
    valid = synthetic_pairs(num_valid, seed=seed + 1, exclude=(s for s, _ in test))
    train = synthetic_pairs(num_train, seed=seed + 2,
                            exclude=[s for s, _ in test] + [s for s, _ in valid])
    return Splits(train, valid, test)


def _smoke_capped(splits: Splits) -> Splits:
    """In a smoke test (``runtime.smoke_eval_size``), only the first test pairs."""
    from course_utils.runtime import smoke_eval_size
    size = smoke_eval_size()
    return splits if size is None else Splits(splits.train, splits.valid, splits.test[:size])


@functools.lru_cache(maxsize=8)
def _cached_synthetic(num_train, num_valid, num_test, seed) -> tuple:
    from importlib.metadata import version
    tag = f"v{SYNTHETIC_VERSION}-n2w{version('num2words')}-babel{version('babel')}"
    path = data_dir().parent / ".cache" / f"synthetic-{tag}-{num_train}-{num_valid}-{num_test}-{seed}.json.gz"
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            splits = json.load(f)
        return tuple(tuple(map(tuple, split)) for split in splits)
    except (OSError, ValueError, EOFError):
        pass  # not cached yet, or damaged: generate
    splits = _generate_synthetic(num_train, num_valid, num_test, seed)
    try:  # atomic: parallel notebooks never read half a file
        write_atomic(path, gzip.compress(json.dumps(splits, ensure_ascii=False).encode("utf-8")))
    except OSError:
        pass  # a read-only checkout still works, only slower
    return tuple(tuple(map(tuple, split)) for split in splits)


# --------------------------------------------------------------------------------------
# Shipped corpora: checksum-verified loading
# --------------------------------------------------------------------------------------

REBUILD = {
    "es_en_bible.tsv.gz": "python scripts/build_es_en_corpus.py",
    "austen_novels.tsv.gz": "python scripts/build_english_text.py",
    "small_bert.pt": "python scripts/pretrain_small_bert.py",
    "small_gpt.pt": "python scripts/pretrain_small_gpt.py",
    "es_en_attention.pt": "python scripts/train_es_en_attention.py",
}


class DataChecksumError(RuntimeError):
    """A shipped data file does not match its recorded sha256."""


def data_dir() -> Path:
    """Folder of the shipped data: ``$COURSE_DATA_DIR`` or the repository's ``data/``."""
    return Path(os.environ.get("COURSE_DATA_DIR", Path(__file__).resolve().parent.parent / "data"))


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def recorded_checksums(folder: str | Path | None = None) -> dict[str, str]:
    """File name -> sha256 from ``SHA256SUMS`` (the format ``sha256sum -c`` reads)."""
    path = Path(folder or data_dir()) / "SHA256SUMS"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: it records the checksums of the shipped data")
    sums = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*")] = digest
    return sums


def verified_path(name: str, folder: str | Path | None = None) -> Path:
    """Path of shipped file ``name`` after checking it exists and matches its sha256."""
    folder = Path(folder or data_dir())
    path = folder / name
    rebuild = f"`make data` (or `{REBUILD.get(name, 'see the data card')}`)"
    if not path.exists():
        raise FileNotFoundError(f"shipped data file {path} is missing; restore it from git "
                                f"(git checkout -- data/{name}) or rebuild it with {rebuild}")
    expected = recorded_checksums(folder).get(name)
    if expected is None:
        raise DataChecksumError(f"{name} has no line in {folder / 'SHA256SUMS'}")
    actual = sha256_file(path)
    if actual != expected:
        raise DataChecksumError(f"{path} is damaged or changed: sha256 expected {expected}, "
                                f"got {actual}; restore it from git or rebuild it with {rebuild}")
    return path


def _read_tsv(name: str, folder=None) -> list[dict]:
    path = verified_path(name, folder)
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


@functools.lru_cache(maxsize=4)
def _load_es_en_rows(folder) -> tuple:
    return tuple((r["ref"], r["en"], r["es"]) for r in _read_tsv("es_en_bible.tsv.gz", folder))


def load_es_en(max_len: int | None = 20, folder=None) -> list[tuple[str, str, str]]:
    """The English-Spanish verse pairs as (ref, english, spanish), checksum-verified; with
    ``max_len``, only pairs of at most that many words on both sides. Data card:
    data/es_en_bible.md. Taught in: 00_welcome, 02 (full profile)."""
    rows = _load_es_en_rows(str(folder or data_dir()))
    if max_len is None:
        return list(rows)
    return [r for r in rows if len(r[1].split()) <= max_len and len(r[2].split()) <= max_len]


def es_en_splits(max_len: int | None = 20, num_valid: int = 500, num_test: int = 500,
                 seed: int = 0, folder=None) -> Splits:
    """Fixed random train/valid/test splits of the (english, spanish) pairs. A verse text that
    recurs ("Yahweh spoke to Moses, saying," 70 times) is kept once, before splitting: a
    source sentence in the test split is never one seen in training."""
    pairs, seen = [], set()
    for _, en, es in load_es_en(max_len, folder):
        if en not in seen:      # the first occurrence (in canonical order) of each English verse
            seen.add(en)
            pairs.append((en, es))
    if num_valid + num_test >= len(pairs):
        raise ValueError(f"num_valid + num_test = {num_valid + num_test} leaves no training "
                         f"pairs out of {len(pairs)}")
    random.Random(seed).shuffle(pairs)
    return _smoke_capped(Splits(pairs[num_valid + num_test:], pairs[num_test:num_test + num_valid],
                                pairs[:num_test]))


class Paragraph(NamedTuple):
    """One paragraph of a novel."""
    book: str
    chapter: int
    paragraph: int
    text: str


@functools.lru_cache(maxsize=4)
def _load_austen(folder) -> tuple:
    return tuple(Paragraph(r["book"], int(r["chapter"]), int(r["paragraph"]), r["text"])
                 for r in _read_tsv("austen_novels.tsv.gz", folder))


def load_english_text(folder=None) -> list[Paragraph]:
    """Paragraphs of six public-domain novels by Jane Austen, checksum-verified.
    Data card: data/austen_novels.md. Taught in: 05_bert, 06_bpe."""
    return list(_load_austen(str(folder or data_dir())))


# --------------------------------------------------------------------------------------
# Co-occurrence: which words go together across a parallel corpus (00's alignment sketch)
# --------------------------------------------------------------------------------------

def association_lexicon(pairs: Sequence[tuple[str, str]], max_pairs: int = 4000) -> dict[str, dict[str, float]]:
    """For each target word, the Dice association 2·c(s, t) / (c(s) + c(t)) with every source
    word it co-occurs with (counted once per sentence pair, over the first ``max_pairs``):
    an alignment sketch learned from co-occurrence alone, no model. Taught in: 00_welcome."""
    src_count, tgt_count, both = Counter(), Counter(), Counter()
    for src, tgt in pairs[:max_pairs]:
        s, t = set(tokenize(src)), set(tokenize(tgt))
        src_count.update(s)
        tgt_count.update(t)
        both.update((a, b) for a in s for b in t)
    lexicon: dict[str, dict[str, float]] = {}
    for (a, b), n in both.items():
        lexicon.setdefault(b, {})[a] = 2 * n / (src_count[a] + tgt_count[b])
    return lexicon


def alignment_sketch(src: str, tgt: str, lexicon: Mapping[str, Mapping[str, float]]) -> list[tuple[str, str, float]]:
    """(target word, its most associated source word in this pair, Dice) for each target word."""
    s = tokenize(src)
    out = []
    for b in tokenize(tgt):
        scores = lexicon.get(b, {})
        best = max(s, key=lambda a: scores.get(a, 0.0))
        out.append((b, best, scores.get(best, 0.0)))
    return out


# --------------------------------------------------------------------------------------
# Images: scikit-learn's handwritten digits
# --------------------------------------------------------------------------------------


def check_images(images, what: str = "images") -> None:
    """A clear error unless ``images`` is a 4-D tensor (batch, channels, height, width)."""
    check_tensor(what, images, dtype="float", shape=("batch", "channels", "height", "width"))


class ImageSplit(NamedTuple):
    """Images (count, 1, 8, 8) in [0, 1] and their labels (count,) int64."""
    images: torch.Tensor
    labels: torch.Tensor


def load_digit_images(num_valid: int = 180, num_test: int = 360, seed: int = 0) -> Splits:
    """scikit-learn's 1,797 handwritten digits (8x8 pixels, 17 grey levels, scaled to [0, 1];
    UCI ML, Alpaydin & Kaynak; installed with scikit-learn, nothing downloads) in fixed
    stratified train, valid and test splits (each an ``ImageSplit``). Taught in: 08_vision_transformer."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    if num_valid < 10 or num_test < 10 or num_valid + num_test > len(labels) - 10 * 10:
        raise ValueError(f"num_valid and num_test must be at least 10 each and leave 100 training "
                         f"images of the {len(labels)}, got {num_valid} and {num_test}")
    index = torch.arange(len(labels)).numpy()
    rest, test = train_test_split(index, test_size=num_test, stratify=labels.numpy(), random_state=seed)
    train, valid = train_test_split(rest, test_size=num_valid, stratify=labels.numpy()[rest],
                                    random_state=seed + 1)
    return Splits(*(ImageSplit(images[torch.as_tensor(i)], labels[torch.as_tensor(i)])
                    for i in (train, valid, test)))

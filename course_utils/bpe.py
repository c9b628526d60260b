"""Tokenisation from scratch: simple tokenisers, byte-pair encoding (BPE, character- and
byte-level) and WordPiece.

Taught in: 06_bpe.
Scope: the four families of tokenisers of the slides (whitespace, character, rule-based,
subword); a BPE trainer that keeps pair counts up to date instead of recounting the
corpus at every merge (``train_bpe``) and the slow loop of the slides it replaces
(``train_bpe_naive``); a ``BPETokenizer`` that encodes, decodes and replays its merges;
WordPiece's likelihood score and its greedy longest-match-first encoder.
Leaves out: special tokens beyond ``[UNK]``, normalisation (NFKC, lower-casing), dropout
and unigram/SentencePiece models, saving to the Hugging Face JSON format.

Tie-breaking. Two pairs often have the same count. Hugging Face ``tokenizers`` then takes
the pair whose token *ids* come first, ids being given in this order: the initial
alphabet sorted by code point, then every new token in the order it was created. Both
trainers here do the same, so they learn the very same merges as ``tokenizers``'
``BpeTrainer`` on the same word counts (checked in tests/test_bpe.py).
"""

from __future__ import annotations

import functools
import heapq
import re
from collections import Counter, defaultdict
from typing import Iterable, Mapping, Sequence

UNK_TOKEN = "[UNK]"


# --------------------------------------------------------------------------------------
# Pre-tokenisation: the simple tokenisers of the slides
# --------------------------------------------------------------------------------------

#: Rule-based: runs of word characters, or runs of punctuation (what
#: ``tokenizers.pre_tokenizers.Whitespace`` splits on; BERT makes each punctuation mark a
#: token of its own). Whitespace is dropped.
WORD_PATTERN = re.compile(r"\w+|[^\w\s]+")

#: GPT-2-style pieces: a word keeps the space in front of it (" the"), numbers and
#: punctuation runs are separate, contractions ('s, 'll) too. The last alternative
#: catches anything else, so the pieces always join back into the text. GPT-2 (and
#: ``tokenizers.pre_tokenizers.ByteLevel``) write letters as \p{L}, which Python's ``re``
#: lacks; ``[^\W\d_]`` gives the same pieces on the course's texts (checked in 06) but can
#: differ on underscores and on number signs glued to a word (``x²``: ``\w`` counts ``²``).
PIECE_PATTERN = re.compile(r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+|[\s\S]""")


def _check_text(text, name: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    return text


def whitespace_tokenize(text: str) -> list[str]:
    """Split on whitespace only: 'Hello, world!' -> ['Hello,', 'world!']. Taught in: 06_bpe."""
    return _check_text(text).split()


def char_tokenize(text: str) -> list[str]:
    """One token per character, spaces included. Taught in: 06_bpe."""
    return list(_check_text(text))


def regex_tokenize(text: str) -> list[str]:
    """Rule-based: words and punctuation runs ('Hello, world!' -> Hello , world !).
    Taught in: 06_bpe."""
    return WORD_PATTERN.findall(_check_text(text))


def pretokenize(text: str) -> list[str]:
    """GPT-2-style pieces that BPE never merges across; ``''.join(pieces) == text``.
    Taught in: 06_bpe."""
    return PIECE_PATTERN.findall(_check_text(text))


# --------------------------------------------------------------------------------------
# Bytes as printable characters (GPT-2's table)
# --------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map of the 256 byte values to printable characters: printable ASCII and
    Latin-1 map to themselves, the rest (space, control bytes ...) to U+0100 onwards,
    so that the space byte 0x20 shows as 'Ġ'. Taught in: 06_bpe."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    table, shift = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shift)
            shift += 1
    return table


@functools.lru_cache(maxsize=1)
def _unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def to_byte_chars(text: str) -> str:
    """The UTF-8 bytes of ``text``, one printable character per byte ('é' -> 'Ã©').
    Taught in: 06_bpe."""
    table = bytes_to_unicode()
    try:
        data = _check_text(text).encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"text is not valid Unicode (a lone surrogate at position {err.start}: "
                         f"{text[err.start:err.end]!r}); it has no UTF-8 bytes") from None
    return "".join(table[b] for b in data)


def from_byte_chars(chars: str, errors: str = "replace") -> str:
    """Inverse of ``to_byte_chars``; bytes that are not valid UTF-8 become U+FFFD.
    Taught in: 06_bpe."""
    back = _unicode_to_bytes()
    bad = [c for c in chars if c not in back]
    if bad:
        raise ValueError(f"not a byte character: {bad[0]!r} (expected characters of bytes_to_unicode())")
    return bytes(back[c] for c in chars).decode("utf-8", errors=errors)


def byte_alphabet() -> list[str]:
    """The 256 byte characters, sorted by code point. Taught in: 06_bpe."""
    return sorted(bytes_to_unicode().values())


def word_frequencies(texts: Iterable[str], byte_level: bool = False) -> Counter:
    """Counts of the pre-tokenised pieces of ``texts`` (as byte characters with
    ``byte_level``): the input of ``train_bpe``. Taught in: 06_bpe."""
    if isinstance(texts, str):
        raise TypeError("word_frequencies expects an iterable of texts, got a single str")
    counts: Counter = Counter()
    for text in texts:
        counts.update(pretokenize(text))
    if byte_level:
        converted: Counter = Counter()
        for word, count in counts.items():
            converted[to_byte_chars(word)] += count
        counts = converted
    return counts


# --------------------------------------------------------------------------------------
# Training: the loop of the slides, then the incremental version
# --------------------------------------------------------------------------------------

def _check_word_freqs(word_freqs, num_merges) -> None:
    if not isinstance(word_freqs, Mapping):
        raise TypeError(f"word_freqs must be a dict word -> count, got {type(word_freqs).__name__}")
    if not isinstance(num_merges, int) or isinstance(num_merges, bool) or num_merges < 0:
        raise ValueError(f"num_merges must be an int >= 0, got {num_merges!r}")
    for word, count in word_freqs.items():
        if not isinstance(word, str) or not word:
            raise ValueError(f"words must be non-empty strings, got {word!r}")
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"counts must be ints >= 0, got {count!r} for {word!r}")


def _initial_ids(word_freqs, alphabet) -> dict[str, int]:
    """Token -> id for the initial alphabet, sorted by code point (tokenizers' order)."""
    chars = {c for word in word_freqs for c in word} | set(alphabet or ())
    bad = [c for c in chars if len(c) != 1]
    if bad:
        raise ValueError(f"alphabet entries must be single characters, got {bad[0]!r}")
    return {c: i for i, c in enumerate(sorted(chars))}


def count_pairs(corpus: Mapping[tuple[str, ...], int]) -> Counter:
    """Frequency of every adjacent pair of symbols in ``corpus`` (symbols -> count),
    overlapping pairs included ('a a a' has the pair (a, a) twice). Taught in: 06_bpe."""
    pairs: Counter = Counter()
    for symbols, count in corpus.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += count
    return pairs


def merge_pair(symbols: Sequence[str], pair: tuple[str, str]) -> tuple[str, ...]:
    """Replace each occurrence of ``pair`` in ``symbols``, left to right, by the joined
    symbol: ('h', 'u', 'g') with ('u', 'g') -> ('h', 'ug'). Taught in: 06_bpe."""
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
        raise TypeError(f"pair must be a (str, str) tuple, got {pair!r}")
    a, b = pair
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def train_bpe_naive(word_freqs: Mapping[str, int], num_merges: int, min_frequency: int = 1,
                    alphabet: Iterable[str] | None = None,
                    tie_break: str = "ids") -> list[tuple[str, str]]:
    """The loop of the slides: count all pairs, merge the most frequent, repeat. Every merge
    re-reads the whole corpus (slow; the reference for ``train_bpe``). ``tie_break``:
    'ids' (as ``tokenizers``) or 'strings' (alphabetical, to see what changes).
    Taught in: 06_bpe."""
    _check_word_freqs(word_freqs, num_merges)
    if tie_break not in ("ids", "strings"):
        raise ValueError(f"tie_break must be 'ids' or 'strings', got {tie_break!r}")
    ids = _initial_ids(word_freqs, alphabet)  # token -> id, breaks ties between counts
    corpus = {tuple(word): count for word, count in word_freqs.items() if count > 0}
    merges = []
    while len(merges) < num_merges:
        pairs = count_pairs(corpus)
        if not pairs:
            break
        if tie_break == "ids":
            best = max(pairs, key=lambda p: (pairs[p], -ids[p[0]], -ids[p[1]]))
        else:
            best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < max(min_frequency, 1):
            break
        merges.append(best)
        ids.setdefault(best[0] + best[1], len(ids))
        corpus = {merge_pair(symbols, best): count for symbols, count in corpus.items()}
    return merges


def train_bpe(word_freqs: Mapping[str, int], num_merges: int, min_frequency: int = 1,
              alphabet: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """The first ``num_merges`` BPE merges learned from ``word_freqs`` (word -> count), as
    (left, right) string pairs in the order learned. Stops early when no pair occurs
    ``min_frequency`` times. ``alphabet``: extra initial symbols (e.g. all 256 bytes).

    Incremental: pair counts are kept in a dict and only the words that contain the merged
    pair are re-counted; a heap of (-count, id, id) finds the best pair, with stale
    entries fixed when they surface. Ties go to the pair with the smaller token ids, as in
    Hugging Face ``tokenizers``. Taught in: 06_bpe.
    """
    _check_word_freqs(word_freqs, num_merges)
    ids = _initial_ids(word_freqs, alphabet)  # token -> id (tie-breaking order)
    words = [list(w) for w, c in word_freqs.items() if c > 0]  # each word as its symbols
    counts = [c for c in word_freqs.values() if c > 0]
    pair_counts: dict[tuple[str, str], int] = defaultdict(int)  # pair -> count in the corpus
    where: dict[tuple[str, str], set[int]] = defaultdict(set)  # pair -> words that contain it
    for i, (symbols, count) in enumerate(zip(words, counts)):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += count
            where[pair].add(i)
    # max-heap via negated counts; entries go stale as counts change, but every pair always
    # has an entry at or above its current count, so the first up-to-date entry popped is the best
    heap = [(-c, ids[a], ids[b], a, b) for (a, b), c in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[tuple[str, str]] = []
    threshold = max(min_frequency, 1)
    while len(merges) < num_merges and heap:
        neg_count, _, _, a, b = heapq.heappop(heap)
        count = pair_counts.get((a, b), 0)
        if count != -neg_count:  # stale entry: put it back with its true count
            if count > 0:
                heapq.heappush(heap, (-count, ids[a], ids[b], a, b))
            continue
        if count < threshold:
            break
        merges.append((a, b))
        new = a + b
        ids.setdefault(new, len(ids))
        delta: dict[tuple[str, str], int] = defaultdict(int)  # pair -> change of its count
        for i in where.pop((a, b)):
            symbols, c = words[i], counts[i]
            if len(symbols) < 2:
                continue
            for pair in zip(symbols, symbols[1:]):  # take the word's old pairs out ...
                delta[pair] -= c
            symbols = words[i] = list(merge_pair(symbols, (a, b)))
            for pair in zip(symbols, symbols[1:]):  # ... and put its new pairs in
                delta[pair] += c
                where[pair].add(i)
        for pair, change in delta.items():
            if change == 0:
                continue
            pair_counts[pair] += change
            if pair_counts[pair] <= 0:
                del pair_counts[pair]
            elif change > 0:  # a new or grown pair needs a fresh heap entry
                heapq.heappush(heap, (-pair_counts[pair], ids[pair[0]], ids[pair[1]], *pair))
    return merges


def hf_train_bpe(word_freqs: Mapping[str, int], num_merges: int, min_frequency: int = 1,
                 alphabet: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """The merges Hugging Face ``tokenizers`` (BpeTrainer) learns from the same word counts
    (no specials, no alphabet limit); words must not contain whitespace.
    Taught in: 06_bpe."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    import json

    _check_word_freqs(word_freqs, num_merges)
    spaced = [w for w in word_freqs if any(c.isspace() for c in w)]
    if spaced:
        raise ValueError(f"hf_train_bpe feeds words split on whitespace, got {spaced[0]!r}; "
                         "use byte-level words (to_byte_chars) or words without spaces")
    chars = {c for w in word_freqs for c in w} | set(alphabet or ())
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=len(chars) + num_merges, show_progress=False,
                                  min_frequency=min_frequency, special_tokens=[],
                                  initial_alphabet=sorted(alphabet or ()))
    lines = (" ".join([w] * c) for w, c in word_freqs.items() if c > 0)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges][:num_merges]


# --------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------

class BPETokenizer:
    """Encode text with learned merges. ``byte_level=False`` (the slides): symbols are
    characters and unseen ones become ``unk_token``; ``byte_level=True`` (GPT-2): symbols
    are the 256 bytes, so nothing is unknown and ``decode(encode(s)) == s``.

    ``vocab``: token -> id (``unk_token`` first for character level, then the alphabet by
    code point, then merged tokens in the order learned). Taught in: 06_bpe.
    """

    def __init__(self, merges: Sequence[tuple[str, str]], alphabet: Iterable[str] = (),
                 byte_level: bool = False, unk_token: str = UNK_TOKEN):
        merges = [tuple(m) for m in merges]
        bad = [m for m in merges if len(m) != 2 or not all(isinstance(s, str) and s for s in m)]
        if bad:
            raise ValueError(f"merges must be pairs of non-empty strings, got {bad[0]!r}")
        self.byte_level = bool(byte_level)
        self.unk_token = None if self.byte_level else unk_token
        chars = set(byte_alphabet()) if self.byte_level else set(alphabet)
        if any(len(c) != 1 for c in chars):
            raise ValueError("alphabet must be single characters, got "
                             f"{next(c for c in chars if len(c) != 1)!r}")
        self.alphabet = sorted(chars)
        self.merges: list[tuple[str, str]] = merges
        self.ranks: dict[tuple[str, str], int] = {}  # pair -> rank (first learned wins)
        for rank, pair in enumerate(merges):
            self.ranks.setdefault(pair, rank)
        self.vocab: dict[str, int] = {}  # token -> id
        for token in ([self.unk_token] if self.unk_token else []) + self.alphabet + [a + b for a, b in merges]:
            self.vocab.setdefault(token, len(self.vocab))
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self._cache: dict[str, tuple[str, ...]] = {}

    @classmethod
    def train(cls, texts: Iterable[str], num_merges: int, byte_level: bool = False,
              min_frequency: int = 2, unk_token: str = UNK_TOKEN) -> "BPETokenizer":
        """Learn ``num_merges`` merges from ``texts`` (pre-tokenised with ``pretokenize``)."""
        freqs = word_frequencies(texts, byte_level=byte_level)
        alphabet = byte_alphabet() if byte_level else sorted({c for w in freqs for c in w})
        merges = train_bpe(freqs, num_merges, min_frequency=min_frequency, alphabet=alphabet)
        return cls(merges, alphabet, byte_level=byte_level, unk_token=unk_token)

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        kind = "byte-level" if self.byte_level else "character-level"
        return f"BPETokenizer({kind}, {len(self.merges)} merges, vocab {len(self)})"

    def truncated(self, num_merges: int) -> "BPETokenizer":
        """The same tokenizer with only its first ``num_merges`` merges (a smaller vocab)."""
        if not isinstance(num_merges, int) or not 0 <= num_merges <= len(self.merges):
            raise ValueError(f"num_merges must be an int in 0..{len(self.merges)}, got {num_merges!r}")
        return BPETokenizer(self.merges[:num_merges], self.alphabet, self.byte_level,
                            self.unk_token or UNK_TOKEN)

    def _symbols(self, word: str) -> list[str]:
        if self.byte_level:
            return list(to_byte_chars(word))
        known = self.vocab
        return [c if c in known else self.unk_token for c in word]

    def encode_word(self, word: str) -> tuple[str, ...]:
        """The tokens of one pre-tokenised piece: apply the lowest-ranked merge that
        applies, until none does."""
        if word in self._cache:
            return self._cache[word]
        symbols = self._symbols(word)
        while len(symbols) > 1:
            ranked = [(self.ranks[p], p) for p in zip(symbols, symbols[1:]) if p in self.ranks]
            if not ranked:
                break
            symbols = list(merge_pair(symbols, min(ranked)[1]))
        self._cache[word] = tuple(symbols)
        return self._cache[word]

    def tokenize(self, text: str) -> list[str]:
        """Tokens (strings) of ``text``; byte-level tokens show bytes as characters ('Ġ' = space)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__} (encode one text at a time)")
        return [t for piece in pretokenize(text) for t in self.encode_word(piece)]

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return [self.vocab[t] for t in self.tokenize(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``: exact for byte level; character level writes ``unk_token``
        where a character was unknown."""
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"ids must be a list of int ids, got a {type(ids).__name__}")
        tokens = []
        for i in ids:
            i = int(i)
            if i not in self.id_to_token:
                raise IndexError(f"id {i} is outside the vocabulary (size {len(self)})")
            tokens.append(self.id_to_token[i])
        text = "".join(tokens)
        return from_byte_chars(text) if self.byte_level else text

    def replay(self, text: str) -> list[tuple[tuple[str, str] | None, list[list[str]]]]:
        """How encoding unfolds: (merge applied, tokens of every piece) after each merge that
        changes ``text``, starting from (None, single symbols). Taught in: 06_bpe."""
        pieces = [self._symbols(p) for p in pretokenize(text)]
        steps = [(None, [list(p) for p in pieces])]
        while True:
            found = [self.ranks[p] for symbols in pieces for p in zip(symbols, symbols[1:])
                     if p in self.ranks]
            if not found:
                return steps
            pair = self.merges[min(found)]
            pieces = [list(merge_pair(symbols, pair)) for symbols in pieces]
            steps.append((pair, [list(p) for p in pieces]))

    def show(self, tokens: Sequence[str]) -> list[str]:
        """Tokens made readable: byte characters back to text where they form whole
        characters ('Ġthe' -> ' the')."""
        if not self.byte_level:
            return list(tokens)
        return [from_byte_chars(t) for t in tokens]


def unknown_rate(tokens: Sequence[str], known) -> float:
    """Fraction of ``tokens`` not in ``known`` (a vocabulary), or equal to ``[UNK]``.
    Taught in: 06_bpe."""
    tokens = list(tokens)
    if not tokens:
        raise ValueError("unknown_rate needs at least one token, got none")
    return sum(t not in known or t == UNK_TOKEN for t in tokens) / len(tokens)


# --------------------------------------------------------------------------------------
# WordPiece
# --------------------------------------------------------------------------------------

def wordpiece_split(word: str, prefix: str = "##") -> tuple[str, ...]:
    """A word as WordPiece's first symbols: 'hug' -> ('h', '##u', '##g'). Taught in: 06_bpe."""
    return (word[0],) + tuple(prefix + c for c in word[1:])


def wordpiece_scores(corpus: Mapping[tuple[str, ...], int], prefix: str = "##") -> dict:
    """WordPiece's score of every adjacent pair: count(ab) / (count(a) * count(b)).
    Taught in: 06_bpe."""
    symbol_counts: Counter = Counter()
    for symbols, count in corpus.items():
        for s in symbols:
            symbol_counts[s] += count
    pairs = count_pairs(corpus)
    return {p: c / (symbol_counts[p[0]] * symbol_counts[p[1]]) for p, c in pairs.items()}


def train_wordpiece(word_freqs: Mapping[str, int], num_merges: int, prefix: str = "##",
                    min_frequency: int = 1) -> list[tuple[str, str]]:
    """WordPiece merges: like BPE, but merge the pair with the best
    count(ab) / (count(a) count(b)) among pairs seen ``min_frequency`` times (ties: the
    pair seen first). Recounts every merge: for small corpora. Taught in: 06_bpe."""
    _check_word_freqs(word_freqs, num_merges)
    corpus = {wordpiece_split(w, prefix): c for w, c in word_freqs.items() if c > 0}
    merges = []
    while len(merges) < num_merges:
        pairs = count_pairs(corpus)
        scores = {p: s for p, s in wordpiece_scores(corpus, prefix).items()
                  if pairs[p] >= min_frequency}
        if not scores:
            break
        best = max(scores, key=scores.get)
        merges.append(best)
        a, b = best
        joined = a + (b[len(prefix):] if b.startswith(prefix) else b)
        new_corpus = {}
        for symbols, count in corpus.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            new_corpus[tuple(out)] = count
        corpus = new_corpus
    return merges


def wordpiece_vocab(word_freqs: Mapping[str, int], merges: Sequence[tuple[str, str]],
                    prefix: str = "##", unk_token: str = UNK_TOKEN) -> list[str]:
    """The WordPiece vocabulary: ``unk_token``, the initial symbols, then merged tokens.
    Taught in: 06_bpe."""
    symbols = sorted({s for w in word_freqs for s in wordpiece_split(w, prefix)})
    joined = [a + (b[len(prefix):] if b.startswith(prefix) else b) for a, b in merges]
    return list(dict.fromkeys([unk_token] + symbols + joined))


def wordpiece_tokenize(word: str, vocab, prefix: str = "##", unk_token: str = UNK_TOKEN,
                       max_chars: int = 100) -> list[str]:
    """BERT's encoder: greedy longest match first, continuation pieces written with
    ``prefix``; a word that cannot be covered is ``[unk_token]`` as a whole.
    'embeddings' -> em ##bed ##ding ##s with MiniLM's vocabulary. Taught in: 06_bpe."""
    _check_text(word, "word")
    if len(word) > max_chars:
        return [unk_token]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = (prefix if start > 0 else "") + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


# --------------------------------------------------------------------------------------
# BPE inside the word-level translation pipeline
# --------------------------------------------------------------------------------------

def ids_as_words(ids: Sequence[int]) -> str:
    """Token ids as plain words ('t17 t4') that ``course_utils.data.vocab.tokenize`` keeps intact,
    so BPE-encoded text can go through ``TranslationData``. Taught in: 06_bpe."""
    return " ".join(f"t{int(i)}" for i in ids)


def words_as_ids(words: Sequence[str]) -> list[int]:
    """Inverse of ``ids_as_words`` for a token list; anything else (``<unk>``) is dropped.
    Taught in: 06_bpe."""
    return [int(w[1:]) for w in words if len(w) > 1 and w[0] == "t" and w[1:].isdigit()]

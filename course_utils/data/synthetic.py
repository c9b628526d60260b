"""The synthetic English -> German task: numbers, counts, dates and events written out in
words, generated deterministically, in fixed splits (``load_synthetic``), cached on disk.

Taught in: 00_welcome (the data at a glance), 01_seq2seq_bottleneck (accuracy by kind and
length). Leaves out: vocabularies and batches (``course_utils.data.vocab``).

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
"""

from __future__ import annotations

import datetime as _dt
import functools
import gzip
import json
import random
from typing import Iterable

from course_utils.data.corpora import data_dir
from course_utils.data.splits import Splits, smoke_capped
from course_utils.data.vocab import normalize
from course_utils.files import write_atomic

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
    return smoke_capped(splits)


def _generate_synthetic(num_train, num_valid, num_test, seed) -> Splits:
    test = synthetic_pairs(num_test, seed=seed)
    valid = synthetic_pairs(num_valid, seed=seed + 1, exclude=(s for s, _ in test))
    train = synthetic_pairs(num_train, seed=seed + 2,
                            exclude=[s for s, _ in test] + [s for s, _ in valid])
    return Splits(train, valid, test)


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

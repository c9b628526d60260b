"""The corpora shipped in the repository's ``data/`` folder, read only after their sha256 is
checked against ``data/SHA256SUMS``: the English-Spanish Bible verses (``load_es_en``,
``es_en_splits``) and Jane Austen's six novels (``load_english_text``); where the shipped data
lives (``data_dir``) and how each file is rebuilt (``REBUILD``).

Data cards: ``data/es_en_bible.md`` and ``data/austen_novels.md``. Taught in: 00_welcome,
02 (full profile), 05_bert, 06_bpe. Leaves out: the novels as tasks (``course_utils.novels``).
"""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import os
import random
from pathlib import Path
from typing import NamedTuple

from course_utils.data.splits import Splits, smoke_capped

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
    return Path(os.environ.get("COURSE_DATA_DIR", Path(__file__).resolve().parents[2] / "data"))


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
    return smoke_capped(Splits(pairs[num_valid + num_test:], pairs[num_test:num_test + num_valid],
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

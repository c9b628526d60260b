"""Rebuild data/austen_novels.tsv.gz: the paragraphs of Jane Austen's six novels.

Source: Debian package r-cran-janeaustenr (fetched with `apt-get download` and unpacked
with `dpkg-deb -x`; installing it would pull in R). Its data are R lazy-load files
(data/Rdata.rdx: an index of offsets; data/Rdata.rdb: zlib-compressed R serialisations),
read here with PyPI rdata. Each novel is a vector of text lines; consecutive non-empty
lines are joined into paragraphs, chapter heading lines are counted and dropped. Writes
the data file, its card data/austen_novels.md and its line in data/SHA256SUMS.

Usage: python scripts/build_english_text.py [--out-dir DIR] [--cache-dir DIR]
"""

from __future__ import annotations

import re
import struct
import time
import zlib
from pathlib import Path

from scripts import _shipping

PACKAGE = "r-cran-janeaustenr"
LIBRARY = "usr/lib/R/site-library/janeaustenr"
NAME = "austen_novels.tsv.gz"
# janeaustenr's data set -> the title its austen_books() gives, in austen_books() order.
TITLES = {"sensesensibility": "Sense & Sensibility", "prideprejudice": "Pride & Prejudice",
          "mansfieldpark": "Mansfield Park", "emma": "Emma",
          "northangerabbey": "Northanger Abbey", "persuasion": "Persuasion"}
YEARS = {"Sense & Sensibility": 1811, "Pride & Prejudice": 1813, "Mansfield Park": 1814,
         "Emma": 1815, "Northanger Abbey": 1817, "Persuasion": 1817}  # first editions
CHAPTER = re.compile(r"(CHAPTER|Chapter) ([IVXLC]+|\d+)\.?")
DROPPED_LINE = re.compile(r"VOLUME [IVX]+|THE END|FINIS|Finis")  # volume headings, end marks
EDITORIAL = "A NOTE ON THE TEXT"  # a modern editor's note closing Northanger Abbey


def lazyload(stem: Path) -> dict[str, bytes]:
    """The serialised objects of an R lazy-load database (stem.rdx index + stem.rdb blobs)."""
    import rdata

    index = rdata.conversion.convert(rdata.parser.parse_file(stem.with_suffix(".rdx"),
                                                             extension=".rds"))
    blob = stem.with_suffix(".rdb").read_bytes()
    objects = {}
    for name, (offset, length) in index["variables"].items():
        chunk = blob[offset:offset + length]
        size, raw = struct.unpack(">I", chunk[:4])[0], zlib.decompress(chunk[4:])
        assert len(raw) == size, f"{stem}: {name} has {len(raw)} bytes, header says {size}"
        objects[str(name)] = raw
    return objects


def read_novels(root: Path) -> dict[str, list[str]]:
    """Title -> text lines of each novel, titles checked against janeaustenr's austen_books()."""
    import rdata

    code = lazyload(root / LIBRARY / "R" / "janeaustenr")["austen_books"]
    assert all(title.encode() in code for title in TITLES.values()), "austen_books() titles changed"
    data = lazyload(root / LIBRARY / "data" / "Rdata")
    return {title: [str(line) for line in rdata.conversion.convert(
                rdata.parser.parse_data(data[name], extension=".rds"))]
            for name, title in TITLES.items()}


def paragraphs(lines: list[str]) -> list[tuple[int, str]]:
    """(chapter, text) per paragraph: non-empty lines joined, headings counted and dropped."""
    out, chapter, current = [], 0, []

    def flush():
        text = " ".join(" ".join(current).replace("_", "").split())  # _italics_ -> italics
        if re.search(r"\w", text):  # not a separator such as "* * * * *"
            out.append((chapter, text))
        current.clear()

    for line in lines:
        line = line.strip()
        if line == EDITORIAL:
            break
        if not line or CHAPTER.fullmatch(line) or DROPPED_LINE.fullmatch(line):
            flush()
            chapter += bool(CHAPTER.fullmatch(line))
        else:
            current.append(line)
    flush()
    return out


def card(rows, novels, version, size, digest) -> str:
    """The Markdown data card."""
    words = [len(r[3].split()) for r in rows]
    table = "\n".join(
        f"| {t} | {YEARS[t]} | {max(r[1] for r in rows if r[0] == t)} | "
        f"{sum(r[0] == t for r in rows):,} | {sum(w for r, w in zip(rows, words) if r[0] == t):,} |"
        for t in novels)
    return f"""# austen_novels: the paragraphs of Jane Austen's six novels

`data/austen_novels.tsv.gz`: English prose, {len(rows):,} paragraphs of the six novels
Jane Austen completed. Read it with `course_utils.data.load_english_text()`, which checks
the sha256 below first.

| book | first published | chapters | paragraphs | words |
|---|---:|---:|---:|---:|
{table}

## Source

Debian package `{PACKAGE}`, version {version}: the CRAN package janeaustenr {version.split("-")[0]} by
Julia Silge (texts from Project Gutenberg). The package is fetched with `apt-get
download` and unpacked with `dpkg-deb -x` (not installed: that would pull in R). Its
data sets (`sensesensibility`, `prideprejudice`, `mansfieldpark`, `emma`,
`northangerabbey`, `persuasion`, one text line per element) are R lazy-load files
(`data/Rdata.rdx`, `data/Rdata.rdb`), read with PyPI `rdata`. The book titles are the
ones janeaustenr's `austen_books()` gives.

## Licence

The novels are in the **public domain**: they were first published in 1811-1817 (two
of them posthumously in December 1817, dated 1818), and Jane Austen died in 1817, so
copyright expired long ago everywhere. This file holds only the novels' text. The
janeaustenr package (code and packaging) is under the MIT licence, copyright 2016-2017
Julia Silge.

## Processing

- Lines are stripped of surrounding spaces. Consecutive non-empty lines are joined with
  one space into a paragraph; empty lines separate paragraphs; runs of spaces collapse.
- Chapter heading lines ("CHAPTER I", "Chapter 1", "CHAPTER 12", ...) are dropped and
  counted: `chapter` is 1 for the first chapter of a book and 0 for the front matter
  before it (title, author, date; Northanger Abbey's "Advertisement by the authoress").
  Emma restarts its numbering in each of its three volumes; here chapters are counted
  through the book (1-55).
- Also dropped: the volume headings of Emma ("VOLUME II"), the end marks ("THE END",
  "FINIS"), separator lines ("* * * * *"), and the modern editor's "A note on the text"
  at the end of Northanger Abbey. The underscores that mark italics (`_very_`) are
  removed.
- Otherwise the text is as in janeaustenr: Project Gutenberg's spelling and punctuation,
  `--` for dashes, straight quotes. Letters and poems quoted in the novels are paragraphs
  like any other.

## Counts

- rows (paragraphs): {len(rows):,}
- tokens (whitespace-separated words): {sum(words):,}

{_shipping.stats_table({'text': words})}
## File

- `austen_novels.tsv.gz`: {size:,} bytes, sha256 `{digest}` (also in `data/SHA256SUMS`)
- gzip (no time stamp, no file name) of UTF-8 text, tab-separated, one header line
  `book<TAB>chapter<TAB>paragraph<TAB>text`, then one paragraph per line, books in the
  order of `austen_books()`; no tabs or newlines inside fields, no quoting.

| column | meaning |
|---|---|
| book | title as janeaustenr gives it, e.g. `Pride & Prejudice` |
| chapter | chapter number counted through the book (0: front matter) |
| paragraph | paragraph number, 1, 2, ... through the whole book |
| text | the paragraph |

## Rebuild

`make data`, or `python scripts/build_english_text.py` (needs apt-get, dpkg-deb and
`pip install -e .[data]`; options `--out-dir`, `--cache-dir`). A rebuild from the same
package version gives the same bytes and sha256.
"""


def main() -> None:
    """Fetch, read, split into paragraphs, write the data file, its card and its checksum."""
    args = _shipping.parse_args(__doc__)
    start = time.perf_counter()
    with _shipping.cache_folder(args.cache_dir) as cache:
        root, versions = _shipping.fetch_debs([PACKAGE], cache)
        novels = read_novels(root)
    rows = [(title, chapter, number, text) for title, lines in novels.items()
            for number, (chapter, text) in enumerate(paragraphs(lines), start=1)]
    path, digest = _shipping.ship(
        args.out_dir, NAME, ["book", "chapter", "paragraph", "text"], rows,
        lambda size, dig: card(rows, novels, versions[PACKAGE], size, dig))
    print(f"{path}: {len(rows):,} paragraphs, {sum(len(r[3].split()) for r in rows):,} words, "
          f"{path.stat().st_size:,} bytes, sha256 {digest}")
    print(f"package: {PACKAGE} {versions[PACKAGE]}; took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

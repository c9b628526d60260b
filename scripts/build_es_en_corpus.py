"""Rebuild data/es_en_bible.tsv.gz, an English-Spanish corpus of aligned Bible verses.

Sources (both public domain, fetched with `apt-get download` and unpacked with
`dpkg-deb -x`, never installed): Debian package sword-text-web (SWORD module
engWEB2015eb, an English translation) and sword-text-sparv (module spaRV1909eb, the
Spanish Reina-Valera 1909). The modules are read with pysword. In the English text each
footnote (and each speaker label of the Song of Songs) is replaced by a space; then all
tags are removed, HTML entities unescaped and whitespace normalised in both languages;
the Spanish letters lose their closing subscriptions ("Fué escrita de ...").
Verses are aligned by reference (book, chapter, verse) in canonical book order; pairs with
both sides non-empty are kept unless a length-based alignment of the book disagrees (where
the Spanish divides verses differently). Writes the data file, its card
data/es_en_bible.md and its line in data/SHA256SUMS.

Usage: python scripts/build_es_en_corpus.py [--out-dir DIR] [--cache-dir DIR]
"""

from __future__ import annotations

import collections
import functools
import html
import itertools
import math
import re
import statistics
import time

from scripts import _shipping

PACKAGES = {"en": "sword-text-web", "es": "sword-text-sparv"}
MODULES = {"en": "engWEB2015eb", "es": "spaRV1909eb"}
NAME = "es_en_bible.tsv.gz"

BOOK_END = re.compile(r'<div [^>]*\beID="[^"]*"[^>]*type="book"\s*/>')
DROPPED = re.compile(r"<(note|speaker)\b.*?</\1>", re.S)
CLOSING_PUNCT = re.compile(r"\s*\x00[\s\x00]*(?=[,.;:!?)\]”’])")
WORD_TAGS = re.compile(r"(\w+)((?:</?(?:w|transChange)\b[^>]*>)+)(?=(\w+))")
ENCLITICS = set("lo la los las le les me te se nos os".split())
LETTERS = "Rom 1Cor 2Cor Gal Eph Phil Col 1Thess 2Thess 1Tim 2Tim Titus Phlm Heb".split()
MOVE_COST, BAND = 16.0, 6  # length-alignment check: cost of a merge or skip, max offset


def _word_gap(m: re.Match) -> str:
    """Space between two adjacent word elements, unless the second is an enclitic (envía|lo)."""
    word, tags, following = m.groups()
    enclitic = (following.lower() in ENCLITICS and word.islower()
                and (word[-1] in "rd" or re.search("[áéíóú]", word) is not None))
    return word + tags + ("" if enclitic else " ")


def clean(text: str) -> str:
    """Verse markup -> plain text: drop notes and speaker labels, strip tags, unescape."""
    book_end = BOOK_END.search(text)  # Rev 22:21 carries an appended glossary after it
    text = DROPPED.sub("\x00", text[:book_end.start()] if book_end else text)
    text = re.sub(r"<[^>]*>", "", WORD_TAGS.sub(_word_gap, text))
    text = CLOSING_PUNCT.sub("", text)  # a note just before a comma leaves no space
    return " ".join(html.unescape(text.replace("\x00", " ")).split())


def read_verses(bible) -> dict[tuple[str, int, int], str]:
    """All verses of a pysword bible as {(book, chapter, verse): cleaned text}."""
    # pysword decompresses a whole book for every verse it reads: remember the last blocks.
    bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
    verses = {}
    for books in bible.get_structure().get_books().values():
        for book in books:
            refs = [(book.osis_name, c + 1, v + 1)
                    for c, n in enumerate(book.chapter_lengths) for v in range(n)]
            texts = list(bible.get_iter(books=[book.osis_name], clean=False))
            assert len(texts) == len(refs), f"{book.osis_name}: {len(texts)} texts, {len(refs)} refs"
            verses.update(zip(refs, map(clean, texts)))
    return verses


def drop_colophons(es: dict) -> None:
    """Cut the subscription after the final "Amén." of each Spanish letter (no English counterpart)."""
    for book in LETTERS:
        ref = [r for r in es if r[0] == book and es[r]][-1]
        es[ref] = es[ref][:es[ref].rindex("Amén.") + len("Amén.")]


def confirmed(en: list[int], es: list[int], ratio: float, sd: float) -> set[int]:
    """Indices i where a length-based alignment (after Gale & Church, 1993) pairs en[i] with es[i].

    en, es: character lengths of one book's verses by reference (0: empty verse). Besides
    one-to-one pairs the alignment may merge two verses with one or leave a verse out, each
    at MOVE_COST; leaving out an empty verse is free.
    """
    def cost(la: int, lb: int, one_to_one: bool) -> float:
        if not la or not lb:
            return MOVE_COST if la or lb else 0.0
        mismatch = (math.log(la / (ratio * lb)) / sd) ** 2 / 2
        return mismatch if one_to_one else mismatch + MOVE_COST

    moves = ((1, 1), (1, 0), (0, 1), (2, 1), (1, 2))
    best, back = {(0, 0): 0.0}, {}
    for i in range(len(en) + 1):
        for j in range(max(0, i - BAND), min(len(es), i + BAND) + 1):
            options = [(best[i - di, j - dj] + cost(sum(en[i - di:i]), sum(es[j - dj:j]), di == dj),
                        (i - di, j - dj))
                       for di, dj in moves if (i - di, j - dj) in best]
            if options:
                best[i, j], back[i, j] = min(options)
    ok, cell = set(), (len(en), len(es))
    while cell != (0, 0):
        prev = back[cell]
        if cell == (prev[0] + 1, prev[1] + 1) and prev[0] == prev[1]:
            ok.add(prev[0])
        cell = prev
    return ok


def align(en: dict, es: dict) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(ref, english, spanish) rows in the Spanish (canonical) order, and the refs with text
    on both sides that the length-based check leaves out."""
    pairs = [(ref, en.get(ref, ""), text) for ref, text in es.items()]
    logs = [math.log(len(a) / len(b)) for _, a, b in pairs if a and b]
    ratio, sd = math.exp(statistics.fmean(logs)), statistics.pstdev(logs)
    rows, rejected = [], []
    for _, book in itertools.groupby(pairs, key=lambda p: p[0][0]):
        book = list(book)
        ok = confirmed([len(a) for _, a, _ in book], [len(b) for _, _, b in book], ratio, sd)
        for i, ((name, chapter, verse), a, b) in enumerate(book):
            if a and b:
                (rows if i in ok else rejected).append((f"{name} {chapter}:{verse}", a, b))
    return rows, [ref for ref, _, _ in rejected]


def card(rows, rejected, en_verses, es_verses, versions, size, digest) -> str:
    """The Markdown data card."""
    en_len = [len(r[1].split()) for r in rows]
    es_len = [len(r[2].split()) for r in rows]
    short = sum(a <= 20 and b <= 20 for a, b in zip(en_len, es_len))
    books = list(dict.fromkeys(r[0].rsplit(" ", 1)[0] for r in rows))
    chapters = collections.Counter(r.split(":")[0] for r in rejected).most_common()
    worst = ", ".join(f"{c} ({n})" for c, n in chapters if n >= 5)
    return f"""# es_en_bible: English-Spanish Bible verses

`data/es_en_bible.tsv.gz`: {len(rows):,} English-Spanish verse pairs, aligned by verse
reference, from the {len(books)} books both texts have, in canonical order ({books[0]} ...
{books[-1]}). Read it with `course_utils.data.load_es_en()`, which checks the sha256
below first.

## Sources

| side | text | Debian package | version | SWORD module |
|---|---|---|---|---|
| en | public-domain English Bible translation (from Debian package sword-text-web, footnotes removed) | sword-text-web | {versions['sword-text-web']} | {MODULES['en']} |
| es | Reina-Valera 1909 (Spanish) | sword-text-sparv | {versions['sword-text-sparv']} | {MODULES['es']} |

The packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x` (not
installed); the modules are read with PyPI `pysword`.

## Licence

Both texts are in the **public domain**. The packages' copyright files and module
configuration files say so for both ("PUBLIC DOMAIN", "This work is not copyrighted"):
the Reina-Valera revision was published in 1909, and the English translation was
dedicated to the public domain by its translators. The English text here is modified
(footnotes and markup removed). Its publisher asks that changed copies not use the
translation's trademarked name, so this card does not use it.

## Processing

1. Verse text. English: text after the end-of-book marker is dropped (only Rev 22:21 has
   any: an appended glossary). Each `<note>` (footnote) and `<speaker>` (speaker labels
   such as "Beloved" in the Song of Songs, which the Spanish does not have) is replaced by
   a space, except before a closing punctuation mark. Canonical psalm titles are kept:
   the Spanish has them in verse 1 too. Both languages: two word elements with no space
   between them are separate words (a space is added; in the Spanish, an enclitic pronoun
   after a verb form is joined on instead, e.g. envía + lo = envíalo). Then all tags are
   removed, HTML entities unescaped and whitespace collapsed. Spanish: the subscription
   after the final "Amén." of the 14 letters Romans to Hebrews ("Fué escrita de Corinto
   ...") is cut, because the English has no counterpart.
2. Alignment by reference (book, chapter, verse) as numbered in each module. English:
   NRSVA versification, {len(en_verses):,} verses with the deuterocanonical books.
   Spanish: KJV versification, {len(es_verses):,} verses.
   References with text on both sides: {len(rows) + len(rejected):,}.
3. Check. In some chapters the Spanish source divides verses differently from the English,
   so verse n of one is verse n+1 of the other for a stretch. A length-based alignment of
   each book (character lengths, in the manner of Gale & Church 1993) may also merge two
   verses with one or leave a verse out. Pairs it does not confirm are dropped:
   {len(rejected):,} pairs. Chapters with 5 or more dropped:
   {worst}.
   The rest are a few verses each, e.g. 1 John 5:7-8, where the Spanish has words the
   English lacks. Shifts too short for this check to see may remain.
4. Otherwise the text is as in the sources. The first word of a Spanish chapter is often
   in capitals ("EN el principio"), and old spellings (fué, á) are kept.

## Counts

- rows (verse pairs): {len(rows):,}
- pairs with <= 20 words on both sides: {short:,}
- tokens (whitespace-separated words): en {sum(en_len):,}, es {sum(es_len):,}, total {sum(en_len) + sum(es_len):,}

{_shipping.stats_table({'en': en_len, 'es': es_len})}
## File

- `es_en_bible.tsv.gz`: {size:,} bytes, sha256 `{digest}` (also in `data/SHA256SUMS`)
- gzip (no time stamp, no file name) of UTF-8 text, tab-separated, one header line
  `ref<TAB>en<TAB>es`, then one pair per line; no tabs or newlines inside fields, no quoting.

| column | meaning |
|---|---|
| ref | verse reference: OSIS book abbreviation, chapter:verse, e.g. `Gen 1:1` |
| en | English verse text |
| es | Spanish verse text |

## Rebuild

`make data`, or `python scripts/build_es_en_corpus.py` (needs apt-get, dpkg-deb and
`pip install -e .[data]`; options `--out-dir`, `--cache-dir`). A rebuild from the same
package versions gives the same bytes and sha256.
"""


def main() -> None:
    """Fetch, extract, align, write the data file, its card and its checksum."""
    args = _shipping.parse_args(__doc__)
    start = time.perf_counter()
    from pysword.modules import SwordModules

    with _shipping.cache_folder(args.cache_dir) as cache:
        root, versions = _shipping.fetch_debs(list(PACKAGES.values()), cache)
        modules = SwordModules(str(root / "usr/share/sword"))
        modules.parse_modules()
        en = read_verses(modules.get_bible_from_module(MODULES["en"]))
        es = read_verses(modules.get_bible_from_module(MODULES["es"]))
    drop_colophons(es)
    rows, rejected = align(en, es)
    path, digest = _shipping.ship(args.out_dir, NAME, ["ref", "en", "es"], rows,
                                  lambda size, dig: card(rows, rejected, en, es, versions, size, dig))
    print(f"{path}: {len(rows):,} verse pairs ({len(rejected)} dropped by the length check), "
          f"{path.stat().st_size:,} bytes, sha256 {digest}")
    print(f"packages: {versions}; took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

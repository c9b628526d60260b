"""The shipped novels as tasks for 05_bert and 07_gpt (the text itself comes from
``course_utils.data.corpora.load_english_text``).

- sentences and next-sentence pairs: ``split_sentences``, ``chapter_documents`` (NSP
  "documents": runs of consecutive paragraphs of one chapter), ``nsp_pairs`` (50 % true
  next sentence, 50 % the next sentence of another document);
- a train/test split by paragraph: ``split_paragraphs``;
- four fine-tuning tasks: ``book_passages`` (which novel a passage comes from),
  ``name_tagging`` (which words are character names, from the name lists
  ``CHARACTER_NAMES``: silver labels, see there), ``continuation_pairs`` (does b follow
  a?) and ``who_questions`` (extractive questions whose answer is a name);
- surface cues of a pair's b alone, and how well a rule on one of them does: ``b_cues``,
  ``cue_rule``.
"""

from __future__ import annotations

import random
import re
from typing import Callable, NamedTuple, Sequence

# -- sentences and next-sentence prediction ---------------------------------------------

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
    the time the successor of a random sentence of another document (is_next = 0).
    ``documents``: lists of sentences. Both kinds of ``b`` are drawn from the same pool
    (sentences that follow another one in their document), so that nothing about ``b``
    alone, such as opening a paragraph or a quotation, tells the two apart: only how ``b``
    goes with ``a`` does (issue 65: with ``b`` drawn from any sentence, a negative's ``b``
    opened a paragraph half the time in the held-out paragraphs, a positive's never).
    Taught in: 05_bert."""
    if not isinstance(num_pairs, int) or num_pairs < 1:
        raise ValueError(f"num_pairs must be a positive int, got {num_pairs!r}")
    docs = [list(d) for d in documents if len(d) > 0]
    if len(docs) < 2:
        raise ValueError(f"need at least two non-empty documents, got {len(docs)}")
    starts = [(d, i) for d, doc in enumerate(docs) for i in range(len(doc) - 1)]
    if len({d for d, _ in starts}) < 2:
        raise ValueError("need at least two documents of two sentences or more: a negative's b is "
                         "a true successor in another document")
    rng = random.Random(seed)
    pairs = []
    for _ in range(num_pairs):
        d, i = rng.choice(starts)
        if rng.random() < 0.5:
            pairs.append((docs[d][i], docs[d][i + 1], 1))
        else:
            other, j = rng.choice(starts)
            while other == d:                 # any document but d
                other, j = rng.choice(starts)
            pairs.append((docs[d][i], docs[other][j + 1], 0))
    return pairs


_QUOTES = "\"'\u201c\u2018"


def b_cues(paragraphs, max_words: int = 40) -> dict[str, Callable[[str], bool]]:
    """Features of a pair's ``b`` alone, blind to ``a``, that could give a pair task's label
    away (issue 65): ``b`` opens with a quotation mark, ``b`` opens a paragraph of
    ``paragraphs`` (chapter 0 left out), and ``b`` has at most n words, for n = 2 ..
    ``max_words``. Each is a function of ``b`` that returns a bool. Taught in: 05_bert."""
    openings = {s[0] for s in (split_sentences(p.text) for p in paragraphs if p.chapter > 0) if s}
    cues: dict[str, Callable[[str], bool]] = {
        "b opens with a quotation mark": lambda b: b[:1] in _QUOTES,
        "b opens a paragraph": lambda b: b in openings}
    cues.update({f"b has at most {n} words": (lambda b, n=n: len(b.split()) <= n)
                 for n in range(2, max_words + 1)})
    return cues


def cue_rule(pairs: Sequence[tuple[str, str, int]], cue: Callable[[str], bool]
             ) -> tuple[float, float, float]:
    """How well one feature of ``b`` tells a pair task's labels apart: (share of the
    positives' ``b`` with the feature, share of the negatives', accuracy of the rule "label 0
    if the feature holds" taken either way round, so at least 0.5 on balanced pairs).
    Taught in: 05_bert."""
    hits = [(cue(b), label) for _, b, label in pairs]
    positives = [h for h, label in hits if label == 1]
    negatives = [h for h, label in hits if label == 0]
    if not positives or not negatives:
        raise ValueError("pairs must hold both labels")
    accuracy = sum(h != label for h, label in hits) / len(hits)
    return sum(positives) / len(positives), sum(negatives) / len(negatives), max(accuracy, 1 - accuracy)


def chapter_documents(paragraphs) -> list[list[str]]:
    """The novels as NSP 'documents': lists of sentences that follow each other in the text.
    A document is a run of consecutive paragraphs of one chapter: where a paragraph is
    missing (``split_paragraphs`` held it out, or it was never given), the run ends, so that
    a sentence's successor in its document is always its successor in the novel. Chapter 0
    (title lines) is left out. The paragraphs are taken to be distinct (as
    ``split_paragraphs`` gives them). Taught in: 05_bert."""
    return [sentences for _, _, sentences in _runs(paragraphs)]


def _runs(paragraphs) -> list[tuple[str, int, list[str]]]:
    """(book, chapter, sentences) of every run of consecutive paragraphs of one chapter."""
    runs: list[tuple[str, int, list[str]]] = []
    previous = None
    for p in sorted((p for p in paragraphs if p.chapter > 0), key=lambda p: (p.book, p.paragraph)):
        if previous != (p.book, p.chapter, p.paragraph - 1):
            runs.append((p.book, p.chapter, []))
        runs[-1][2].extend(split_sentences(p.text))
        previous = (p.book, p.chapter, p.paragraph)
    return [run for run in runs if run[2]]


def continuation_pairs(paragraphs, num_pairs: int, max_words: int = 20, seed: int = 0
                       ) -> list[tuple[str, str, int]]:
    """``(a, b, label)`` for a sentence-pair task harder than NSP: label 1, ``b`` is the
    sentence after ``a`` in the novel; label 0, ``b`` is the sentence after another sentence
    of the *same novel* in another chapter (NSP's negatives come from anywhere, so the topic
    alone often gives them away). As in ``nsp_pairs``, both kinds of ``b`` come from one pool
    (sentences that follow another in their run of paragraphs), so ``b`` alone, its opening
    quotation mark, paragraph start or length, does not give the label away. Both sentences
    have at most ``max_words`` words; exactly half the pairs are 1 (shuffled).
    Taught in: 05_bert."""
    if not isinstance(num_pairs, int) or num_pairs < 2:
        raise ValueError(f"num_pairs must be an int >= 2, got {num_pairs!r}")
    short = lambda sentence: len(sentence.split()) <= max_words
    starts = [(book, chapter, a, b) for book, chapter, sentences in _runs(paragraphs)
              for a, b in zip(sentences, sentences[1:]) if short(a) and short(b)]
    successors: dict[str, list[tuple[int, str]]] = {}   # book -> (chapter, b) of every start
    for book, chapter, _, b in starts:
        successors.setdefault(book, []).append((chapter, b))
    chapters = {book: {c for c, _ in pool} for book, pool in successors.items()}   # book -> its chapters
    if len(starts) < num_pairs:
        raise ValueError(f"asked for {num_pairs} pairs, the paragraphs hold {len(starts)} sentence pairs "
                         f"of <= {max_words} words")
    rng = random.Random(seed)
    pairs = []
    for k, (book, chapter, a, b) in enumerate(rng.sample(starts, num_pairs)):
        if k % 2 == 0:
            pairs.append((a, b, 1))
        else:
            if chapters[book] == {chapter}:
                raise ValueError(f"{book} has no other chapter to draw a negative from")
            other, negative = rng.choice(successors[book])
            while other == chapter:
                other, negative = rng.choice(successors[book])
            pairs.append((a, negative, 0))
    rng.shuffle(pairs)
    return pairs


# -- fine-tuning tasks ---------------------------------------------------------------------

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


def _sentences_with_names(paragraphs, books: Sequence[str]):
    """(words, the book's character names) of every sentence of ``books``."""
    unknown = sorted(set(books) - set(CHARACTER_NAMES))
    if unknown:
        raise ValueError(f"no name list for {unknown}; books with one: {sorted(CHARACTER_NAMES)}")
    for p in paragraphs:
        if p.book in books:
            names = set(CHARACTER_NAMES[p.book])
            for sentence in split_sentences(p.text):
                yield words(sentence), names


def name_tagging(paragraphs, books: Sequence[str], max_words: int = 40, min_names: int = 1,
                 seed: int = 0) -> list[tuple[list[str], list[int]]]:
    """Sentences of ``books`` as (words, tags), tag 1 where the word is a character name of
    that book (case-sensitive, see ``CHARACTER_NAMES``), 0 elsewhere; only sentences of at
    most ``max_words`` words with at least ``min_names`` names, shuffled. Taught in: 05_bert."""
    examples = []
    for ws, names in _sentences_with_names(paragraphs, books):
        tags = [int(w in names) for w in ws]
        if 3 <= len(ws) <= max_words and sum(tags) >= min_names:
            examples.append((ws, tags))
    random.Random(seed).shuffle(examples)
    return examples


class WhoQuestion(NamedTuple):
    """An extractive question about a sentence of a novel: ``question`` ("who" and the word
    after a name), ``passage`` (the sentence's words), ``answer`` (the inclusive word span of
    the name asked for) and ``names`` (the spans of every name of the sentence, in order)."""
    question: list[str]
    passage: list[str]
    answer: tuple[int, int]
    names: list[tuple[int, int]]


def who_questions(paragraphs, books: Sequence[str], max_words: int = 30, seed: int = 0) -> list[WhoQuestion]:
    """SQuAD-style questions made from the text: in a sentence of ``books`` with at least two
    different character names (``CHARACTER_NAMES``; consecutive name words are one name,
    "Frank Churchill"), a name followed by a word ``w`` (letters, not a name, once in the
    sentence) gives the question "who ``w``" whose answer is that name: "who will" in
    "... Elinor will, in all probability ..." is *Elinor*. Every such name gives a question;
    shuffled.
    Taught in: 05_bert."""
    questions = []
    for ws, names in _sentences_with_names(paragraphs, books):
        if len(ws) > max_words:
            continue
        spans, i = [], 0
        while i < len(ws):
            if ws[i] in names:
                j = i
                while j + 1 < len(ws) and ws[j + 1] in names:
                    j += 1
                spans.append((i, j))
                i = j + 1
            else:
                i += 1
        lowered = [w.lower() for w in ws]
        for first, last in spans:
            others = [s for s in spans if ws[s[0]:s[1] + 1] != ws[first:last + 1]]
            if not others or last + 1 == len(ws):
                continue
            w = ws[last + 1]
            if w.isalpha() and w not in names and lowered.count(w.lower()) == 1:
                questions.append(WhoQuestion(["who", w], ws, (first, last), spans))
    random.Random(seed).shuffle(questions)
    return questions


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

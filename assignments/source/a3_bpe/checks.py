"""a3_bpe judged outside the student's process (``grader.verdicts``): for each test
cell, the calls the sandbox makes with the student's functions (the visible asserts' cases
first, then the hidden ones) and the reference implementations the grader compares them
with. Keep the cases in step with the test cells of a3_bpe.ipynb (nbgrader still runs those)."""

import random

from grader.verdicts import Question
from grader.verdicts import call as _call

SLIDES = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}
SLIDES_CORPUS = {tuple(word): count for word, count in SLIDES.items()}
SLIDES_MERGES = [("u", "g"), ("u", "n"), ("h", "ug")]
WORDS = {"lower": 5, "lowest": 2, "newer": 6, "wider": 3, "new": 2, "low": 7}


def _bpe():
    from course_utils import bpe
    return bpe


def tokenizers_merges(word_freqs, num_merges):
    """The merges that tokenizers' BpeTrainer learns from the same word counts."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    alphabet = {c for word in word_freqs for c in word}
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=len(alphabet) + num_merges, special_tokens=[], show_progress=False)
    tokenizer.train_from_iterator((" ".join([w] * c) for w, c in word_freqs.items()), trainer=trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, (list, tuple)) else tuple(m.split(" ")) for m in merges]


def reference_encode_word(word, merges, alphabet):
    tokenizer = _bpe().BPETokenizer([tuple(m) for m in merges], alphabet="".join(sorted(alphabet)))
    return [t if t != tokenizer.unk_token else "[UNK]" for t in tokenizer.encode_word(word)]


def reference():
    bpe = _bpe()
    return {"count_pairs": bpe.count_pairs, "merge_pair": bpe.merge_pair,
            "train_bpe": bpe.train_bpe_naive, "encode_word": reference_encode_word}


def count_pairs_calls():
    rng = random.Random(31)
    calls = [_call("count_pairs", SLIDES_CORPUS), _call("count_pairs", {("a", "a", "a"): 2}),
             _call("count_pairs", {("x",): 3})]
    for _ in range(20):
        corpus = {tuple(rng.choice("aabcd") for _ in range(rng.randint(1, 8))): rng.randint(1, 9) for _ in range(30)}
        calls.append(_call("count_pairs", corpus, hidden=True))
    return calls


def merge_pair_calls():
    rng = random.Random(32)
    calls = [_call("merge_pair", s, p) for s, p in [
        (("h", "u", "g", "s"), ("u", "g")), (("a", "a", "a"), ("a", "a")), (("a", "a", "a", "a"), ("a", "a")),
        (("p", "u", "n"), ("u", "g")), (("u", "g"), ("u", "g"))]]
    for _ in range(200):
        symbols = tuple(rng.choice(["a", "b", "ab", "c"]) for _ in range(rng.randint(0, 9)))
        calls.append(_call("merge_pair", symbols, (rng.choice("abc"), rng.choice(["a", "b", "ab"])), hidden=True))
    return calls


def train_bpe_calls():
    rng = random.Random(33)
    calls = [_call("train_bpe", SLIDES, 3), _call("train_bpe", SLIDES, 0), _call("train_bpe", SLIDES, 100),
             _call("train_bpe", {"ab": 5, "abc": 3, "xy": 3}, 3)]
    for seed in range(8):
        letters = "aab" if seed % 2 else "abcde"
        freqs = {"".join(rng.choice(letters) for _ in range(rng.randint(1, 9))): rng.randint(0, 5) for _ in range(60)}
        calls.append(_call("train_bpe", freqs, 40, hidden=True))
    return calls


def tokenizers_calls():
    from course_utils.data import load_english_text
    texts = [p.text for p in load_english_text()[:300]]
    freqs = dict(_bpe().word_frequencies(texts, byte_level=True))
    return [_call("train_bpe", SLIDES, 3), _call("train_bpe", WORDS, 12), _call("train_bpe", freqs, 150, hidden=True)]


def encode_slides_calls():
    alphabet = set("".join(SLIDES))
    return [_call("encode_word", w, SLIDES_MERGES, alphabet) for w in ("bug", "mug", "hugs", "pun", "")]


def encode_reference_calls():
    rng = random.Random(34)
    calls = [_call("encode_word", "abc", [("a", "b"), ("b", "c")], set("abc")),
             _call("encode_word", "abc", [("b", "c"), ("a", "b")], set("abc")),
             _call("encode_word", "aaaa", [("a", "a"), ("aa", "aa")], set("a"))]
    freqs = {"".join(rng.choice("abcd") for _ in range(rng.randint(1, 9))): rng.randint(1, 5) for _ in range(80)}
    merges = _bpe().train_bpe(freqs, 30)
    for _ in range(300):
        word = "".join(rng.choice("abcde") for _ in range(rng.randint(1, 10)))
        calls.append(_call("encode_word", word, merges, set("abcd"), hidden=True))
    return calls


QUESTIONS = {
    "test_count_pairs": Question(count_pairs_calls, reference),
    "test_merge_pair": Question(merge_pair_calls, reference),
    "test_train_bpe_slides": Question(train_bpe_calls, reference),
    "test_train_bpe_tokenizers": Question(tokenizers_calls, lambda: {"train_bpe": tokenizers_merges}),
    "test_encode_slides": Question(encode_slides_calls, reference),
    "test_encode_reference": Question(encode_reference_calls, reference),
}

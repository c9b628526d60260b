import gzip
import hashlib
import shutil
from collections import Counter

import pytest
import torch

from course_utils import data
from course_utils.data import synthetic
from course_utils.data import (EOS_ID, PAD_ID, SOS_ID, UNK_ID, SPECIALS, TranslationData,
                               Vocab, bucket_label, bucket_labels, normalize, pad_sequences,
                               split_german_number, tokenize)


# ---------------------------------------------------------------- tokenisation and vocab

def test_normalize_lowercases_and_separates_punctuation():
    assert normalize("  Twenty-One  apples,  ARRIVED!") == "twenty - one apples , arrived !"
    assert tokenize("¿Dónde está?") == ["¿", "dónde", "está", "?"]
    # NFC: a decomposed accent becomes the composed character
    assert normalize("e\u0301") == "\u00e9"


def test_normalize_rejects_non_strings():
    with pytest.raises(TypeError, match="expects a str, got list"):
        normalize(["a"])


def test_vocab_specials_and_round_trip():
    vocab = Vocab.build([["b", "a", "b"], ["c", "b"]])
    assert vocab.itos[:4] == list(SPECIALS) == ["<pad>", "<sos>", "<eos>", "<unk>"]
    assert (PAD_ID, SOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert vocab.itos[4] == "b"  # most frequent first
    ids = vocab.encode("a b c", add_sos=True)
    assert ids[0] == SOS_ID and ids[-1] == EOS_ID
    assert vocab.decode(ids) == ["a", "b", "c"]
    assert vocab.decode(torch.tensor(ids + [PAD_ID, PAD_ID])) == ["a", "b", "c"]
    assert vocab.decode(ids, strip=False)[0] == "<sos>"
    assert Vocab.from_list(vocab.to_list()) == vocab


def test_vocab_unknowns_and_frequency_cut():
    vocab = Vocab.build([["a", "a", "b"]], min_freq=2)
    assert "b" not in vocab and vocab["b"] == UNK_ID
    assert vocab.decode(vocab.encode("a b zzz")) == ["a", "<unk>", "<unk>"]
    assert len(Vocab.build([list("abcdefgh")], max_size=6)) == 6


def test_vocab_bad_inputs():
    with pytest.raises(TypeError, match="got a str"):
        Vocab.build(["a sentence"])
    with pytest.raises(ValueError, match="min_freq must be >= 1, got 0"):
        Vocab.build([["a"]], min_freq=0)
    with pytest.raises(ValueError, match="must start with"):
        Vocab.from_list(["a", "b"])
    with pytest.raises(IndexError, match="id 99 is outside the vocabulary"):
        Vocab(["a"]).decode([99])
    with pytest.raises(ValueError, match=r"ids must have 1 dimension, got shape \(2, 2\)"):
        Vocab(["a"]).decode(torch.zeros(2, 2, dtype=torch.long))


# ---------------------------------------------------------------- padding and batches

def test_pad_sequences_pads_right_and_reports_lengths():
    padded, lengths = pad_sequences([[5, 6, 7], [8]])
    assert padded.tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]
    assert lengths.tolist() == [3, 1]
    assert padded.dtype == lengths.dtype == torch.long
    with pytest.raises(ValueError, match="empty sequence at positions \\[1\\]"):
        pad_sequences([[1], []])
    with pytest.raises(ValueError, match="at least one sequence"):
        pad_sequences([])


def test_batches_cover_every_pair_once_with_correct_lengths(small_synthetic):
    train = TranslationData.build(small_synthetic.train)
    batches = train.batches(batch_size=64, shuffle=True, seed=3)
    seen = torch.cat([b.index for b in batches]).tolist()
    assert sorted(seen) == list(range(len(train)))
    for b in batches:
        assert b.src.shape[0] == b.tgt.shape[0] == len(b) <= 64
        assert b.src.shape[1] == int(b.src_lengths.max())
        for row, n in zip(b.src, b.src_lengths):
            assert (row[:n] != PAD_ID).all() and (row[n:] == PAD_ID).all()
            assert row[n - 1] == EOS_ID
        assert (b.tgt[:, 0] == SOS_ID).all()
        assert b.num_tokens == int((b.tgt != PAD_ID).sum()) - len(b)
    # the same seed gives the same batches, another seed other batches
    again = train.batches(batch_size=64, shuffle=True, seed=3)
    assert all(torch.equal(a.src, b.src) for a, b in zip(batches, again))
    other = train.batches(batch_size=64, shuffle=True, seed=4)
    assert not all(torch.equal(a.index, b.index) for a, b in zip(batches, other))


def test_length_bucketing_cuts_padding(small_synthetic):
    train = TranslationData.build(small_synthetic.train)

    def padding(batches):
        return sum(int((b.src == PAD_ID).sum()) for b in batches)

    bucketed = padding(train.batches(32, shuffle=True, by_length=True))
    random_ = padding(train.batches(32, shuffle=True, by_length=False))
    assert bucketed < 0.25 * random_


def test_valid_data_uses_training_vocab(small_synthetic):
    train = TranslationData.build(small_synthetic.train)
    valid = train.with_pairs([("twenty - one xylophones", "ein und zwanzig xylophone")])
    assert valid.src_vocab is train.src_vocab
    assert valid.src_ids[0][-2] == UNK_ID  # unseen word


def test_buckets():
    assert [bucket_label(n) for n in (0, 9, 10, 29, 30, 55)] == ["0-9", "0-9", "10-19", "20-29", "30+", "30+"]
    assert bucket_labels() == ["0-9", "10-19", "20-29", "30+"]
    assert bucket_labels((1, 5)) == ["1-4", "5+"]
    with pytest.raises(ValueError, match="below the first bucket edge"):
        bucket_label(0, (1, 5))
    with pytest.raises(ValueError, match="strictly increasing"):
        bucket_labels((0, 20, 10))


# ---------------------------------------------------------------- synthetic task

def test_german_number_words_split_into_parts():
    assert split_german_number("einundzwanzig") == ("ein", "und", "zwanzig")
    assert split_german_number("Neunzehnhundertsiebenundneunzig") == (
        "neunzehn", "hundert", "sieben", "und", "neunzig")
    assert split_german_number("dreiundzwanzigste") == ("drei", "und", "zwanzigste")
    assert split_german_number("achtzehn") == ("achtzehn",)  # fewest parts wins
    with pytest.raises(ValueError, match="cannot split German number word 'zweiundfoo'"):
        split_german_number("zweiundfoo")


def test_synthetic_known_translations():
    import random
    from course_utils.data.synthetic import _date_phrases, _words
    import datetime
    assert _words(21, "en") == "twenty - one"
    assert _words(21, "de") == "ein und zwanzig"  # reordering inside a number
    assert _words(1997, "en", "year") == "nineteen ninety - seven"
    assert _words(1997, "de", "year") == "neunzehn hundert sieben und neunzig"
    en, de_nom, de_dat = _date_phrases(datetime.date(1997, 3, 3))
    assert en == "monday , march third , nineteen ninety - seven"
    assert de_nom == "montag , der dritte märz neunzehn hundert sieben und neunzig"
    assert de_dat == "montag , dem dritten märz neunzehn hundert sieben und neunzig"
    rng = random.Random(0)
    pairs = [data.synthetic_example(rng, "event") for _ in range(50)]
    for en, de in pairs:
        assert " arrived on " in en
        assert de.startswith("am ") and de.endswith(" an")  # verb prefix moves to the end
    with pytest.raises(ValueError, match="kind must be one of"):
        data.synthetic_example(rng, "poem")


def test_synthetic_singular_agreement():
    from course_utils.data.synthetic import NOUNS, _count_phrase
    cat, book = NOUNS[2], NOUNS[1]
    assert _count_phrase(1, cat) == ("one cat", "eine katze")
    assert _count_phrase(1, book) == ("one book", "ein buch")
    assert _count_phrase(2, cat) == ("two cats", "zwei katzen")


def test_synthetic_is_deterministic_and_seeded():
    a = data.synthetic_pairs(200, seed=5)
    assert a == data.synthetic_pairs(200, seed=5)
    assert a != data.synthetic_pairs(200, seed=6)
    assert len({s for s, _ in a}) == 200  # distinct sources


def test_synthetic_splits_are_fixed_and_disjoint(small_synthetic):
    train, valid, test = small_synthetic
    assert (len(train), len(valid), len(test)) == (600, 100, 100)
    sources = [{s for s, _ in split} for split in small_synthetic]
    assert not sources[0] & sources[1] and not sources[0] & sources[2] and not sources[1] & sources[2]
    bigger = data.load_synthetic(num_train=900, num_valid=100, num_test=100, cache=False)
    assert bigger.test == test and bigger.valid == valid  # independent of the train size
    assert bigger.train[:600] == train


def test_synthetic_lengths_reordering_and_one_to_many():
    pairs = data.synthetic_pairs(3000, seed=0)
    lengths = [len(s.split()) for s, _ in pairs]
    assert min(lengths) == 3 and max(lengths) >= 33
    buckets = Counter(bucket_label(n) for n in lengths)
    assert all(buckets[b] >= 0.04 * len(pairs) for b in bucket_labels())
    # reordering: 'twenty - one' becomes 'ein und zwanzig' (units before tens)
    assert any("twenty - one" in s and "ein und zwanzig" in t for s, t in pairs)
    # one-to-many: 'nineteen' in a year becomes 'neunzehn hundert'
    assert any("nineteen" in s and "neunzehn hundert" in t for s, t in pairs)


def test_load_synthetic_cache_matches_fresh_generation(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    synthetic._cached_synthetic.cache_clear()
    try:
        cached = data.load_synthetic(50, 10, 10, seed=1)
        assert list((tmp_path / ".cache").glob("synthetic-*.json.gz"))
        synthetic._cached_synthetic.cache_clear()
        from_disk = data.load_synthetic(50, 10, 10, seed=1)
        assert cached == from_disk == data.load_synthetic(50, 10, 10, seed=1, cache=False)
        assert isinstance(from_disk.train, list) and isinstance(from_disk.train[0], tuple)
    finally:
        synthetic._cached_synthetic.cache_clear()


# ---------------------------------------------------------------- shipped data, checksums

def _fake_shipped(folder, name="es_en_bible.tsv.gz", rows=(("Gen 1:1", "In the beginning", "En el principio"),)):
    folder.mkdir(parents=True, exist_ok=True)
    body = "ref\ten\tes\n" + "".join("\t".join(r) + "\n" for r in rows)
    path = folder / name
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(body)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (folder / "SHA256SUMS").write_text(f"{digest}  {name}\n")
    return path


def test_verified_loading_of_a_good_file(tmp_path):
    _fake_shipped(tmp_path)
    rows = data.load_es_en(max_len=None, folder=tmp_path)
    assert rows == [("Gen 1:1", "In the beginning", "En el principio")]


def test_checksum_mismatch_says_how_to_rebuild(tmp_path):
    path = _fake_shipped(tmp_path)
    path.write_bytes(path.read_bytes()[:-3] + b"xyz")
    with pytest.raises(data.DataChecksumError, match="sha256 expected .* got .*scripts/build_es_en_corpus.py"):
        data.verified_path("es_en_bible.tsv.gz", tmp_path)


def test_missing_file_says_how_to_restore(tmp_path):
    _fake_shipped(tmp_path)
    (tmp_path / "es_en_bible.tsv.gz").unlink()
    with pytest.raises(FileNotFoundError, match="git checkout -- data/es_en_bible.tsv.gz.*make data"):
        data.verified_path("es_en_bible.tsv.gz", tmp_path)


def test_file_without_recorded_checksum_is_refused(tmp_path):
    _fake_shipped(tmp_path)
    shutil.copy(tmp_path / "es_en_bible.tsv.gz", tmp_path / "other.tsv.gz")
    with pytest.raises(data.DataChecksumError, match="no line in"):
        data.verified_path("other.tsv.gz", tmp_path)


def test_shipped_files_match_their_checksums_and_cards():
    folder = data.data_dir()
    sums = data.recorded_checksums(folder)
    assert set(sums) == {"es_en_bible.tsv.gz", "austen_novels.tsv.gz", "small_bert.pt", "small_gpt.pt", "es_en_attention.pt"}
    assert set(sums) == set(data.REBUILD)  # each says how it is rebuilt
    for name, digest in sums.items():
        assert data.sha256_file(data.verified_path(name)) == digest
        card = (folder / (name.split(".")[0] + ".md")).read_text()
        assert digest in card, f"the data card of {name} does not state its sha256"
        assert "public domain" in card.lower()


def test_es_en_corpus_contents():
    rows = data.load_es_en(max_len=None)
    assert len(rows) > 30000
    short = data.load_es_en(max_len=20)
    assert 10000 < len(short) < len(rows)
    assert all(len(en.split()) <= 20 and len(es.split()) <= 20 for _, en, es in short)
    refs = [r[0] for r in rows]
    assert len(set(refs)) == len(refs)
    assert all(en.strip() and es.strip() and "<" not in en for _, en, es in rows)
    splits = data.es_en_splits(max_len=20, num_valid=300, num_test=300)
    assert len(splits.valid) == len(splits.test) == 300
    distinct = len({en for _, en, _ in short})
    assert distinct < len(short) - 200                     # recurring verses ("Yahweh spoke to Moses, ...")
    assert len(splits.train) + 600 == distinct             # each English verse kept once
    english = [{en for en, _ in part} for part in (splits.train, splits.valid, splits.test)]
    assert sum(map(len, english)) == distinct              # so no source is in two splits
    assert splits == data.es_en_splits(max_len=20, num_valid=300, num_test=300)
    with pytest.raises(ValueError, match="leaves no training pairs"):
        data.es_en_splits(max_len=20, num_valid=len(short), num_test=1)


def test_english_text_contents():
    paragraphs = data.load_english_text()
    books = Counter(p.book for p in paragraphs)
    assert len(books) == 6
    assert "Pride & Prejudice" in books
    words = sum(len(p.text.split()) for p in paragraphs)
    assert 600_000 < words < 800_000  # six novels
    assert all(p.text.strip() for p in paragraphs)


def test_number_counterparts_occur_together_in_the_synthetic_pairs(small_synthetic):
    from course_utils.data import NUMBER_COUNTERPARTS
    assert len(NUMBER_COUNTERPARTS) == 17 and len(set(NUMBER_COUNTERPARTS.values())) == 17
    pairs = [(set(s.split()), set(t.split())) for s, t in small_synthetic.train]
    for german, english in NUMBER_COUNTERPARTS.items():
        assert any(german in t and english in s for s, t in pairs), (german, english)


def test_synthetic_kind_names_the_kind_each_sentence_was_drawn_as():
    import random
    from course_utils.data import SYNTHETIC_KINDS, synthetic_example, synthetic_kind
    rng = random.Random(3)
    for kind in SYNTHETIC_KINDS:
        for _ in range(200):
            source, _ = synthetic_example(rng, kind)
            assert synthetic_kind(source) == kind, (kind, source)
    assert synthetic_kind("one apple") == "count" and synthetic_kind("one hundred") == "number"
    with pytest.raises(ValueError, match="got an empty string"):
        synthetic_kind("  ")


# ---------------------------------------------------------------- the package's layout

def test_the_package_re_exports_every_public_name_of_its_modules():
    """``course_utils.data`` holds no code of its own: its ``__all__`` is every public name its
    modules define (the notebooks read them as ``data.<name>``), each the very object of the
    module that defines it; ``smoke_capped`` is the loaders' plumbing, not for notebooks."""
    import ast
    import importlib
    from pathlib import Path
    folder = Path(data.__file__).parent
    defined = {}
    for path in sorted(folder.glob("*.py")):
        if path.stem == "__init__":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = ([node.target] if isinstance(node, ast.AnnAssign) else node.targets if isinstance(node, ast.Assign)
                       else [ast.Name(node.name)] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [])
            for name in (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
                if not name.startswith("_"):
                    assert name not in defined, f"{name} is defined in both {defined[name]} and {path.stem}"
                    defined[name] = path.stem
    assert sorted(data.__all__) == sorted(set(defined) - {"smoke_capped"})
    for name in data.__all__:
        assert getattr(data, name) is getattr(importlib.import_module(f"course_utils.data.{defined[name]}"), name)


def test_the_shipped_data_is_found_from_the_subpackage(monkeypatch):
    """``data_dir`` counts its way up from course_utils/data/corpora.py to the repository."""
    from pathlib import Path
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    assert data.data_dir() == Path(__file__).resolve().parent.parent / "data"
    assert (data.data_dir() / "SHA256SUMS").is_file()

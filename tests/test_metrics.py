import math

import pytest
import sacrebleu

from course_utils.metrics import bleu, exact_match, scores_by_length

HYPS = ["the cat sat on the mat today", "a dog barked loudly at the postman", "ein und zwanzig äpfel kamen an"]
REFS = ["the cat sat on a mat today", "the dog barked loudly at the postman", "ein und zwanzig äpfel kamen an"]


def test_bleu_equals_sacrebleu_corpus_bleu():
    expected = sacrebleu.corpus_bleu(HYPS, [REFS]).score
    assert bleu(HYPS, REFS) == pytest.approx(expected, abs=1e-9)
    assert 0 < bleu(HYPS, REFS) < 100
    # token lists are joined with spaces first
    assert bleu([h.split() for h in HYPS], [r.split() for r in REFS]) == pytest.approx(expected)
    assert bleu(["a b c d e f"], ["a b c d e f"]) == pytest.approx(100.0)
    assert bleu(["x y z w"], ["a b c d"]) == pytest.approx(0.0)


def test_bleu_bad_inputs():
    with pytest.raises(ValueError, match="got 2 hypotheses and 1 references"):
        bleu(["a", "b"], ["a"])
    with pytest.raises(TypeError, match="a list of sentences, got a single str"):
        bleu("a b", ["a b"])
    with pytest.raises(TypeError, match=r"hypotheses\[0\] must be a str or a list of str tokens, got int"):
        bleu([3], ["a"])
    with pytest.raises(ValueError, match="at least one"):
        bleu([], [])


def test_exact_match():
    assert exact_match(HYPS, REFS) == pytest.approx(1 / 3)
    assert exact_match([["a", "b"]], ["a  b"]) == 1.0


def test_scores_by_length_groups_and_scores_each_bucket():
    lengths = [3, 12, 25]
    rows = scores_by_length(lengths, HYPS, REFS, edges=(0, 10, 20, 30))
    assert [r["bucket"] for r in rows] == ["0-9", "10-19", "20-29", "30+"]
    assert [r["count"] for r in rows] == [1, 1, 1, 0]
    assert rows[0]["bleu"] == pytest.approx(bleu(HYPS[:1], REFS[:1]))
    assert rows[2]["exact_match"] == 1.0 and rows[0]["exact_match"] == 0.0
    assert math.isnan(rows[3]["bleu"]) and math.isnan(rows[3]["exact_match"])
    with pytest.raises(ValueError, match="one source length per hypothesis"):
        scores_by_length([1], HYPS, REFS)

import math

import pytest

from course_utils.results import load_results, save_results

ROWS = [{"bucket": "0-9", "count": 3, "bleu": 91.123456, "exact_match": 2 / 3},
        {"bucket": "10+", "count": 0, "bleu": float("nan"), "exact_match": float("nan")}]


def test_round_trip_rounds_and_keeps_nan(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    path = save_results("gru", ROWS, profile="fast", bleu=88.88888, parameters=1234)
    assert path == tmp_path / "fast" / "gru.json"
    record = load_results(profile="fast")["gru"]
    assert record["bleu"] == 88.8889 and record["parameters"] == 1234
    assert record["by_length"][0]["exact_match"] == 0.6667
    assert math.isnan(record["by_length"][1]["bleu"])
    assert list(load_results(["gru"], profile="fast")) == ["gru"]
    assert load_results(profile="full") == {}


def test_bad_names_rows_and_missing_results(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="without spaces or slashes"):
        save_results("a/b", ROWS)
    with pytest.raises(ValueError, match=r"needs \['bleu', 'count'\]"):
        save_results("x", [{"bucket": "0-9", "exact_match": 1.0}])
    with pytest.raises(FileNotFoundError, match=r"no saved results \['nope.json'\]"):
        load_results(["nope"], profile="fast")

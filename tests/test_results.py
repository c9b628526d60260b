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
    # another kind of record in the same folder (07b's LoRA comparison) is not a model's scores:
    # all of the profile's models leave it out, asking for it by name says what it is
    (tmp_path / "fast" / "07b_lora.json").write_text('{"methods": []}')
    assert list(load_results(profile="fast")) == ["gru"]
    with pytest.raises(ValueError, match="no 'by_length'"):
        load_results(["07b_lora"], profile="fast")


def test_bad_names_rows_and_missing_results(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="without spaces or slashes"):
        save_results("a/b", ROWS)
    with pytest.raises(ValueError, match=r"needs \['bleu', 'count'\]"):
        save_results("x", [{"bucket": "0-9", "exact_match": 1.0}])
    with pytest.raises(FileNotFoundError, match=r"no saved results \['nope.json'\]"):
        load_results(["nope"], profile="fast")


def test_a_notebook_run_never_writes_the_committed_results(tmp_path, monkeypatch):
    """Without COURSE_RESULTS_DIR a run saves under build/results/ (ignored by git) and reads
    its own models first, the committed results/ for the rest."""
    from course_utils import results
    monkeypatch.delenv("COURSE_RESULTS_DIR", raising=False)
    shipped, local = tmp_path / "results", tmp_path / "build" / "results"
    monkeypatch.setattr(results, "SHIPPED", shipped)
    monkeypatch.setattr(results, "LOCAL", local)
    (shipped / "fast").mkdir(parents=True)
    for name in ("a", "b"):
        (shipped / "fast" / f"{name}.json").write_text(
            '{"name": "%s", "bleu": 1.0, "by_length": [{"bucket": "0-9", "count": 1, "bleu": 1.0, '
            '"exact_match": 1.0}]}' % name)
    before = {p: p.read_text() for p in shipped.rglob("*.json")}
    path = save_results("b", ROWS, profile="fast", bleu=2.0)
    assert path == local / "fast" / "b.json"
    assert {p: p.read_text() for p in shipped.rglob("*.json")} == before     # untouched
    loaded = load_results(profile="fast")
    assert list(loaded) == ["a", "b"] and loaded["a"]["bleu"] == 1.0 and loaded["b"]["bleu"] == 2.0
    assert load_results(["b", "a"], profile="fast")["b"]["bleu"] == 2.0
    with pytest.raises(FileNotFoundError, match=r"no saved results \['c.json'\] in .*build.* or .*results"):
        load_results(["c"], profile="fast")


def test_the_default_folder_is_ignored_by_git():
    import subprocess
    from course_utils.results import LOCAL, SHIPPED
    repo = SHIPPED.parent
    if not (repo / ".git").exists():
        pytest.skip("not a git checkout")
    probe = LOCAL / "fast" / "x.json"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=repo).returncode
    assert ignored == 0, f"{probe} is not ignored by git"


def test_saved_file_finds_this_machines_file_first_then_the_committed_one(tmp_path, monkeypatch):
    """05_bert saves its pre-trained small BERT for 05b_bert_finetuning: a file of its own name,
    found where save_results writes, else in the committed results/; with COURSE_RESULTS_DIR
    only there (make test's copy, make full's folder)."""
    from course_utils import results
    monkeypatch.delenv("COURSE_RESULTS_DIR", raising=False)
    shipped, local = tmp_path / "results", tmp_path / "build" / "results"
    monkeypatch.setattr(results, "SHIPPED", shipped)
    monkeypatch.setattr(results, "LOCAL", local)
    assert results.saved_file("05_small_bert.pt", "fast") is None
    (shipped / "fast").mkdir(parents=True)
    (shipped / "fast" / "05_small_bert.pt").write_bytes(b"committed")
    assert results.saved_file("05_small_bert.pt", "fast") == shipped / "fast" / "05_small_bert.pt"
    assert results.saved_file("05_small_bert.pt", "full") is None          # per profile
    (local / "fast").mkdir(parents=True)
    (local / "fast" / "05_small_bert.pt").write_bytes(b"mine")
    assert results.saved_file("05_small_bert.pt", "fast").read_bytes() == b"mine"
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path / "elsewhere"))
    assert results.saved_file("05_small_bert.pt", "fast") is None          # that folder only
    (local / "fast" / "folder.pt").mkdir()
    monkeypatch.delenv("COURSE_RESULTS_DIR")
    assert results.saved_file("folder.pt", "fast") is None                 # files only
    for bad in ("", "../x.pt", "a/b.pt", ".hidden"):
        with pytest.raises(ValueError, match="name must be a file name without slashes, got"):
            results.saved_file(bad, "fast")


def test_the_committed_small_bert_of_05_is_tracked_and_matches_the_fast_recipe():
    """05b_bert_finetuning reads the small BERT that 05_bert pre-trained (make test copies
    results/ first): the committed file must be in git (the repository ignores *.pt), made
    by the fast recipe, with part 1's probe scores."""
    import subprocess
    from course_utils import bert_training as BT, recipes
    from course_utils.results import SHIPPED
    path = SHIPPED / "fast" / "05_small_bert.pt"
    assert path.is_file(), f"{path} is missing: run notebooks/05_bert.ipynb with make notebooks"
    if (SHIPPED.parent / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=SHIPPED.parent).returncode
        assert ignored == 1, f"{path} is ignored by git: a fresh clone would not have it"
    model, tokenizer, info = BT.load_pretrained(path)
    assert model.cfg == recipes.BERT_FAST.model_config() and info["steps"] == recipes.BERT_FAST.steps
    assert info["profile"] == "fast" and len(tokenizer) == recipes.BERT_FAST.vocab_size
    scores = info["probe_scores"]
    assert set(scores) == {"which novel (accuracy)", "names, unseen novels (F1)"}
    assert all(len(v) == 7 and all(0 <= x <= 1 for x in v) for v in scores.values())   # layers 0-6

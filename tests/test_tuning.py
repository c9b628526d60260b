"""scripts/tune_transformer.py: the table of 04's appendix comes from valid-split runs of
candidates that are real variations of the shipped recipe; the same for 03's recipe
(scripts/tune_convs2s.py) and 02's seed comparison (scripts/compare_attention.py)."""

import json
from dataclasses import replace
from pathlib import Path

from scripts import tune_transformer as tune

from course_utils import recipes


def test_every_candidate_is_a_variation_of_the_fast_recipe_and_one_is_the_recipe():
    tried = [replace(recipes.TRANSFORMER_FAST, **changes) for _, changes, _ in tune.CANDIDATES]  # unknown field: TypeError
    assert tried.count(recipes.TRANSFORMER_FAST) == 1
    assert len({repr(r) for r in tried}) == len(tried), "two candidates are the same recipe"
    assert all(seeds for _, _, seeds in tune.CANDIDATES)


def test_the_table_has_one_row_per_run_in_percent():
    rows = [("a", 0, {"0-9": 1.0, "30+": 0.5}), ("b", 1, {"0-9": 0.25, "30+": 0.0})]
    lines = tune.table(rows).splitlines()
    assert lines[0].endswith("| seed | 0-9 | 30+ |") and len(lines) == 4
    assert lines[2] == "| a | 0 | 100.0 | 50.0 |" and lines[3] == "| b | 1 | 25.0 | 0.0 |"


def test_the_notebook_appendix_holds_one_row_per_candidate_run_on_valid():
    _check_rows(_appendix("04_transformer.ipynb", "## Appendix: how the fast recipe was chosen"), tune.CANDIDATES)
    # the body of 04 no longer scores candidates on the test set
    assert "exact match on the test set" not in "\n".join(_markdown("04_transformer.ipynb"))


def _markdown(notebook: str) -> list[str]:
    """The markdown cells of a notebook under notebooks/."""
    nb = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / notebook).read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def _appendix(notebook: str, heading: str) -> str:
    return next(text for text in _markdown(notebook) if text.startswith(heading))


def _check_rows(appendix: str, candidates) -> None:
    """One table row per (candidate, seed), in the script's order, scored on validation."""
    assert "**validation** split" in appendix
    rows = [line for line in appendix.splitlines() if line.startswith("| ") and "seed" not in line]
    expected = [f"| {label} | {seed} |" for label, _, seeds in candidates for seed in seeds]
    assert [row[:len(start)] for row, start in zip(rows, expected)] == expected
    assert len(rows) == len(expected)


def test_convs2s_candidates_are_variations_of_its_recipes_and_the_appendix_lists_them():
    from scripts import tune_convs2s as conv_tune

    for base, candidates in ((recipes.CONVS2S_FAST, conv_tune.CANDIDATES), (recipes.CONVS2S_FULL, conv_tune.FULL_CANDIDATES)):
        tried = [replace(base, **changes) for _, changes, _ in candidates]  # unknown field: TypeError
        assert tried.count(base) == 1
        assert len(set(tried)) == len(tried), "two candidates are the same recipe"
    _check_rows(_appendix("03_convs2s.ipynb", "## Appendix: how the recipe was put together"), conv_tune.CANDIDATES)
    _check_rows(_appendix("03_convs2s.ipynb", "### The full profile's recipe"), conv_tune.FULL_CANDIDATES)
    body = "\n".join(_markdown("03_convs2s.ipynb"))
    assert "the test set;" not in body and "evaluated on\nthe test set" not in body


def test_attention_comparison_runs_real_configurations_and_02s_appendix_lists_them():
    from scripts import compare_attention as compare

    from course_utils.seq2seq import Seq2SeqConfig
    configs = [Seq2SeqConfig(10, 10, emb_size=compare.EMB, **{"hidden_size": compare.HIDDEN,
                                                             "bidirectional": True, **changes})
               for _, changes, _ in compare.CANDIDATES]                   # unknown field: TypeError
    assert {c.attention for c in configs} == {"dot", "multiplicative", "additive", "mlp"}
    assert len({repr(c) for c in configs}) == len(configs)
    assert all(len(seeds) >= 3 for _, _, seeds in compare.CANDIDATES)     # a spread, not one run
    _check_rows(_appendix("02_bahdanau_attention.ipynb", "## Appendix: three seeds"), compare.CANDIDATES)

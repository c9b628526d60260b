"""scripts/tune_transformer.py: the table of 04's appendix comes from valid-split runs of
candidates that are real variations of the shipped recipe."""

from dataclasses import replace

import tune_transformer as tune  # scripts/ is on sys.path (conftest.py)

from course_utils import transformer as T


def test_every_candidate_is_a_variation_of_the_fast_recipe_and_one_is_the_recipe():
    recipes = [replace(T.FAST, **changes) for _, changes, _ in tune.CANDIDATES]  # unknown field: TypeError
    assert recipes.count(T.FAST) == 1
    assert len({repr(r) for r in recipes}) == len(recipes), "two candidates are the same recipe"
    assert all(seeds for _, _, seeds in tune.CANDIDATES)


def test_the_table_has_one_row_per_run_in_percent():
    rows = [("a", 0, {"0-9": 1.0, "30+": 0.5}), ("b", 1, {"0-9": 0.25, "30+": 0.0})]
    lines = tune.table(rows).splitlines()
    assert lines[0].endswith("| seed | 0-9 | 30+ |") and len(lines) == 4
    assert lines[2] == "| a | 0 | 100.0 | 50.0 |" and lines[3] == "| b | 1 | 25.0 | 0.0 |"


def test_the_notebook_appendix_holds_one_row_per_candidate_run_on_valid():
    import json
    from pathlib import Path
    nb = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "04_transformer.ipynb").read_text())
    appendix = next("".join(c["source"]) for c in nb["cells"]
                    if "".join(c["source"]).startswith("## Appendix: how the fast recipe was chosen"))
    assert "**validation** split" in appendix
    rows = [line for line in appendix.splitlines() if line.startswith("| ") and "seed" not in line]
    expected = [f"| {label} | {seed} |" for label, _, seeds in tune.CANDIDATES for seed in seeds]
    assert [row[:len(start)] for row, start in zip(rows, expected)] == expected
    assert len(rows) == len(expected)
    # the body of 04 no longer scores candidates on the test set
    body = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "exact match on the test set" not in body

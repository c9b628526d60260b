"""The home assignments (assignments/, scripts/assignments.py): the source notebooks pass
their own tests, the released ones are up to date, hold no solution or hidden test and stop
at the first stub, grading gives full marks to a correct submission and not to a broken
one, and bad input gets a clear error.

Notebook runs use the shipped checkpoints (skip_training = True): no training here.
"""

import importlib.util
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE, RELEASE = ROOT / "assignments" / "source", ROOT / "assignments" / "release"
POINTS = {"a1_bahdanau": 12.0, "a2_transformer": 22.0, "a3_bpe": 9.0}


def _load_module():
    spec = importlib.util.spec_from_file_location("course_assignments", ROOT / "scripts" / "assignments.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


A = _load_module()
NAMES = sorted(POINTS)


def _source(name):
    return nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)


def _regions(text, begin, end):
    """The text between each ``begin`` and ``end`` marker line."""
    return re.findall(rf"^[ \t]*### {begin}\n(.*?)^[ \t]*### {end}", text, re.M | re.S)


def _solved_release(name):
    """What a student who solved everything hands in: the released notebook with the
    source's solutions typed into the answer cells, and a scratch cell of their own."""
    source = {A.grade_id(c): c for c in _source(name).cells if A.is_answer_cell(c)}
    nb = nbformat.read(RELEASE / name / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if A.is_answer_cell(cell):
            cell.source = "\n".join(line for line in source[A.grade_id(cell)].source.split("\n")
                                    if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
    nb.cells.append(nbformat.v4.new_code_cell("print('my own experiments')"))
    return nb


# ---- the source notebooks ------------------------------------------------------------

def test_three_assignments_with_their_points():
    assert sorted(A.source_notebooks()) == NAMES
    for name in NAMES:
        assert sum(A.points(_source(name)).values()) == POINTS[name]


@pytest.mark.parametrize("name", NAMES)
def test_source_metadata_is_nbgrader_consistent(name):
    nb = _source(name)
    ids = [A.grade_id(c) for c in nb.cells if A.grade_id(c)]
    assert len(ids) == len(set(ids)), "grade_ids must be unique"
    for cell in nb.cells:
        meta = A.nbgrader_meta(cell)
        has_solution = "### BEGIN SOLUTION" in cell.source
        has_hidden = "### BEGIN HIDDEN TESTS" in cell.source
        assert has_solution == bool(meta.get("solution")), f"{cell.id}: solution region <-> solution cell"
        if has_hidden:
            assert A.is_test_cell(cell), f"{cell.id}: hidden tests only in test cells"
        if A.is_test_cell(cell):
            assert meta["locked"] and meta["points"] > 0 and "assert" in cell.source
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "sources are stored without outputs"
    answers = [A.grade_id(c) for c in nb.cells if A.is_answer_cell(c)]
    assert len(answers) >= 4
    assert sum("### BEGIN HIDDEN TESTS" in c.source for c in nb.cells) >= 3


@pytest.mark.parametrize("name", ["a1_bahdanau", "a2_transformer"])
def test_training_assignments_ship_a_small_checkpoint_and_a_flag(name):
    import torch
    nb = _source(name)
    flag = next(c for c in nb.cells if A.grade_id(c) == A.SKIP_TRAINING_ID)
    assert flag.source.startswith("skip_training = False")
    (checkpoint,) = A.checkpoints(SOURCE, name)
    assert checkpoint.stat().st_size < 2e6
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    assert state["optimizer"] is None and state["extra"]["tgt_vocab"][:4] == ["<pad>", "<sos>", "<eos>", "<unk>"]


@pytest.mark.parametrize("name", NAMES)
def test_source_notebook_passes_all_its_tests(name, tmp_path):
    nb = _source(name)
    for cell in nb.cells:
        if A.grade_id(cell) == A.SKIP_TRAINING_ID:
            cell.source = "skip_training = True"
    for checkpoint in A.checkpoints(SOURCE, name):
        (tmp_path / checkpoint.name).write_bytes(checkpoint.read_bytes())
    A.execute(nb, tmp_path, timeout=600)
    errors = [(c.id, o.ename, o.evalue[:200]) for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert errors == []
    from nbgrader.utils import determine_grade
    assert sum(determine_grade(c)[0] for c in nb.cells if A.is_test_cell(c)) == POINTS[name]


# ---- the release -----------------------------------------------------------------------

def test_release_is_up_to_date():
    files = A.release_files()
    for rel, content in files.items():
        path = RELEASE / rel
        assert path.exists() and path.read_bytes() == content, f"{path} is stale: run `make assignments`"
    manifest = A.read_manifest(RELEASE)
    assert {rel: A.sha256(c) for rel, c in files.items()} == {rel: manifest[rel] for rel in files}


@pytest.mark.parametrize("name", NAMES)
def test_release_has_stubs_no_solutions_and_no_hidden_tests(name):
    source = _source(name)
    text = (RELEASE / name / f"{name}.ipynb").read_text()
    released = nbformat.reads(text, as_version=4)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text
    visible = "\n".join(re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", c.source, flags=re.S)
                        for c in source.cells)
    hidden_lines = {line.strip() for c in source.cells
                    for region in _regions(c.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
                    for line in region.splitlines() if len(line.strip()) > 12}
    secret = {line for line in hidden_lines if line not in visible}
    assert len(secret) >= 5
    leaked = [line for line in secret if json.dumps(line)[1:-1] in text]
    assert leaked == []
    solution_lines = {line.strip() for c in source.cells
                      for region in _regions(c.source, "BEGIN SOLUTION", "END SOLUTION")
                      for line in region.splitlines() if len(line.strip()) > 25}
    assert not [line for line in solution_lines if line not in visible.replace(line, "", 1)
                and json.dumps(line)[1:-1] in text]
    answers = [c for c in released.cells if A.is_answer_cell(c)]
    assert answers and all("raise NotImplementedError()" in c.source for c in answers)
    assert all(not c.outputs for c in released.cells if c.cell_type == "code")
    tests = [c for c in released.cells if A.is_test_cell(c)]
    assert all(c.metadata["editable"] is False and c.metadata["nbgrader"]["checksum"] for c in tests)
    assert A.points(released) == A.points(source)


@pytest.mark.parametrize("name", NAMES)
def test_released_notebook_runs_up_to_the_first_stub(name, tmp_path):
    import os

    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    nb = nbformat.read(RELEASE / name / f"{name}.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",  # stops at the first error
                            resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError) as info:
        client.execute(env={**os.environ, **A.GRADING_ENV})
    assert info.value.ename == "NotImplementedError"
    ran = [c for c in nb.cells if c.cell_type == "code" and c.execution_count is not None]
    failed = ran[-1]
    assert A.is_test_cell(failed), "the first failure is the test of the first answer"
    assert all(not any(o.output_type == "error" for o in c.outputs) for c in ran[:-1])
    first_answer = next(i for i, c in enumerate(nb.cells) if A.is_answer_cell(c))
    assert nb.cells.index(failed) > first_answer


# ---- making the release never overwrites a student's changes ---------------------------

def test_release_refuses_to_overwrite_a_changed_file(tmp_path):
    lines = A.release(SOURCE, tmp_path)
    assert all("new" in line for line in lines)
    assert all("unchanged" in line for line in A.release(SOURCE, tmp_path))
    edited = tmp_path / "a3_bpe" / "a3_bpe.ipynb"
    edited.write_text(edited.read_text().replace("raise NotImplementedError()", "return Counter()", 1))
    before = edited.read_bytes()
    with pytest.raises(A.AssignmentError, match=r"(?s)refusing to overwrite 1 file.*a3_bpe\.ipynb.*FORCE=1"):
        A.release(SOURCE, tmp_path)
    assert edited.read_bytes() == before
    lines = A.release(SOURCE, tmp_path, force=True)
    assert any("overwritten" in line and "a3_bpe" in line for line in lines)
    assert edited.read_bytes() == A.release_files()["a3_bpe/a3_bpe.ipynb"]


def test_release_updates_what_it_wrote_and_refuses_unknown_files(tmp_path):
    A.release(SOURCE, tmp_path)
    old = tmp_path / "a1_bahdanau" / "a1_bahdanau.ipynb"
    manifest = A.read_manifest(tmp_path)
    # a file written by an older release (its hash is in the manifest) is updated
    old.write_text(old.read_text() + " ")
    manifest["a1_bahdanau/a1_bahdanau.ipynb"] = A.sha256(old.read_bytes())
    (tmp_path / A.MANIFEST).write_text("".join(f"{h}  {r}\n" for r, h in manifest.items()))
    assert any("updated" in line and "a1_bahdanau" in line for line in A.release(SOURCE, tmp_path))
    # a file that is there but was never written by release (no manifest) is not touched
    (tmp_path / A.MANIFEST).unlink()
    old.write_text("{}")
    with pytest.raises(A.AssignmentError, match="a1_bahdanau.ipynb"):
        A.release(SOURCE, tmp_path)


# ---- grading -----------------------------------------------------------------------------

def test_assembly_trusts_only_the_answer_cells():
    nb = _solved_release("a2_transformer")
    test_cell = next(c for c in nb.cells if A.grade_id(c) == "test_attention")
    test_cell.source = "pass  # the student emptied the test"
    nb.cells = [c for c in nb.cells if A.grade_id(c) != "masks"]  # and deleted an answer
    for cell in nb.cells:
        if A.grade_id(cell) == A.SKIP_TRAINING_ID:
            cell.source = "skip_training = False"
    out = A.assemble(nb, _source("a2_transformer"))
    cells = {A.grade_id(c): c for c in out.nb.cells if A.grade_id(c)}
    assert "### BEGIN HIDDEN TESTS" in cells["test_attention"].source
    assert cells["masks"].source.count("raise NotImplementedError()") == 2 and out.missing == ["masks"]
    assert cells[A.SKIP_TRAINING_ID].source.startswith("skip_training = True")
    assert "print('my own experiments')" not in "".join(c.source for c in out.nb.cells)
    assert out.ignored == 2  # the scratch cell and the emptied test
    assert [c.id for c in out.nb.cells] == [c.id for c in _source("a2_transformer").cells]


def test_correct_submission_scores_full_marks_and_a_broken_one_does_not(tmp_path):
    good = tmp_path / "good" / "submission.ipynb"
    good.parent.mkdir()
    nbformat.write(_solved_release("a3_bpe"), good)
    result = A.grade(good)
    assert result.assignment == "a3_bpe" and result.total == result.max_total == POINTS["a3_bpe"]
    assert "1 code cell(s)" in result.report() and "9.0 /  9.0" in result.report()

    broken = _solved_release("a3_bpe")
    answer = next(c for c in broken.cells if A.grade_id(c) == "train_bpe")
    assert "-ids[p[0]], -ids[p[1]]" in answer.source
    answer.source = answer.source.replace("(pairs[p], -ids[p[0]], -ids[p[1]])", "(pairs[p], p)")  # ties by string
    bad = tmp_path / "bad" / "submission.ipynb"
    bad.parent.mkdir()
    nbformat.write(broken, bad)
    result = A.grade(bad)
    assert 0 < result.total < result.max_total
    assert result.scores["test_train_bpe_slides"][0] == 0 and result.scores["test_count_pairs"][0] == 1
    assert "AssertionError" in result.errors["test_train_bpe_slides"]


def test_a_released_notebook_as_handed_out_scores_zero(tmp_path):
    result = A.grade(RELEASE / "a1_bahdanau" / "a1_bahdanau.ipynb")
    assert result.total == 0 and result.max_total == POINTS["a1_bahdanau"]
    assert all("NotImplementedError" in e for e in result.errors.values())
    assert "reference checkpoint" in result.checkpoint


def test_bad_submissions_get_a_clear_error(tmp_path, capsys):
    with pytest.raises(A.AssignmentError, match="does not exist"):
        A.grade(tmp_path / "missing.ipynb")
    (tmp_path / "answer.py").write_text("print(1)")
    with pytest.raises(A.AssignmentError, match="not a Jupyter notebook"):
        A.grade(tmp_path / "answer.py")
    (tmp_path / "broken.ipynb").write_text("{not json")
    with pytest.raises(A.AssignmentError, match="not a readable Jupyter notebook"):
        A.grade(tmp_path / "broken.ipynb")
    with pytest.raises(A.AssignmentError, match="not one of the assignments.*a1_bahdanau"):
        A.grade(ROOT / "notebooks" / "00_welcome.ipynb")
    with pytest.raises(A.AssignmentError, match="is a folder"):
        A.grade(tmp_path)
    assert A.main(["grade"]) == 2
    assert "make grade SUBMISSION=" in capsys.readouterr().err

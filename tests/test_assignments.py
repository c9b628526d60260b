"""The home assignments (assignments/, the package grader): the source notebooks pass
their own tests, the released ones are up to date, hold no solution or hidden test and stop
at the first stub, grading gives full marks to a correct submission and not to a broken
one, and bad input gets a clear error.

Notebook runs use the shipped checkpoints (skip_training = True): no training here.
"""

import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE, RELEASE = ROOT / "assignments" / "source", ROOT / "assignments" / "release"
POINTS = {
    "a1_bahdanau": 12.0,
    "a2_transformer": 22.0,
    "a3_bpe": 9.0,
    "a4_bert": 14.0,
    "a5_gpt": 19.0,
    "a6_vit": 15.0,
}


from grader import assemble as grader_assemble  # noqa: E402
from grader import batch as grader_batch  # noqa: E402
from grader import cells as grader_cells  # noqa: E402
from grader import cli as grader_cli  # noqa: E402
from grader import release as grader_release  # noqa: E402
from grader import run as grader_run  # noqa: E402
from grader import sandbox as grader_sandbox  # noqa: E402
NAMES = sorted(POINTS)
# assignments that train a model and ship its checkpoint (one per line)
TRAINED = [
    "a1_bahdanau",
    "a2_transformer",
    "a4_bert",
    "a5_gpt",
    "a6_vit",
]


def _source(name):
    return nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)


def _regions(text, begin, end):
    """The text between each ``begin`` and ``end`` marker line."""
    return re.findall(rf"^[ \t]*### {begin}\n(.*?)^[ \t]*### {end}", text, re.M | re.S)


def _solved_release(name, **edits):
    """What a student who solved everything hands in: the released notebook with the
    source's solutions typed into the answer cells, and a scratch cell of their own;
    ``edits``: answer grade_id -> function that changes that answer's code."""
    source = {grader_cells.grade_id(c): c for c in _source(name).cells if grader_cells.is_answer_cell(c)}
    nb = nbformat.read(RELEASE / name / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if grader_cells.is_answer_cell(cell):
            gid = grader_cells.grade_id(cell)
            cell.source = "\n".join(line for line in source[gid].source.split("\n")
                                    if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
            if gid in edits:
                changed = edits.pop(gid)(cell.source)
                assert changed != cell.source, f"the edit of {gid} changed nothing"
                cell.source = changed
    assert not edits, f"no answer cell {sorted(edits)}"
    nb.cells.append(nbformat.v4.new_code_cell("print('my own experiments')"))
    return nb


# ---- the source notebooks ------------------------------------------------------------

def test_three_assignments_with_their_points():
    assert sorted(grader_cells.source_notebooks()) == NAMES
    for name in NAMES:
        assert sum(grader_cells.points(_source(name)).values()) == POINTS[name]


@pytest.mark.parametrize("name", NAMES)
def test_source_metadata_is_nbgrader_consistent(name):
    nb = _source(name)
    ids = [grader_cells.grade_id(c) for c in nb.cells if grader_cells.grade_id(c)]
    assert len(ids) == len(set(ids)), "grade_ids must be unique"
    for cell in nb.cells:
        meta = grader_cells.nbgrader_meta(cell)
        has_solution = "### BEGIN SOLUTION" in cell.source
        has_hidden = "### BEGIN HIDDEN TESTS" in cell.source
        assert has_solution == bool(meta.get("solution")), f"{cell.id}: solution region <-> solution cell"
        if has_hidden:
            assert grader_cells.is_test_cell(cell), f"{cell.id}: hidden tests only in test cells"
        if grader_cells.is_test_cell(cell):
            assert meta["locked"] and meta["points"] > 0 and "assert" in cell.source
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "sources are stored without outputs"
    answers = [grader_cells.grade_id(c) for c in nb.cells if grader_cells.is_answer_cell(c)]
    assert len(answers) >= 4
    assert sum("### BEGIN HIDDEN TESTS" in c.source for c in nb.cells) >= 3


@pytest.mark.parametrize("name", TRAINED)
def test_training_assignments_ship_a_small_checkpoint_and_a_flag(name):
    import torch
    nb = _source(name)
    flag = next(c for c in nb.cells if grader_cells.grade_id(c) == grader_cells.SKIP_TRAINING_ID)
    assert flag.source.startswith("skip_training = False")
    (checkpoint,) = grader_cells.reference_checkpoints(SOURCE, name)
    assert checkpoint.stat().st_size < 2e6
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    assert state["optimizer"] is None and state["config"] and state["model"]
    if name in ("a1_bahdanau", "a2_transformer"):  # translation models carry their vocabulary
        assert state["extra"]["tgt_vocab"][:4] == ["<pad>", "<sos>", "<eos>", "<unk>"]


@pytest.mark.integration
@pytest.mark.parametrize("name", TRAINED)  # a3: alice of the mixed folder below
def test_source_notebook_passes_all_its_tests(name, tmp_path):
    nb = _source(name)
    for cell in nb.cells:
        if grader_cells.grade_id(cell) == grader_cells.SKIP_TRAINING_ID:
            cell.source = "skip_training = True"
    for checkpoint in grader_cells.reference_checkpoints(SOURCE, name):
        (tmp_path / checkpoint.name).write_bytes(checkpoint.read_bytes())
    # under the device check (COURSE_DEVICE=check: a CUDA GPU pretended on the CPU, the fast
    # profile kept): this run is also the assignment's device check in `make integration`
    grader_sandbox.execute(nb, tmp_path, 600, env={**grader_run.GRADING_ENV, "COURSE_DEVICE": "check"})
    errors = [(c.id, o.ename, o.evalue[:200]) for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert errors == []
    assert any("device: cuda:0" in "".join(o.get("text", "")) for c in nb.cells if c.cell_type == "code"
               for o in c.outputs), "setup() did not run under the device check"
    from nbgrader.utils import determine_grade
    assert sum(determine_grade(c)[0] for c in nb.cells if grader_cells.is_test_cell(c)) == POINTS[name]


# ---- the release -----------------------------------------------------------------------

def test_release_is_up_to_date():
    files = grader_release.release_files()
    for rel, content in files.items():
        path = RELEASE / rel
        assert path.exists() and path.read_bytes() == content, f"{path} is stale: run `make assignments`"
    manifest = grader_release.read_manifest(RELEASE)
    assert {rel: grader_release.sha256(c) for rel, c in files.items()} == {rel: manifest[rel] for rel in files}


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
    answers = [c for c in released.cells if grader_cells.is_answer_cell(c)]
    assert answers and all("raise NotImplementedError()" in c.source for c in answers)
    assert all(not c.outputs for c in released.cells if c.cell_type == "code")
    tests = [c for c in released.cells if grader_cells.is_test_cell(c)]
    assert all(c.metadata["editable"] is False and c.metadata["nbgrader"]["checksum"] for c in tests)
    assert grader_cells.points(released) == grader_cells.points(source)


@pytest.mark.integration
@pytest.mark.parametrize("name", NAMES)
def test_released_notebook_runs_up_to_the_first_stub(name, tmp_path):
    import os

    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    nb = nbformat.read(RELEASE / name / f"{name}.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",  # stops at the first error
                            resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError) as info:
        client.execute(env={**os.environ, **grader_run.GRADING_ENV})
    assert info.value.ename == "NotImplementedError"
    ran = [c for c in nb.cells if c.cell_type == "code" and c.execution_count is not None]
    failed = ran[-1]
    assert grader_cells.is_test_cell(failed), "the first failure is the test of the first answer"
    assert all(not any(o.output_type == "error" for o in c.outputs) for c in ran[:-1])
    first_answer = next(i for i, c in enumerate(nb.cells) if grader_cells.is_answer_cell(c))
    assert nb.cells.index(failed) > first_answer


# ---- making the release never overwrites a student's changes ---------------------------

def test_release_refuses_to_overwrite_a_changed_file(tmp_path):
    lines = grader_release.release(SOURCE, tmp_path)
    assert all("new" in line for line in lines)
    assert all("unchanged" in line for line in grader_release.release(SOURCE, tmp_path))
    edited = tmp_path / "a3_bpe" / "a3_bpe.ipynb"
    edited.write_text(edited.read_text().replace("raise NotImplementedError()", "return Counter()", 1))
    before = edited.read_bytes()
    with pytest.raises(grader_cells.AssignmentError, match=r"(?s)refusing to overwrite 1 file.*a3_bpe\.ipynb.*FORCE=1"):
        grader_release.release(SOURCE, tmp_path)
    assert edited.read_bytes() == before
    lines = grader_release.release(SOURCE, tmp_path, force=True)
    assert any("overwritten" in line and "a3_bpe" in line for line in lines)
    assert edited.read_bytes() == grader_release.release_files()["a3_bpe/a3_bpe.ipynb"]


def test_release_updates_what_it_wrote_and_refuses_unknown_files(tmp_path):
    grader_release.release(SOURCE, tmp_path)
    old = tmp_path / "a1_bahdanau" / "a1_bahdanau.ipynb"
    manifest = grader_release.read_manifest(tmp_path)
    # a file written by an older release (its hash is in the manifest) is updated
    old.write_text(old.read_text() + " ")
    manifest["a1_bahdanau/a1_bahdanau.ipynb"] = grader_release.sha256(old.read_bytes())
    (tmp_path / grader_release.MANIFEST).write_text("".join(f"{h}  {r}\n" for r, h in manifest.items()))
    assert any("updated" in line and "a1_bahdanau" in line for line in grader_release.release(SOURCE, tmp_path))
    # a file that is there but was never written by release (no manifest) is not touched
    (tmp_path / grader_release.MANIFEST).unlink()
    old.write_text("{}")
    with pytest.raises(grader_cells.AssignmentError, match="a1_bahdanau.ipynb"):
        grader_release.release(SOURCE, tmp_path)


# ---- grading -----------------------------------------------------------------------------

def test_assembly_trusts_only_the_answer_cells():
    nb = _solved_release("a2_transformer")
    test_cell = next(c for c in nb.cells if grader_cells.grade_id(c) == "test_attention")
    test_cell.source = "pass  # the student emptied the test"
    nb.cells = [c for c in nb.cells if grader_cells.grade_id(c) != "masks"]  # and deleted an answer
    for cell in nb.cells:
        if grader_cells.grade_id(cell) == grader_cells.SKIP_TRAINING_ID:
            cell.source = "skip_training = False"
    out = grader_assemble.assemble(nb, _source("a2_transformer"))
    cells = {grader_cells.grade_id(c): c for c in out.nb.cells if grader_cells.grade_id(c)}
    assert "### BEGIN HIDDEN TESTS" in cells["test_attention"].source
    assert cells["masks"].source.count("raise NotImplementedError()") == 2 and out.missing == ["masks"]
    assert cells[grader_cells.SKIP_TRAINING_ID].source.startswith("skip_training = True")
    assert "print('my own experiments')" not in "".join(c.source for c in out.nb.cells)
    assert out.ignored == 2  # the scratch cell and the emptied test
    assert [c.id for c in out.nb.cells] == [c.id for c in _source("a2_transformer").cells]


@pytest.mark.integration  # grades: needs bubblewrap
def test_bad_submissions_get_a_clear_error(tmp_path, capsys):
    with pytest.raises(grader_cells.AssignmentError, match="does not exist"):
        grader_run.grade(tmp_path / "missing.ipynb")
    (tmp_path / "answer.py").write_text("print(1)")
    with pytest.raises(grader_cells.AssignmentError, match="not a Jupyter notebook"):
        grader_run.grade(tmp_path / "answer.py")
    (tmp_path / "broken.ipynb").write_text("{not json")
    with pytest.raises(grader_cells.AssignmentError, match="not a readable Jupyter notebook"):
        grader_run.grade(tmp_path / "broken.ipynb")
    with pytest.raises(grader_cells.AssignmentError, match="not one of the assignments.*a1_bahdanau"):
        grader_run.grade(ROOT / "notebooks" / "00_welcome.ipynb")
    with pytest.raises(grader_cells.AssignmentError, match="is a folder"):
        grader_run.grade(tmp_path)
    assert grader_cli.main(["grade"]) == 2
    assert "make grade SUBMISSION=" in capsys.readouterr().err


# ---- no points for the reference answer ----------------------------------------------------

def _checked(name, **edits):
    """The answer check of a solved submission with ``edits`` (no kernel is started)."""
    return grader_assemble.check_answers(grader_assemble.assemble(_solved_release(name, **edits), _source(name)).nb, _source(name))


def _replace(old, new):
    return lambda code: code.replace(old, new)


def _append(extra):
    return lambda code: code + "\n" + extra


@pytest.mark.parametrize("name", NAMES)
def test_correct_answers_and_the_allowed_imports_raise_no_flag(name):
    assert _checked(name).findings == []
    # what the locked cells hand out may be used in an answer, imported again or not
    allowed = {  # one per line
        "a1_bahdanau": "from course_utils.seq2seq import Encoder\nfrom course_utils.data import tokenize as tok",
        "a2_transformer": "import course_utils.data as D\n_vocab = D.PAD_ID\nfrom course_utils.training import train",
        "a3_bpe": "from course_utils import setup\nfrom collections import Counter",
        "a4_bert": "from course_utils.bert import BertConfig\nfrom course_utils.transformer import EncoderLayer as Layer",
        "a5_gpt": "from course_utils.gpt import GPTConfig as Config\nimport course_utils.training as T\n_steps = T.train",
        "a6_vit": "from course_utils.vit_training import image_batches\nfrom course_utils.transformer import EncoderLayer as Layer",
    }[name]
    answer = next(grader_cells.grade_id(c) for c in _source(name).cells if grader_cells.is_answer_cell(c))
    report = _checked(name, **{answer: _append(allowed)})
    assert report.findings == [] and report.zeroed == {}


def test_a_listed_tensor_method_is_flagged_as_a_method_call():
    # a6 lists torch.Tensor.unfold: images.unfold(...) is that call as much as torch.Tensor.unfold(images, ...)
    report = _checked("a6_vit", patchify=_replace("x = images.reshape(b, c, h // p, p, w // p, p)",
                      "x = images.unfold(2, p, p).unfold(3, p, p).permute(0, 1, 2, 4, 3, 5)"))
    assert "torch.Tensor.unfold" in report.zeroed["test_patchify"]
    assert sorted(report.zeroed) == sorted(grader_cells.points(_source("a6_vit")))  # and every later question


def test_the_allowed_names_come_from_the_locked_cells():
    source = _source("a2_transformer")
    rules = grader_assemble.answer_rules(source)
    assert rules.verdict("course_utils.transformer.TransformerConfig") is None      # the setup cell imports it
    assert rules.verdict("course_utils.transformer.EncoderLayer") == "reference"    # only a test cell does
    assert rules.verdict("course_utils.attention.causal_mask") == "reference"
    assert rules.verdict("torch.nn.MultiheadAttention") == "reference"             # metadata of the source
    assert rules.verdict("torch.nn.modules.activation.MultiheadAttention") == "reference"  # the same object
    assert rules.verdict("torch.nn.Linear") is None
    # 04's recipe is handed out (the setup cell imports it): its numbers are data, its method allowed
    assert rules.verdict("course_utils.recipes.TRANSFORMER_FAST.max_steps") is None
    assert rules.verdict("course_utils.recipes.TRANSFORMER_FAST.model_config") is None
    assert rules.verdict("course_utils.recipes.GPT_FAST") == "reference"            # not handed out
    assert rules.verdict("course_utils.recipes.TRANSFORMER_FAST.lr.hex") is None       # a number's method
    assert rules.verdict("course_utils.attention.__file__") == "reference"            # a reference module's text
    assert rules.verdict("course_utils.attention.__doc__") == "reference"
    setup = next(c for c in source.cells if grader_cells.grade_id(c) == "setup")
    setup.source += "\nfrom course_utils.attention import causal_mask"           # handed out: now allowed
    assert grader_assemble.answer_rules(source).verdict("course_utils.attention.causal_mask") is None
    source.metadata["course"]["reference_answers"].append("torch.nn.no_such_layer")
    with pytest.raises(ValueError, match="no_such_layer"):
        grader_assemble.answer_rules(source)


REFERENCE_USES = {  # answer -> edit, (what is reported, the questions that score 0)
    "from import": ("attention", lambda code: "from course_utils.attention import scaled_dot_product_attention",
                    "course_utils.attention.scaled_dot_product_attention", "test_attention"),
    "from a package": ("masks", lambda code: "from course_utils import attention\n"
                       "padding_mask, causal_mask = attention.padding_mask, attention.causal_mask",
                       "course_utils.attention.causal_mask", "test_masks"),
    "module attribute": ("positional_encoding", lambda code: "import course_utils.positional\n"
                         "def sinusoidal_encoding(max_len, d_model):\n"
                         "    return course_utils.positional.sinusoidal_encoding(max_len, d_model)",
                         "course_utils.positional.sinusoidal_encoding", "test_positional_encoding"),
    "torch's layer": ("multi_head_attention", _append("_layer = nn.MultiheadAttention"),
                      "torch.nn.MultiheadAttention", "test_multi_head_attention"),  # bound to a name no test reaches: costs the same
    "a module in a container": ("multi_head_attention", _append("_ms = (torch.nn.modules.activation,)\n_layer = _ms[0].MultiheadAttention"),
                                "the module torch.nn.modules.activation as a value", "test_multi_head_attention"),
    "a reference module's __file__": ("attention", _append("import course_utils.attention as _ca\n_text = _ca.__file__"),
                                      "course_utils.attention.__file__", "test_attention"),
    "torch's function": ("attention", lambda code: "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                         "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None",
                         "torch.nn.functional.scaled_dot_product_attention", "test_attention"),
    "a name a test cell imported": ("transformer", _replace("DecoderLayer(d, cfg.num_heads", "ReferenceDecoderLayer(d, cfg.num_heads"),
                                    "course_utils.transformer.DecoderLayer", "test_transformer"),
    "__import__ and getattr": ("attention", _append("scaled_dot_product_attention = getattr(__import__('course_utils.attention').attention, 'scaled_dot_product_attention')"),
                "__import__()", "test_attention"),
}


@pytest.mark.parametrize("case", sorted(REFERENCE_USES))
def test_each_kind_of_reference_use_scores_zero_with_the_reason(case):
    answer, edit, what, question = REFERENCE_USES[case]
    report = _checked("a2_transformer", **{answer: edit})
    assert what in [f.what for f in report.findings]
    if question is None:  # bound to a name no test reaches: reported, no points taken
        assert report.zeroed == {} and report.flags == ["reference import"]
        return
    assert what in report.zeroed[question] and f"answer cell '{answer}'" in report.zeroed[question]
    # only the questions whose code reaches it, and every later one that uses that answer
    order = list(grader_cells.points(_source("a2_transformer")))
    assert set(report.zeroed) <= set(order[order.index(question):])


def test_a_helper_in_another_answer_cell_is_followed():
    report = _checked("a2_transformer",
                      masks=_append("from course_utils import attention as _att"),
                      multi_head_attention=_replace("scaled_dot_product_attention(", "_att.scaled_dot_product_attention("))
    assert [f.cell for f in report.findings] == ["multi_head_attention"]
    assert "test_masks" not in report.zeroed and "test_attention" not in report.zeroed
    assert "course_utils.attention.scaled_dot_product_attention" in report.zeroed["test_multi_head_attention"]
    assert {"test_encoder_layer", "test_decoder_layer", "test_transformer", "test_translation"} <= set(report.zeroed)
    # a helper bound in one answer cell and called by the graded function of another
    report = _checked("a3_bpe", count_pairs=_append("from course_utils.bpe import train_bpe as _fast"),
                      train_bpe=lambda code: "def train_bpe(word_freqs, num_merges):\n    return _fast(word_freqs, num_merges)")
    assert "through _fast" in report.zeroed["test_train_bpe_slides"]
    assert "test_count_pairs" in report.zeroed  # the cell that holds the import: its own question too


@pytest.mark.parametrize("edit, what", [
    (_append("torch.testing.assert_close = lambda *args, **kwargs: None"), "torch.testing.assert_close"),
    (_append("setattr(torch, 'allclose', lambda *args, **kwargs: True)"), "torch.allclose"),
    # an alias made inside a function (issue 38's red team: only top-level aliases were followed)
    (_append("def _quiet():\n    T = torch.Tensor\n    T.clone = lambda self, *a, **k: self\n_quiet()"),
     "torch.Tensor.clone"),
    (_append("def _quiet():\n    t = torch.testing\n    tt = t\n    setattr(tt, 'assert_close', print)\n_quiet()"),
     "torch.testing.assert_close"),
    (_append("bleu = lambda hypotheses, references: 100.0"), "bleu"),
    (_append("len = lambda x: 4"), "len"),
    (_append("import importlib\n_m = importlib.import_module('course_' + 'utils.attention')"), "importlib"),
    (_append("exec('from course_utils.attention import causal_mask')"), "exec()"),
    (_append("%run my_helpers.py"), "get_ipython()"),
    (_append("_g = train.__globals__"), ".__globals__"),
    (_append("import sys\n_a = sys.modules['course_utils.attention']"), "sys.modules"),
    (_append("open('helper.py', 'w').write('from course_utils.attention import *')\nimport helper"),
     "import helper, a module that is not installed"),
])
def test_monkeypatching_and_hidden_code_zero_every_later_question(edit, what):
    report = _checked("a2_transformer", masks=edit)
    assert what in [f.what for f in report.findings]
    order = list(grader_cells.points(_source("a2_transformer")))
    assert sorted(report.zeroed) == sorted(order[order.index("test_masks"):])
    assert "test_attention" not in report.zeroed


#: writes into torch that the reading of the code does not see (issue 38's red team found about 45
#: forms; these are the easiest for a student). The course's grader catches them when they run
#: (grader_sandbox.changed: tests/test_grader_redteam.py's RUNTIME_WRITES hold these and 22 more);
#: `nbgrader autograde`, which has no such check, does not (README).
STATIC_HOLES = {
    "tuple unpacking": "T, = (torch.Tensor,)\nT.clone = lambda self, *a, **k: self",
    "under an if": "if True:\n    T = torch.Tensor\n    T.clone = lambda self, *a, **k: self",
    "a loop target": "for T in (torch.testing,):\n    setattr(T, 'assert_close', print)",
    "type() of a tensor": "type(torch.zeros(1)).clone = lambda self, *a, **k: self",
    "through a parameter": "def _hack(T):\n    T.clone = lambda self, *a, **k: self\n_hack(torch.Tensor)",
}


@pytest.mark.parametrize("code", [pytest.param(c, id=k, marks=pytest.mark.xfail(strict=True, reason="not seen in the code: caught at run time instead"))
                                  for k, c in STATIC_HOLES.items()])
def test_a_write_into_torch_in_any_form_is_flagged(code):
    assert [f.kind for f in _checked("a2_transformer", masks=_append(code)).findings] == ["monkeypatch"]


def test_ordinary_code_in_an_answer_is_not_flagged():
    report = _checked("a2_transformer", attention=_append(
        "q = torch.randn(3)\nout = q * 2\nprint(out)\n"  # test_attention binds q and out before reading them
        "import os\nimport numpy as np\n_here = os.path.exists('transformer.pt')\n_x = np.zeros(3)\n"
        # local names bound to a tensor or a parameter, then written into: the student's own objects
        "def _frozen(m):\n    w = m.weight\n    w.requires_grad = False\n    z = torch.zeros(3)\n    z[0] = 1.0\n"
        "    return w, z\n"
        # a name first bound to an imported class or value, then to an object of the student's own
        # (issue 38's red team: the local-alias rule once kept the first binding)
        "def _rebound(x, n):\n    t = torch.Tensor\n    assert isinstance(x, t)\n    t = x.clone()\n    t[0] = 0\n"
        "    layer = torch.nn.Linear\n    layer = layer(4, 4)\n    layer.bias = None\n"
        "    pe = math.pi\n    pe = torch.empty(n, 2)\n    pe[:, 0] = 1.0\n    return t, layer, pe\n"
        "class _Two(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        norm = torch.nn.LayerNorm\n        self.norm = norm(4)\n"
        "    def forward(self, norm):\n        norm[:, 0] = 0\n        return norm\n"
        "def _outer():\n    w = torch.nn.Linear\n    def _inner(w):\n        w.weight.data[0] = 0\n"
        "    return _inner(w(2, 2))"))
    assert report.findings == []
    # a private name that a hidden test uses (the student cannot see the tests) is the student's
    report = _checked("a2_transformer", multi_head_attention=_append("def _mask(n):\n    return n"))
    assert report.findings == []


_PATCHIFY = "def patchify(images, patch_size):\n"
# the red team's doors to the reference (a6_vit, F2): no course_utils import in sight, or a
# listed method reached by its name; each is hidden code and costs every question from the first
HIDDEN_DOORS = {  # name -> patchify answer cell
    "pydoc.locate": "from pydoc import locate\n" + _PATCHIFY + "    return locate('course_utils.vit.patchify')(images, patch_size)",
    "timeit runs a string": "import timeit\n_box = []\ntimeit.timeit('from course_utils.vit import patchify as p; "
                            "box.append(p)', number=1, globals={'box': _box})\npatchify = _box[0]",
    "torch._utils": _PATCHIFY + "    return torch._utils._import_dotted_name('course_utils.vit.patchify')(images, patch_size)",
    "operator.methodcaller": "import operator\n" + _PATCHIFY + "    return operator.methodcaller('unfold', 2, patch_size, patch_size)(images)",
    "torch.ops": _PATCHIFY + "    return torch.ops.aten.im2col(images, [patch_size] * 2, [1, 1], [0, 0], [patch_size] * 2).transpose(1, 2)",
    "getattr a listed method": _PATCHIFY + "    return getattr(images, 'unfold')(2, patch_size, patch_size)",
    "getattr a computed name": _PATCHIFY + "    return getattr(images, 'un' + 'fold')(2, patch_size, patch_size)",
    "getattr as a value": "import functools\n" + _PATCHIFY + "    return functools.partial(getattr, images)('unfold')(2, patch_size, patch_size)",
    "torch._C": _PATCHIFY + "    return torch._C._nn.upsample_nearest2d(images, None, [1.0, 1.0])",  # any private name
    "a module through an allowed one": "import os\n" + _PATCHIFY + "    return os.sys.modules['course_utils.vit'].patchify(images, patch_size)",
    "string.Formatter": "import string\n" + _PATCHIFY + "    return string.Formatter().get_field('0.unfold', [images], {})[0](2, patch_size, patch_size)",
    "unpickling": _PATCHIFY + "    return torch.load('helper.pt', weights_only=False)(images, patch_size)",
    # the a4 and a5 red teams
    "torch.utils.benchmark": "_box = []\ntorch.utils.benchmark.Timer(stmt='box.append(p)', setup='from course_utils.vit "
                             "import patchify as p', globals={'box': _box}).timeit(1)\npatchify = _box[0]",
    "a child process": "import os\n_out = os.popen('python -c \"print(1)\"').read()\n" + _PATCHIFY + "    return images",
    "a module through a module": "import os\n" + _PATCHIFY + "    return os.path.sys.modules['course_utils.vit'].patchify(images, patch_size)",
    "pickle through torch.serialization": _PATCHIFY + "    return torch.serialization.pickle.loads(b'x')(images, patch_size)",
    "weights_only in a dict": _PATCHIFY + "    return torch.load('helper.pt', **{'weights_only': False})(images, patch_size)",
    "the environment": "import os\nos.environ.update({'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD': '1'})\n" + _PATCHIFY + "    return images",
    # the red team of issue 37: eval reached through a builtin's module, a frame, a string annotation
    "a builtin's __self__": "_ref = print.__self__.eval(\"__import__('course_utils.vit', fromlist=['x']).patchify\")\n"
                            + _PATCHIFY + "    return _ref(images, patch_size)",
    "a generator's frame": "_ref = (x for x in ()).gi_frame.f_builtins['eval'](\"__import__('course_utils.vit', "
                           "fromlist=['x']).patchify\")\n" + _PATCHIFY + "    return _ref(images, patch_size)",
    "a traceback's frame": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    _b = e.__traceback__.tb_frame.f_builtins\n"
                           + _PATCHIFY + "    return images",
    "singledispatch evaluates a string annotation": (
        "import functools\n@functools.singledispatch\ndef _d(x):\n    pass\n"
        "def _h(x: \"(_ref := __import__('course_utils.vit', fromlist=['x']).patchify) and int\"):\n    pass\n"
        "_d.register(_h)\n" + _PATCHIFY + "    return _ref(images, patch_size)"),
    "__import__ in a string annotation": "def _h(x: 'list[__import__(\"course_utils.vit\").vit.patchify]'):\n    pass\n"
                                         + _PATCHIFY + "    return images",
    "strings in strings, deeper than the check reads": "def _h(x: " + repr(__import__("functools").reduce(
        lambda inner, _: repr(inner), range(9), "int")) + "):\n    pass\n" + _PATCHIFY + "    return images",
    "a return annotation": "def _h(x) -> (_ref := __import__('course_utils.vit', fromlist=['x']).patchify):\n    pass\n"
                           + _PATCHIFY + "    return _ref(images, patch_size)",
}


@pytest.mark.parametrize("door", sorted(HIDDEN_DOORS))
def test_imports_outside_the_allowed_modules_and_names_reached_by_string_are_hidden_code(door):
    report = _checked("a6_vit", patchify=lambda code: HIDDEN_DOORS[door])
    assert "hidden code" in report.flags, report.findings
    assert sorted(report.zeroed) == sorted(grader_cells.points(_source("a6_vit"))), "every question from the first"


@pytest.mark.parametrize("store", [
    "_impl = {}\n" + _PATCHIFY + "    return _impl['f'](images, patch_size)\n"
    "from course_utils import vit as _v\n_impl['f'] = _v.patchify",
    "_impl = {}\n" + _PATCHIFY + "    return _impl['f'](images, patch_size)\n"
    "from course_utils.vit import patchify as _p\n_impl.update(f=_p)",
])
def test_a_reference_stored_into_an_object_costs_its_question_and_every_later_one(store):
    # F3: the test's code reaches `_impl`, whose item the later statement wrote; no tracing needed
    report = _checked("a6_vit", patchify=lambda code: store)
    assert report.flags == ["reference import"]
    assert sorted(report.zeroed) == sorted(grader_cells.points(_source("a6_vit")))
    assert "answer cell 'patchify'" in report.zeroed["test_patchify"]


def test_a_reference_method_set_on_the_class_after_it_costs_from_that_cell():
    report = _checked("a6_vit", vit=_append("from course_utils.vit import ViT as _R\nViT.embed = _R.embed\n"
                                            "ViT.forward = _R.forward"))
    order = list(grader_cells.points(_source("a6_vit")))
    assert report.flags == ["reference import"] and "course_utils.vit.ViT" in report.zeroed["test_embed"]
    assert sorted(report.zeroed) == sorted(order[order.index("test_embed"):])
    assert "test_patchify" not in report.zeroed and "test_unpatchify" not in report.zeroed


def test_honest_answers_written_another_way_raise_no_flag():
    loops = (_PATCHIFY + "    b, c, h, w = images.shape\n    out = []\n"
             "    for r in range(h // patch_size):\n        for s in range(w // patch_size):\n"
             "            out.append(images[:, :, r * patch_size:(r + 1) * patch_size, "
             "s * patch_size:(s + 1) * patch_size].reshape(b, -1))\n    return torch.stack(out, dim=1)\n"
             "import math, itertools, functools, collections, typing, dataclasses, heapq, re, string, statistics, random, copy\n"
             "import numpy as np\nfrom torch.nn import functional as _F\nimport torch.utils.data\n"
             "_size = getattr(torch, 'float32')\n_ok = hasattr(nn.Module, 'forward')\n"
             "_here = Path('vit.pt').exists()\nfrom pathlib import Path\n"  # what a read-only cell hands out
             "def _typed(x: 'torch.Tensor', n: 'int' = 2) -> 'list[torch.Tensor]':\n    return [x] * n\n"
             "_counts: 'dict[str, int]' = {}")  # forward references, read as the code they name
    rollout = ("def attention_rollout(weights):\n    t = weights[0].shape[-1]\n"
               "    eye = torch.eye(t, dtype=torch.float64, device=weights[0].device)\n    result = eye\n"
               "    for w in weights:\n        a = 0.5 * w.double().mean(dim=1) + 0.5 * eye\n"
               "        result = torch.matmul(a, result)\n    return result.to(weights[0].dtype)")
    report = _checked("a6_vit", patchify=lambda code: loops, rollout=lambda code: rollout)
    assert report.findings == [] and report.zeroed == {}


# ---- a folder in, a CSV out -----------------------------------------------------------------

# seconds per submission in the mixed folder: a3 runs in 5-15 s in its sandbox on a 2-core Xeon, 50-75 s on a
# loaded 2-core AMD EPYC, where 60 s cut its last probe (hal: 10-50 s on the Xeon); the infinite loop
# waits the whole limit, beside the other submissions
TIME_LIMIT = 120
EXPECTED_CSV = """\
student,assignment,a1_bahdanau:test_additive_attention,a1_bahdanau:test_decoder_step,a1_bahdanau:test_loss,a1_bahdanau:test_translation,a2_transformer:test_attention,a2_transformer:test_masks,a2_transformer:test_positional_encoding,a2_transformer:test_multi_head_attention,a2_transformer:test_encoder_layer,a2_transformer:test_decoder_layer,a2_transformer:test_transformer,a2_transformer:test_loss,a2_transformer:test_translation,a3_bpe:test_count_pairs,a3_bpe:test_merge_pair,a3_bpe:test_train_bpe_slides,a3_bpe:test_train_bpe_tokenizers,a3_bpe:test_encode_slides,a3_bpe:test_encode_reference,a4_bert:test_mask_tokens_rule,a4_bert:test_mask_tokens_bulk,a4_bert:test_embeddings,a4_bert:test_pretraining_loss,a4_bert:test_classifier,a4_bert:test_accuracy,a5_gpt:test_attention,a5_gpt:test_block,a5_gpt:test_model,a5_gpt:test_loss,a5_gpt:test_sampling,a5_gpt:test_cache,a5_gpt:test_perplexity,a6_vit:test_patchify,a6_vit:test_unpatchify,a6_vit:test_embed,a6_vit:test_forward,a6_vit:test_rollout,a6_vit:test_accuracy,total,max,flags,error
alice,a3_bpe,,,,,,,,,,,,,,1,1,2,2,1,2,,,,,,,,,,,,,,,,,,,,9,9,,
bob,a3_bpe,,,,,,,,,,,,,,1,1,0,0,1,2,,,,,,,,,,,,,,,,,,,,5,9,,
carol,a3_bpe,,,,,,,,,,,,,,0,0,0,0,0,0,,,,,,,,,,,,,,,,,,,,0,9,reference import,
dave,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,submission dave.ipynb is not a readable Jupyter notebook: NotJSONError: Notebook does not appear to be JSON: ''
erin,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,submission erin.py is not a Jupyter notebook (expected a .ipynb file)
frank,a3_bpe,,,,,,,,,,,,,,1,0,0,0,0,0,,,,,,,,,,,,,,,,,,,,1,9,timed out,
gina,a1_bahdanau,0,0,0,0,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,0,12,no checkpoint: reference weights used,
hal,a2_transformer,,,,,2,2,2,3,2,3,0,0,0,,,,,,,,,,,,,,,,,,,,,,,,,,14,22,,
ivy,a4_bert,,,,,,,,,,,,,,,,,,,,1,2,2,2,3,4,,,,,,,,,,,,,,14,14,,
jay,a4_bert,,,,,,,,,,,,,,,,,,,,0,0,0,0,0,0,,,,,,,,,,,,,,0,14,no checkpoint: reference weights used,
kim,a5_gpt,,,,,,,,,,,,,,,,,,,,,,,,,,3,2,3,1,3,3,4,,,,,,,19,19,,
leo,a5_gpt,,,,,,,,,,,,,,,,,,,,,,,,,,0,0,0,0,0,0,0,,,,,,,0,19,no checkpoint: reference weights used,
mia,a6_vit,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,2,1,2,3,3,4,15,15,,
ned,a6_vit,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,0,0,0,0,0,0,0,15,no checkpoint: reference weights used,
"""


def _class_folder(folder):
    """Fourteen submissions: correct, broken (BPE ties by string), import-cheat, empty, not a
    notebook, an infinite loop, the a1 release as handed out (no checkpoint), an a2
    folder with a checkpoint whose model forgets the source mask in cross-attention (a
    forgiving bug: its visible BLEU test passes with trained weights), and a correct one and
    the release as handed out of each of a4, a5 and a6."""
    folder.mkdir()
    # alice: correct, with top-level loops, helper variables and prints beside her answers (issue 33:
    # such code was once flagged as a monkeypatch)
    nbformat.write(_solved_release("a3_bpe", count_pairs=_append(
        "for w, c in {'hug': 10, 'pug': 5}.items():\n    print(w, c, count_pairs({tuple(w): c}))\n"
        "word, counts = 'hugs', count_pairs({tuple('hugs'): 1})\nprint(word, counts)"),
        train_bpe=_append("for d in (4, 8):\n    print(d, train_bpe({'hug': 10, 'pug': d}, 2))")),
        folder / "alice.ipynb")
    nbformat.write(_solved_release("a3_bpe", train_bpe=_replace("(pairs[p], -ids[p[0]], -ids[p[1]])", "(pairs[p], p)")),
                   folder / "bob.ipynb")
    nbformat.write(_solved_release("a3_bpe", train_bpe=lambda code: "from course_utils.bpe import train_bpe",
                                   count_pairs=lambda code: "import course_utils.bpe as B\ncount_pairs = B.count_pairs"),
                   folder / "carol.ipynb")
    (folder / "dave.ipynb").write_text("")
    (folder / "erin.py").write_text("def count_pairs(corpus):\n    ...\n")
    # a loop that never ends (it waits rather than spins: a busy loop would take a core from
    # the other tests for the whole time limit, and the limit stops both the same way)
    nbformat.write(_solved_release("a3_bpe", merge_pair=lambda code: "import time\nwhile True:\n    time.sleep(0.05)"),
                   folder / "frank.ipynb")
    (folder / "gina.ipynb").write_bytes((RELEASE / "a1_bahdanau" / "a1_bahdanau.ipynb").read_bytes())
    (folder / "hal").mkdir()
    nbformat.write(_solved_release("a2_transformer", transformer=_replace(
        "y = layer(y, memory, self_mask, src_mask.unsqueeze(1))", "y = layer(y, memory, self_mask, None)")),
        folder / "hal" / "a2_transformer.ipynb")
    _own_checkpoint(SOURCE / "a2_transformer" / "transformer.pt", folder / "hal" / "transformer.pt")
    # the second half of the course (issue 38): a correct folder (with a checkpoint of its own)
    # and the release as handed out of each of a4-a6
    for (correct, stub), (name, checkpoint, noise) in zip(SECOND_HALF_STUDENTS, SECOND_HALF):
        (folder / correct).mkdir()
        nbformat.write(_solved_release(name), folder / correct / f"{name}.ipynb")
        _own_checkpoint(SOURCE / name / checkpoint, folder / correct / checkpoint, noise)
        (folder / f"{stub}.ipynb").write_bytes((RELEASE / name / f"{name}.ipynb").read_bytes())
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# (assignment, checkpoint, the noise that stands in for a student's own run: a5's model loses its
# lead over the bigram with 0.02 and is still its own, not a copy, with 0.01)
SECOND_HALF = [("a4_bert", "bert_books.pt", 0.02), ("a5_gpt", "gpt.pt", 0.01), ("a6_vit", "vit.pt", 0.02)]
SECOND_HALF_STUDENTS = [("ivy", "jay"), ("kim", "leo"), ("mia", "ned")]  # (correct, stub)


def _own_checkpoint(reference, path, noise=0.02):
    """A checkpoint that stands in for a student's own training run: the reference weights
    plus noise, enough not to count as a copy of the reference (which scores 0: a2's logits
    move by 28 % with 0.02, by 3 % with the 2e-3 once used here, under the 10 % that counts
    as a copy), too little to change a translation (BLEU still passes with 0.02)."""
    import torch
    state = torch.load(reference, map_location="cpu", weights_only=True)
    generator = torch.Generator().manual_seed(0)
    state["model"] = {k: v + noise * torch.randn(v.shape, generator=generator) if v.is_floating_point() else v
                      for k, v in state["model"].items()}
    torch.save(state, path)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, grading_alone):
    import time
    folder = tmp_path_factory.mktemp("class") / "submissions"
    before = _class_folder(folder)
    with grading_alone():  # (the attacked folder of test_grader_sandbox.py counts survivors)
        start = time.perf_counter()
        path, rows = grader_batch.grade_folder(folder, workers=2, time_limit=TIME_LIMIT)
        return folder, before, path, rows, time.perf_counter() - start


@pytest.mark.integration
def test_a_folder_of_mixed_submissions_gives_the_expected_csv(graded_class):
    folder, before, path, rows, seconds = graded_class
    print(f"graded {len(rows)} submissions in {seconds:.0f} s")
    assert path == folder / "grades.csv" and path.read_text() == EXPECTED_CSV
    # the infinite loop was stopped by the time limit inside the grader (its answers before the
    # loop still count), not by the hard kill 60 s later (that row would carry an error and no
    # scores). A bound on the wall time said the same on an idle machine and failed on a busy one.
    frank = next(r for r in rows if r.student == "frank")
    assert frank.flags == ["timed out"] and not frank.error and frank.total > 0
    assert {p: p.read_bytes() for p in before} == before, "the students' files were not touched"
    assert sorted(p.stem for p in (folder / "feedback").glob("*.ipynb")) == ["alice", "bob", "carol", "frank", "gina", "hal",
                                                                       "ivy", "jay", "kim", "leo", "mia", "ned"]
    summary = {p.stem: nbformat.read(p, as_version=4).cells[0].source for p in (folder / "feedback").glob("*.ipynb")}
    assert "uses course_utils.bpe.train_bpe, the reference answer (answer cell 'train_bpe')" in summary["carol"]
    assert f"not run: the submission's time limit ({TIME_LIMIT} s) was reached" in summary["frank"]
    assert "| test_translation | 0 / 4 | no checkpoint handed in" in summary["gina"]
    assert "| test_translation | 0 / 4 | with the same weights, your model and the reference one disagree" \
        in summary["hal"]
    assert "**9 / 9 points**" in summary["alice"]
    for (correct, stub), (name, _, _) in zip(SECOND_HALF_STUDENTS, SECOND_HALF):
        most = sum(grader_cells.points(_source(name)).values())
        assert f"**{most:g} / {most:g} points**" in summary[correct] and f"**0 / {most:g} points**" in summary[stub]


@pytest.mark.integration
def test_a_last_cell_cut_by_the_time_limit_is_the_time_limit(tmp_path):
    """A cell that the time limit interrupts reads as the limit, not as the student's own
    KeyboardInterrupt, also when it is the notebook's last (no cell after it says 'not run').
    Found on a slower 2-core machine: a3's last probe was cut at 60 s and the feedback said
    'the probe did not run', without the 'timed out' flag."""
    import time

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("import time\ntime.sleep(300)")])
    start = time.perf_counter()
    assert grader_sandbox.execute(nb, tmp_path, timeout=600, time_limit=10) is True
    assert time.perf_counter() - start < 200, "stopped by the limit, not by the end of the sleep"
    (error,) = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert error.ename == grader_sandbox.TIME_LIMIT_ERROR and "time limit" in error.evalue


@pytest.mark.integration  # grades: needs bubblewrap
def test_grading_a_folder_again_gives_the_same_csv(tmp_path, capsys):
    """What grading writes (grades.csv, feedback/) and hidden folders are not submissions;
    entries that cannot be graded never stop the batch (no kernel is started here: the
    mixed folder above pins the points themselves to an exact CSV)."""
    folder = tmp_path / "again"
    (folder / ".ipynb_checkpoints").mkdir(parents=True)
    (folder / "erin.txt").write_text("my notes")
    (folder / "dave.ipynb").write_text("")
    (folder / "zoe").mkdir()
    for name in ("draft.ipynb", "final.ipynb"):
        (folder / "zoe" / name).write_bytes((RELEASE / "a3_bpe" / "a3_bpe.ipynb").read_bytes())
    (folder / "feedback").mkdir()
    (folder / "feedback" / "alice.ipynb").write_text("{}")
    assert grader_cli.main(["grade", str(folder), "--time-limit", str(TIME_LIMIT)]) == 0
    first = (folder / "grades.csv").read_text()
    assert first.splitlines()[1:] == [
        "dave,,,,,submission dave.ipynb is not a readable Jupyter notebook: NotJSONError: Notebook does not appear to be JSON: ''",
        "erin,,,,,submission erin.txt is not a Jupyter notebook (expected a .ipynb file)",
        "zoe,,,,,the folder zoe/ holds 2 notebooks (expected exactly one .ipynb)"]
    assert "graded 3 submission(s)" in capsys.readouterr().out
    grader_batch.grade_folder(folder, workers=1, time_limit=TIME_LIMIT)
    assert (folder / "grades.csv").read_text() == first
    (folder / "erin").mkdir()
    with pytest.raises(grader_cells.AssignmentError, match="two submissions for 'erin'"):
        grader_batch.grade_folder(folder)
    with pytest.raises(grader_cells.AssignmentError, match="not a folder of submissions"):
        grader_batch.grade_folder(folder / "erin.txt")


NBGRADER_PAIRS = {"a3_bpe": ("alice", "bob"), **{name: pair for pair, (name, _, _) in zip(SECOND_HALF_STUDENTS, SECOND_HALF)}}
#: autograded only with COURSE_SLOW_GRADING=1 (`make grader-check`): nbgrader restores the locked
#: `skip_training = False` and trains the model again (a5 80 s, a4 37 s on a busy 2-core machine)
SLOW_AUTOGRADE = {("a4_bert", "ivy"), ("a5_gpt", "kim")}


@pytest.mark.integration
@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own, with SQLAlchemy 2
@pytest.mark.parametrize("name, student", [
    pytest.param(name, student, marks=pytest.mark.skipif(
        (name, student) in SLOW_AUTOGRADE and os.environ.get("COURSE_SLOW_GRADING") != "1",
        reason="nbgrader trains this model again: `make grader-check` runs it"))
    for name, pair in sorted(NBGRADER_PAIRS.items()) for student in pair])
def test_nbgrader_gives_the_same_points(name, student, graded_class, tmp_path, monkeypatch):
    """A throw-away nbgrader course: nbgrader's own generate_assignment and autograde (the
    hidden tests in the kernel, no sandbox) on a submission of the mixed folder (a3: the
    correct and the broken one; a4-a6: the correct one with its checkpoint and the release as
    handed out) agree with `make grade`."""
    import shutil

    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config
    folder, _, _, rows, _ = graded_class
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # its alembic
    for key, value in grader_run.GRADING_ENV.items():  # the kernel's environment, as the course's grader sets it
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    config.CourseDirectory.course_id = "attention"
    config.CourseDirectory.db_url = f"sqlite:///{tmp_path}/gradebook.db"
    config.ExecutePreprocessor.timeout = 300
    (tmp_path / "source" / name).mkdir(parents=True)
    shutil.copy(SOURCE / name / f"{name}.ipynb", tmp_path / "source" / name)
    api = NbGraderAPI(config=config)
    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        gradebook.update_or_create_assignment(name)
        gradebook.update_or_create_student(student)
    assert api.generate_assignment(name)["success"]
    target = tmp_path / "submitted" / student / name
    if (folder / student).is_dir():  # the notebook and its checkpoint
        shutil.copytree(folder / student, target)
    else:
        target.mkdir(parents=True)
        shutil.copy(folder / f"{student}.ipynb", target / f"{name}.ipynb")
    (target / "timestamp.txt").write_text("2026-11-23 10:00:00.000000 UTC")
    result = api.autograde(name, student)
    assert result["success"], result["error"]
    ours = next(r for r in rows if r.student == student)
    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        notebook = gradebook.find_submission(name, student).notebooks[0]
        theirs = {grade.name: grade.score for grade in notebook.grades}
    assert theirs == ours.scores and sum(theirs.values()) == ours.total
    assert ours.total == {"alice": 9, "bob": 5}.get(student, ours.max_total if student == NBGRADER_PAIRS[name][0] else 0)


@pytest.mark.parametrize("name", TRAINED)
def test_the_reference_checkpoint_is_trained_with_seeds_of_its_own(name):
    # Trained exactly as the release describes (seed 0, the epoch), on one thread, a student's
    # run gave the reference checkpoint bit for bit, which the grader flags as a copy and scores
    # 0 (found by a red team on a6; a4 too): the solution trains with REFERENCE_SEED instead,
    # which the release never shows, and the shipped checkpoint is the one it gave.
    (solution,) = [region for c in _source(name).cells if grader_cells.grade_id(c) == "train_model"
                   for region in _regions(c.source, "BEGIN SOLUTION", "END SOLUTION")]
    seeds = re.findall(r"^\s*REFERENCE_SEED = (\d+)", solution, re.M)
    assert len(seeds) == 1 and int(seeds[0]) not in range(100), "the reference's seed, far from the ones a student picks"
    uses = re.findall(r"seed\s*=\s*([^,)\n]+)|manual_seed\(([^)]+)\)", solution)
    assert uses and all("REFERENCE_SEED" in "".join(u) for u in uses), f"a seed not the reference's own: {uses}"
    assert "REFERENCE_SEED" not in (RELEASE / name / f"{name}.ipynb").read_text()

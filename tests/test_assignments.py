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
from grader import inside  # noqa: E402
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
    # under the device check (scripts/device_check.py, switched on by its kernel start-up file:
    # a CUDA GPU pretended on the CPU, the fast profile kept): this run is also the assignment's
    # device check in `make integration`
    from scripts.device_check import kernel_env
    checked = kernel_env(tmp_path / ".ipython")
    inside.execute(nb, tmp_path, 600, env={**grader_run.GRADING_ENV, **checked})
    errors = [(c.id, o.ename, o.evalue[:200]) for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert errors == []
    assert any("device: cuda" in "".join(o.get("text", "")) for c in nb.cells if c.cell_type == "code"
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


def _question_of(name, answer):
    """The test cells of the question whose answer cell is ``answer``: those after it, up to the next answer cell."""
    out, current = [], None
    for cell in _source(name).cells:
        if grader_cells.is_answer_cell(cell):
            current = grader_cells.grade_id(cell)
        elif grader_cells.is_test_cell(cell) and current == answer:
            out.append(grader_cells.grade_id(cell))
    return out


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


def test_a_listed_tensor_method_is_flagged_as_a_method_call_and_caps_its_own_question():
    # a6 lists torch.Tensor.unfold: images.unfold(...) is that call as much as torch.Tensor.unfold(images, ...)
    report = _checked("a6_vit", patchify=_replace("x = images.reshape(b, c, h // p, p, w // p, p)",
                      "x = images.unfold(2, p, p).unfold(3, p, p).permute(0, 1, 2, 4, 3, 5)"))
    assert "torch.Tensor.unfold" in report.zeroed["test_patchify"]
    assert sorted(report.zeroed) == ["test_patchify"]  # the other questions are judged by what they do
    assert report.flags == ["reference import"]


def test_the_references_are_the_sandboxs_tripwires_and_the_listed_libraries():
    source = _source("a2_transformer")
    rules = grader_assemble.answer_rules(source)
    assert rules.verdict("course_utils.transformer.TransformerConfig") is None      # the setup cell imports it
    assert rules.verdict("course_utils.transformer.EncoderLayer") == "reference"    # a solution defines it
    assert rules.verdict("course_utils.attention.causal_mask") == "reference"
    assert rules.verdict("torch.nn.MultiheadAttention") == "reference"             # metadata of the source
    assert rules.verdict("torch.nn.modules.activation.MultiheadAttention") == "reference"  # the same object
    assert rules.verdict("torch.nn.modules.activation") is None
    assert rules.verdict("torch.nn.Linear") is None
    # course names no question asks for are no reference answer (issue 63: Batch as a type hint, a1's warmup_scheduler)
    assert rules.verdict("course_utils.data.Batch") is None
    assert rules.verdict("course_utils.schedules.warmup_scheduler") is None
    assert rules.verdict("course_utils.recipes.TRANSFORMER_FAST.max_steps") is None
    setup = next(c for c in source.cells if grader_cells.grade_id(c) == "setup")
    setup.source += "\nfrom course_utils.attention import causal_mask"           # handed out: now allowed
    assert grader_assemble.answer_rules(source).verdict("course_utils.attention.causal_mask") is None
    source.metadata["course"]["reference_answers"].append("torch.nn.no_such_layer")
    with pytest.raises(ValueError, match="no_such_layer"):
        grader_assemble.answer_rules(source)


def test_naming_a_student_module_runs_nothing_in_the_grader():
    # issue 63: `import certifi.__main__` in an answer was imported by the check, as root (SystemExit:
    # no CSV); `from grader.__main__ import main` graded the class again inside the import lock
    for code in ("import certifi.__main__ as _w", "from grader.__main__ import main as _m", "import this as _t"):
        before = set(sys.modules)
        report = _checked("a3_bpe", count_pairs=_append(code))
        assert report.findings == [] and set(sys.modules) - before == set(), code


REFERENCE_USES = {  # answer -> edit, (what is reported, the question that scores 0)
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
                      "torch.nn.MultiheadAttention", "test_multi_head_attention"),
    "torch's function": ("attention", lambda code: "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                         "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None",
                         "torch.nn.functional.scaled_dot_product_attention", "test_attention"),
    "a name a test cell imported": ("transformer", _replace("DecoderLayer(d, cfg.num_heads", "ReferenceDecoderLayer(d, cfg.num_heads"),
                                    "course_utils.transformer.DecoderLayer", "test_transformer"),
    "a subclass of the reference": ("transformer", _append("import course_utils.transformer as _tr\n"
                                                          "class Transformer(_tr.Transformer):\n    pass"),
                                    "course_utils.transformer.Transformer", "test_transformer"),
    "a star import": ("masks", _append("from course_utils.attention import *"), "course_utils.attention.*", "test_masks"),
}


@pytest.mark.parametrize("case", sorted(REFERENCE_USES))
def test_each_kind_of_reference_use_caps_its_own_question_with_the_reason(case):
    answer, edit, what, question = REFERENCE_USES[case]
    report = _checked("a2_transformer", **{answer: edit})
    assert what in [f.what for f in report.findings]
    assert what in report.zeroed[question] and f"answer cell '{answer}'" in report.zeroed[question]
    # the questions of the answer cells that name it (a later answer calling the imported name names it
    # too), and no other
    cells = {f.cell for f in report.findings}
    assert answer in cells and sorted(report.zeroed) == sorted(q for c in cells for q in _question_of("a2_transformer", c))
    assert report.flags == ["reference import"]


def test_a_reference_caps_the_questions_of_the_cells_that_name_it_only():
    # a helper bound in one answer cell and called by the graded function of another: both cells name it
    report = _checked("a3_bpe", count_pairs=_append("from course_utils.bpe import train_bpe as _fast"),
                      train_bpe=lambda code: "def train_bpe(word_freqs, num_merges):\n    return _fast(word_freqs, num_merges)")
    assert [f.cell for f in report.findings] == ["count_pairs", "train_bpe"]
    assert sorted(report.zeroed) == sorted(_question_of("a3_bpe", "count_pairs") + _question_of("a3_bpe", "train_bpe"))
    assert "test_merge_pair" not in report.zeroed and "test_encode_slides" not in report.zeroed


@pytest.mark.parametrize("store", [
    "_impl = {}\n" + "def patchify(images, patch_size):\n" + "    return _impl['f'](images, patch_size)\n"
    "from course_utils import vit as _v\n_impl['f'] = _v.patchify",
    "_impl = {}\n" + "def patchify(images, patch_size):\n" + "    return _impl['f'](images, patch_size)\n"
    "from course_utils.vit import patchify as _p\n_impl.update(f=_p)",
])
def test_a_reference_stored_into_an_object_caps_its_question(store):
    report = _checked("a6_vit", patchify=lambda code: store)
    assert report.flags == ["reference import"]
    assert sorted(report.zeroed) == ["test_patchify"] and "answer cell 'patchify'" in report.zeroed["test_patchify"]


def test_a_reference_method_set_on_the_class_after_it_caps_that_question():
    report = _checked("a6_vit", vit=_append("from course_utils.vit import ViT as _R\nViT.embed = _R.embed\n"
                                            "ViT.forward = _R.forward"))
    assert report.flags == ["reference import"] and "course_utils.vit.ViT" in report.zeroed["test_embed"]
    assert sorted(report.zeroed) == sorted(_question_of("a6_vit", "vit"))
    assert "test_patchify" not in report.zeroed and "test_accuracy" not in report.zeroed


#: what honest students write beside their answers (issue 63: each was once flagged as hidden code or a
#: monkeypatch, and zeroed every later question); none names a reference answer
HONEST = {
    "a3_bpe": ("count_pairs", "import warnings\nwarnings.filterwarnings('ignore')\n"
               "import matplotlib.pyplot as plt\n_fig, _ax = plt.subplots()\n_ax.bar([0, 1], [2, 3])\nplt.close(_fig)\n"
               "from operator import itemgetter\n_best = max({'a': 1, 'b': 2}.items(), key=itemgetter(1))\n"
               "from tqdm.auto import tqdm\nfor _ in tqdm(range(2), disable=True):\n    pass\n"
               "import sys\nprint('debug', file=sys.stderr) if False else None\n"
               "import os\n_cores = os.cpu_count()\nos.makedirs('plots', exist_ok=True)\n"
               "import torch\ntorch.backends.cudnn.deterministic = True\ndevice = torch.device('cpu')\n"
               "from dataclasses import dataclass\n@dataclass\nclass _Cfg:\n    n: int = 2\n_fields = vars(_Cfg())\n"
               "from course_utils.data import Batch\ndef _size(b: Batch) -> int:\n    return len(b)\n"
               "def _f(x, backend=torch):\n    return backend.as_tensor(x)\n"
               "import typing\n_T = typing.Dict[str, int]\n"),
    "a2_transformer": ("multi_head_attention", "class _Heads(nn.Module):\n    def __init__(self, n):\n"
                       "        super().__init__()\n        for i in range(n):\n"
                       "            setattr(self, f'W_{i}', nn.Linear(4, 4))\n        self.n = n\n"
                       "    def forward(self, x):\n        return sum(getattr(self, f'W_{i}')(x) for i in range(self.n))\n"),
    "a5_gpt": ("attention", "_cfg = GPTConfig(vocab_size=50, context=16, d_model=32, num_heads=2, num_layers=1)\n"),
    "a1_bahdanau": ("additive_attention", "from course_utils.schedules import warmup_scheduler as _ws\n"),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_patterns_raise_no_flag(name):
    answer, code = HONEST[name]
    report = _checked(name, **{answer: _append(code)})
    assert report.findings == [] and report.zeroed == {}


def test_honest_answers_written_another_way_raise_no_flag():
    loops = ("def patchify(images, patch_size):\n    b, c, h, w = images.shape\n    out = []\n"
             "    for r in range(h // patch_size):\n        for s in range(w // patch_size):\n"
             "            out.append(images[:, :, r * patch_size:(r + 1) * patch_size, "
             "s * patch_size:(s + 1) * patch_size].reshape(b, -1))\n    return torch.stack(out, dim=1)\n"
             "import math, itertools, functools, collections, typing, dataclasses, heapq, re, string, statistics, random, copy\n"
             "import numpy as np\nfrom torch.nn import functional as _F\nimport torch.utils.data\n"
             "_size = getattr(torch, 'float32')\n_ok = hasattr(nn.Module, 'forward')\n"
             "def _typed(x: 'torch.Tensor', n: 'int' = 2) -> 'list[torch.Tensor]':\n    return [x] * n\n")
    rollout = ("def attention_rollout(weights):\n    t = weights[0].shape[-1]\n"
               "    eye = torch.eye(t, dtype=torch.float64, device=weights[0].device)\n    result = eye\n"
               "    for w in weights:\n        a = 0.5 * w.double().mean(dim=1) + 0.5 * eye\n"
               "        result = torch.matmul(a, result)\n    return result.to(weights[0].dtype)")
    report = _checked("a6_vit", patchify=lambda code: loops, rollout=lambda code: rollout)
    assert report.findings == [] and report.zeroed == {}


# ---- what the sandbox holds instead of the references (no sandbox started) -------------------

def test_the_student_side_course_package_holds_tripwires_where_the_references_were(tmp_path):
    import subprocess

    from grader import student_side
    from grader import verdicts as grader_verdicts
    path = SOURCE / "a3_bpe" / "a3_bpe.ipynb"
    questions = grader_run.questions_judged_outside(path)
    compared = student_side.compared_names(questions, grader_verdicts.reference_code(path))
    package = student_side.student_package("a3_bpe", _source("a3_bpe"), compared)
    text = (package / "bpe.py").read_text()
    original = (ROOT / "course_utils" / "bpe.py").read_text()
    assert "def train_bpe(*args, **kwargs):\n    raise ReferenceAnswerAbsent(" in text and text != original
    assert "ids[p[0]]" in original and "ids[p[0]]" not in text, "the reference's code is not in the copy"
    assert not list(package.rglob("*.pyc")) or all(p.stat().st_size > 0 for p in package.rglob("*.pyc"))
    script = ("import course_utils.bpe as b, course_utils\n"
              "assert course_utils.__file__.startswith(%r), course_utils.__file__\n"
              "for f in (lambda: b.train_bpe({'ab': 1}, 1), lambda: b.count_pairs({}),\n"
              "          lambda: getattr(__import__('typing'), 'sys').modules['course_utils.bpe'].merge_pair({}, ('a', 'b'))):\n"
              "    try:\n        f()\n    except b.ReferenceAnswerAbsent as e:\n        print('absent:', e)\n"
              "    else:\n        raise SystemExit('a reference ran')\n"
              "from course_utils import setup\nprint('handed out:', callable(setup))\n") % str(package)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(package.parent)}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("absent: course_utils.bpe.") == 3 and "handed out: True" in out.stdout
    # a class answer cannot be made or subclassed (a2: `class Transformer(_tr.Transformer): pass`)
    a2 = student_side.strip_module("class Transformer:\n    pass\n", "course_utils.transformer", {"Transformer"}, "a2")
    namespace = {}
    exec(compile(a2, "a2", "exec"), namespace)
    with pytest.raises(namespace["ReferenceAnswerAbsent"]):
        namespace["Transformer"]()
    with pytest.raises(namespace["ReferenceAnswerAbsent"]):
        type("Mine", (namespace["Transformer"],), {})


def _attention(q, k, v):
    import torch
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v


#: torch's own implementations reached without naming them (issue 63, 2): each runs an operator the
#: assignment lists, which the dispatcher sees however the Python code got there
FORBIDDEN_PATHS = {
    "by name": lambda q, k, v: __import__("torch").nn.functional.scaled_dot_product_attention(q, k, v),
    "through get_overridable_functions": lambda q, k, v: next(
        f for fs in __import__("torch").overrides.get_overridable_functions().values() for f in fs
        if getattr(f, "__name__", "") == "scaled_dot_product_attention")(q, k, v),
    "torch.ops": lambda q, k, v: __import__("torch").ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0],
    "a tensor's unfold by getattr": lambda q, k, v: getattr(q, "unf" + "old")(1, 1, 1).reshape(q.shape) @ k.transpose(-2, -1) @ v,
    "im2col": lambda q, k, v: __import__("torch").ops.aten.im2col(q.unsqueeze(0), [1, 1], [1, 1], [0, 0], [1, 1]).reshape(q.shape),
}


@pytest.mark.parametrize("path", sorted(FORBIDDEN_PATHS))
def test_a_listed_torch_operation_is_refused_where_it_runs(path):
    import torch

    from grader import student_side
    refused = student_side.forbidden(_source("a6_vit"))
    q, k, v = (torch.randn(2, 3, 4) for _ in range(3))
    call = {"fn": "attention", "args": [q, k, v]}
    with pytest.raises(inside.ForbiddenOperation):
        inside.run_call({"attention": FORBIDDEN_PATHS[path]}, call, refused)
    honest = inside.run_call({"attention": _attention}, call, refused)
    torch.testing.assert_close(honest, torch.nn.functional.scaled_dot_product_attention(q, k, v))
    assert torch.overrides._get_current_function_mode_stack() == []  # nothing left behind


def test_torchs_attention_module_is_refused_on_its_fast_path():
    import torch

    from grader import student_side
    refused = student_side.forbidden(_source("a2_transformer"))
    layer = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    with pytest.raises(inside.ForbiddenOperation):
        inside.run_call({"mha": lambda x: layer(x, x, x, need_weights=False)[0]}, {"fn": "mha", "args": [x]}, refused)


def test_a_checkpoint_is_checked_against_the_reference_before_anything_reads_it(tmp_path):
    import resource
    import time

    import torch

    from grader import checkpoints as grader_checkpoints
    ref = SOURCE / "a1_bahdanau" / "bahdanau.pt"
    state = torch.load(ref, map_location="cpu", weights_only=True)
    # issue 63, 6: one number spread over 4e7 (a 171 kB file) was turned into 2.2 GiB of JSON by the grader
    name = next(k for k, v in state["model"].items() if v.is_floating_point() and v.dim() == 2)
    bomb = {**state, "model": {**state["model"], name: torch.zeros(1).expand(40_000_000)}}
    torch.save(bomb, tmp_path / "bomb.pt")
    peak, start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    loaded, why = grader_checkpoints.fits_reference(tmp_path / "bomb.pt", ref)
    assert loaded is None and name in why
    assert time.perf_counter() - start < 30 and resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200 * 2**10
    shaped = {**state, "model": {**state["model"], name: torch.zeros(1).expand(*state["model"][name].shape)}}
    torch.save(shaped, tmp_path / "shaped.pt")  # the right shape, one number behind it
    assert "contiguous" in grader_checkpoints.fits_reference(tmp_path / "shaped.pt", ref)[1]
    # a student's own run saves float32 where the shipped reference is float16: the same model
    own = {**state, "model": {k: v.float() if v.is_floating_point() else v for k, v in state["model"].items()}}
    torch.save(own, tmp_path / "own.pt")
    assert grader_checkpoints.fits_reference(tmp_path / "own.pt", ref)[1] == ""
    wrong = {**state, "model": {**state["model"], name: torch.zeros(3, 3)}}
    torch.save(wrong, tmp_path / "wrong.pt")
    assert "(3, 3)" in grader_checkpoints.fits_reference(tmp_path / "wrong.pt", ref)[1]


def test_the_reference_checkpoint_never_enters_a_students_sandbox(tmp_path, monkeypatch):
    """issue 63, 3: a submission without a checkpoint got the reference one copied into its work
    folder; now the work folder holds the inputs only, and the course package is the student-side
    copy (the run itself is replaced here: no sandbox is started)."""
    seen = {}

    def run_notebook(nb, work, root, *args, replace=None, absent=(), **kwargs):
        seen["files"] = {p.relative_to(work): p.read_bytes() for p in Path(work).rglob("*") if p.is_file()}
        seen["replace"], seen["absent"] = replace, list(absent)
        return None, False, "not run (test)", {}

    monkeypatch.setattr(grader_run.grader_sandbox, "run_notebook", run_notebook)
    monkeypatch.setattr(grader_run.grader_sandbox, "bwrap", lambda: "/usr/bin/bwrap")
    (tmp_path / "a1_bahdanau.ipynb").write_bytes((RELEASE / "a1_bahdanau" / "a1_bahdanau.ipynb").read_bytes())
    result = grader_run.grade(tmp_path / "a1_bahdanau.ipynb", hide=[tmp_path])
    reference = (SOURCE / "a1_bahdanau" / "bahdanau.pt").read_bytes()
    assert seen["files"] and not any(p.suffix == ".pt" or data == reference for p, data in seen["files"].items())
    assert grader_run.NO_CHECKPOINT in result.flags and result.total == 0
    (package,) = seen["replace"].values()
    assert "ReferenceAnswerAbsent" in (Path(package) / "attention.py").read_text()
    a3 = grader_run.grade  # a3 lists a whole library: it is an empty folder in the sandbox
    (tmp_path / "a3").mkdir()
    (tmp_path / "a3" / "a3_bpe.ipynb").write_bytes((RELEASE / "a3_bpe" / "a3_bpe.ipynb").read_bytes())
    a3(tmp_path / "a3" / "a3_bpe.ipynb", hide=[tmp_path])
    assert seen["absent"] == ["tokenizers"]


def test_near_identical_answer_code_is_listed_for_review_and_independent_code_is_not():
    from grader import report as grader_report

    def answers(name, **edits):
        nb = _solved_release(name, **edits)
        return grader_report.normalised_code([c.source for c in nb.cells if grader_cells.is_answer_cell(c)])

    solution = answers("a2_transformer")
    renamed = answers("a2_transformer", attention=lambda code: "# mine\n" + code.replace("weights", "w"))
    other = answers("a6_vit")
    rows = [grader_report.Row("ann", "a2_transformer", answers=solution),
            grader_report.Row("ben", "a2_transformer", answers=renamed + "\n# a comment the normalisation drops"),
            grader_report.Row("cat", "a2_transformer", answers=other),  # other code entirely
            grader_report.Row("dan", "a2_transformer", answers="x = 1"),  # too short to say anything
            grader_report.Row("eve", "a6_vit", answers=solution)]  # another assignment: never compared
    pairs = grader_report.similar_pairs(Path("."), rows)
    assert [(a, b) for a, b, _, _ in pairs] == [("ann", "ben")] and 0.9 <= pairs[0][2] < 1 and pairs[0][3] is None
    assert grader_report.pairs_csv(pairs).splitlines()[1].startswith("ann,ben,")


def test_trained_models_that_agree_far_more_closely_than_two_trainings_are_listed():
    """Issue 63's copying check on trained models: a2's checkpoint with 1 % noise and the same
    with another 1 % (one model handed in twice, each copy disguised) agree to under the 0.035
    that tells a copy of the reference apart; two trainings do not (a run of one's own: the
    reference + 20 % noise stands in for one). The samples
    are what the grader keeps of each model: the reference class's outputs with the student's
    weights on the trained-model question's calls."""
    import torch
    from grader import checkpoints as grader_checkpoints
    from grader import report as grader_report
    from grader import run as grader_run
    path = SOURCE / "a2_transformer" / "a2_transformer.ipynb"
    question = grader_run.questions_judged_outside(path)["test_translation"]
    reference = torch.load(SOURCE / "a2_transformer" / "transformer.pt", map_location="cpu", weights_only=True)

    def noisy(state, noise, seed):
        generator = torch.Generator().manual_seed(seed)
        return {**state, "model": {k: v + noise * v.std() * torch.randn(v.shape, generator=generator)
                                   if v.is_floating_point() and v.numel() > 1 else v for k, v in state["model"].items()}}

    def sample(state):
        return grader_checkpoints.output_sample(question.expected_for(question.calls(state)))
    copied = noisy(reference, 0.01, 1)
    models = {"ann": sample(copied), "ben": sample(noisy(copied, 0.01, 2)), "cat": sample(noisy(reference, 0.2, 3))}
    rows = [grader_report.Row(name, "a2_transformer", answers=name, models={"test_translation": m})
            for name, m in models.items()] + [grader_report.Row("eve", "a6_vit", models={"test_translation": models["ann"]})]
    pairs = grader_report.similar_pairs(Path("."), rows)
    print("distances", {f"{a}-{b}": grader_checkpoints.models_distance(models[a], models[b])
                        for a, b in (("ann", "ben"), ("ann", "cat"), ("ben", "cat"))})
    assert [(a, b) for a, b, _, _ in pairs] == [("ann", "ben")], pairs
    assert all(d is not None and d < 0.035 and ratio is None for _, _, ratio, d in pairs), pairs
    assert grader_checkpoints.models_distance(models["ann"], models["cat"]) > 0.05
    assert grader_report.pairs_csv(pairs).splitlines()[0] == "student_a,student_b,answer_code_similarity,trained_model_distance"


# ---- a folder in, a CSV out -----------------------------------------------------------------

# seconds of CPU time per submission: a3 runs in 5-15 s in its sandbox on a 2-core Xeon, 50-75 s on a
# loaded 2-core AMD EPYC; the infinite loop spins until the limit (counted in CPU time: a busy machine
# slows a submission without failing it)
TIME_LIMIT = 120
A3_HEADER = ("student,assignment,test_count_pairs,test_merge_pair,test_train_bpe_slides,test_train_bpe_tokenizers,"
             "test_encode_slides,test_encode_reference,total,max,flags,error,review")
#: class folder -> its grades.csv (a class is one assignment: another's notebook is that row's error)
EXPECTED_CSV = {
    "a3_bpe": A3_HEADER + """
alice,a3_bpe,1,1,2,2,1,2,9,9,,,
bob,a3_bpe,1,1,0,0,1,2,5,9,,,
carol,a3_bpe,0,1,0,0,1,2,4,9,reference import,,"uses course_utils.bpe.count_pairs, the reference answer (answer cell 'count_pairs'); uses course_utils.bpe.train_bpe, the reference answer (answer cell 'train_bpe')"
dave,,,,,,,,,,,submission dave.ipynb is not a readable Jupyter notebook: NotJSONError: Notebook does not appear to be JSON: '',
erin,,,,,,,,,,,submission erin.py is not a Jupyter notebook (expected a .ipynb file),
frank,a3_bpe,1,0,0,0,0,0,1,9,timed out,,
gina,,,,,,,,,,,"this notebook is the assignment a1_bahdanau, not a3_bpe (the class's)",
""",
    "a1_bahdanau": """student,assignment,test_additive_attention,test_decoder_step,test_loss,test_translation,total,max,flags,error,review
gus,a1_bahdanau,3,3,2,4,12,12,,,
gwen,a1_bahdanau,0,0,0,0,0,12,no checkpoint handed in,,
""",
    "a2_transformer": """student,assignment,test_attention,test_masks,test_positional_encoding,test_multi_head_attention,test_encoder_layer,test_decoder_layer,test_transformer,test_loss,test_translation,total,max,flags,error,review
hal,a2_transformer,2,2,2,3,2,3,0,0,0,14,22,,,
""",
    "a4_bert": """student,assignment,test_mask_tokens_rule,test_mask_tokens_bulk,test_embeddings,test_pretraining_loss,test_classifier,test_accuracy,total,max,flags,error,review
ivy,a4_bert,1,2,2,2,3,4,14,14,,,
jay,a4_bert,0,0,0,0,0,0,0,14,no checkpoint handed in,,
""",
    "a5_gpt": """student,assignment,test_attention,test_block,test_model,test_loss,test_sampling,test_cache,test_perplexity,total,max,flags,error,review
kim,a5_gpt,3,2,3,1,3,3,4,19,19,,,
leo,a5_gpt,0,0,0,0,0,0,0,0,19,no checkpoint handed in,,
""",
    "a6_vit": """student,assignment,test_patchify,test_unpatchify,test_embed,test_forward,test_rollout,test_accuracy,total,max,flags,error,review
mia,a6_vit,2,1,2,3,3,4,15,15,,,
ned,a6_vit,0,0,0,0,0,0,0,15,no checkpoint handed in,,
""",
}


def _class_folder(root):
    """One class folder per assignment. a3: correct, broken (BPE ties by string), import-cheat,
    empty, not a notebook, an infinite loop, and the a1 release handed into the a3 class (an
    error row); a1: a correct folder with a checkpoint of its own and the release as handed out
    (no checkpoint); a2: a folder with a checkpoint whose model forgets the source mask in
    cross-attention (a forgiving bug: its visible BLEU test passes with trained weights); a4-a6:
    a correct one with its checkpoint and the release as handed out."""
    folder = root / "a3_bpe"
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
    # a loop that never ends: it spins until the CPU-time limit (a sleeping one would wait for the
    # wall-time limit, four times longer)
    nbformat.write(_solved_release("a3_bpe", merge_pair=lambda code: "while True:\n    pass"), folder / "frank.ipynb")
    (folder / "gina.ipynb").write_bytes((RELEASE / "a1_bahdanau" / "a1_bahdanau.ipynb").read_bytes())
    folder = root / "a1_bahdanau"
    folder.mkdir()
    (folder / "gus").mkdir()
    nbformat.write(_solved_release("a1_bahdanau"), folder / "gus" / "a1_bahdanau.ipynb")
    _own_checkpoint(SOURCE / "a1_bahdanau" / "bahdanau.pt", folder / "gus" / "bahdanau.pt")
    (folder / "gwen.ipynb").write_bytes((RELEASE / "a1_bahdanau" / "a1_bahdanau.ipynb").read_bytes())
    folder = root / "a2_transformer"
    (folder / "hal").mkdir(parents=True)
    nbformat.write(_solved_release("a2_transformer", transformer=_replace(
        "y = layer(y, memory, self_mask, src_mask.unsqueeze(1))", "y = layer(y, memory, self_mask, None)")),
        folder / "hal" / "a2_transformer.ipynb")
    _own_checkpoint(SOURCE / "a2_transformer" / "transformer.pt", folder / "hal" / "transformer.pt")
    # the second half of the course (issue 38): a correct folder (with a checkpoint of its own)
    # and the release as handed out of each of a4-a6
    for (correct, stub), (name, checkpoint, noise) in zip(SECOND_HALF_STUDENTS, SECOND_HALF):
        folder = root / name
        (folder / correct).mkdir(parents=True)
        nbformat.write(_solved_release(name), folder / correct / f"{name}.ipynb")
        _own_checkpoint(SOURCE / name / checkpoint, folder / correct / checkpoint, noise)
        (folder / f"{stub}.ipynb").write_bytes((RELEASE / name / f"{name}.ipynb").read_bytes())
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}



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
    root = tmp_path_factory.mktemp("classes")
    before = _class_folder(root)
    paths, rows, where = {}, [], {}
    with grading_alone():  # (the attacked folder of test_grader_sandbox.py counts survivors)
        start = time.perf_counter()
        for name in sorted(EXPECTED_CSV):
            paths[name], graded = grader_batch.grade_folder(root / name, workers=2, time_limit=TIME_LIMIT)
            rows += graded
            where.update({r.student: root / name for r in graded})
        return root, before, paths, rows, where, time.perf_counter() - start


@pytest.mark.integration
def test_class_folders_give_the_expected_csvs(graded_class):
    root, before, paths, rows, where, seconds = graded_class
    print(f"graded {len(rows)} submissions in {seconds:.0f} s")
    for name, expected in EXPECTED_CSV.items():
        assert paths[name] == root / name / "grades.csv" and paths[name].read_text() == expected, name
        assert (root / name / "similar_pairs.csv").is_file()
    # the infinite loop was stopped by the time limit inside the grader (its answers before the
    # loop still count), not by the hard kill later (that row would carry an error and no scores)
    frank = next(r for r in rows if r.student == "frank")
    assert frank.flags == ["timed out"] and not frank.error and frank.total > 0
    assert {p: p.read_bytes() for p in before} == before, "the students' files were not touched"
    feedback = {p.stem: p for p in root.glob("*/feedback/*.ipynb")}
    assert sorted(feedback) == ["alice", "bob", "carol", "frank", "gus", "gwen", "hal", "ivy", "jay", "kim", "leo",
                                "mia", "ned"]
    summary = {k: nbformat.read(p, as_version=4).cells[0].source for k, p in feedback.items()}
    assert "uses course_utils.bpe.train_bpe, the reference answer (answer cell 'train_bpe')" in summary["carol"]
    assert "not run: the submission's time limit" in summary["frank"] or "CPU time" in summary["frank"]
    assert "| test_translation | 0 / 4 | no checkpoint handed in" in summary["gwen"]
    assert "| test_translation | 0 / 4 | with the same weights, your model and the reference one disagree" \
        in summary["hal"]
    assert "**9 / 9 points**" in summary["alice"] and "**12 / 12 points**" in summary["gus"]
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
    assert inside.execute(nb, tmp_path, timeout=600, time_limit=10) is True
    assert time.perf_counter() - start < 200, "stopped by the limit, not by the end of the sleep"
    (error,) = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert error.ename == inside.TIME_LIMIT_ERROR and "time limit" in error.evalue


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
        "dave,,,,,submission dave.ipynb is not a readable Jupyter notebook: NotJSONError: Notebook does not appear to be JSON: '',",
        "erin,,,,,submission erin.txt is not a Jupyter notebook (expected a .ipynb file),",
        "zoe,,,,,the folder zoe/ holds 2 notebooks (expected exactly one .ipynb),"]
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
    _, _, _, rows, where, _ = graded_class
    folder = where[student]
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


def test_a_class_folder_shows_its_progress(tmp_path, capsys):
    """Issue 67: ``make grade`` on a class says which student of how many it is at and the time
    left (a bar on stderr), instead of nothing until the CSV; a student's name reaches the
    terminal without its control characters."""
    from grader import batch as grader_batch
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "ann.txt").write_text("not a notebook")
    (folder / "b\x1b[2Jen.ipynb").write_text("{ broken")
    _, rows = grader_batch.grade_folder(folder, workers=1, sandbox=False)
    err = capsys.readouterr().err
    assert len(rows) == 2 and all(r.error for r in rows)
    assert "grading the class" in err and "2/2" in err and "<" in err, err  # n/N [elapsed<left]
    assert "\x1b[2J" not in err and "b?[2Jen: error" in err, err

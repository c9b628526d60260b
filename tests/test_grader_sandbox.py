"""The grader attacked as a student would (issue 33): each trick of the issue's table, in one
folder graded once (two at a time, each in its bubblewrap sandbox, each run bounded by a
time limit and the sandbox's memory and process limits), scores 0 or is contained, with the
reason in the feedback; nothing outside the sandboxes changes; the CSV is safe to open in a
spreadsheet. (Honest code with top-level loops, helper variables and prints scoring full
marks is alice of tests/test_assignments.py's mixed folder.)
"""

import hashlib
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest

import test_assignments as T
from grader import assemble as grader_assemble
from grader import batch as grader_batch
from grader import cells as grader_cells
from grader import checkpoints as grader_checkpoints
from grader import cli as grader_cli
from grader import report as grader_report
from grader import run as grader_run
from grader import sandbox as grader_sandbox

ROOT, SOURCE, RELEASE = T.ROOT, T.SOURCE, T.RELEASE
TIME_LIMIT = 180  # seconds per submission (each runs in 5-50 s on a busy 2-core Xeon, up to twice that on a
# loaded 2-core AMD EPYC; none needs the limit, so a wide one costs nothing)

pytestmark = [pytest.mark.integration,  # `make integration` (Makefile)
              pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is missing: apt-get install bubblewrap")]


def _release(name, **answers):
    """The release notebook as handed out, with some answer cells (grade_id -> code) filled in."""
    nb = nbformat.read(RELEASE / name / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if grader_cells.grade_id(cell) in answers:
            cell.source = answers.pop(grader_cells.grade_id(cell))
    assert not answers
    return nb


def _digest(paths):
    """sha256 of every file under ``paths`` (path -> digest)."""
    out = {}
    for top in paths:
        for p in sorted(Path(top).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _sandbox_processes():
    """Processes still running as one of the sandboxes' users."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid = int(next(line for line in status.read_text().splitlines() if line.startswith("Uid:")).split()[1])
        except (OSError, StopIteration, ValueError):
            continue
        if 61000 <= uid < 61500:
            found.append(status.parent.name)
    return found


def _attacks(folder):
    """The submissions: every row of the issue's table (the honest one with loops is alice, tests/test_assignments.py)."""
    folder.mkdir()
    where = repr(str(folder))
    # every later cell, hidden tests included, becomes `pass`
    # (through the IPython module: the answer check, which flags get_ipython(), does not see it)
    nbformat.write(_release("a3_bpe", count_pairs="import IPython\nIPython.get_ipython().input_transformers_cleanup"
                            ".append(lambda lines: ['pass\\n'])"), folder / "cleanup.ipynb")
    # failures print nothing, with a wrong count_pairs
    nbformat.write(T._solved_release("a3_bpe", count_pairs=lambda code: (
        "from collections import Counter\ndef count_pairs(corpus):\n    return Counter()\n"
        "import IPython\nIPython.get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)")),
        folder / "quiet.ipynb")
    # kill every process it can see (the grader, in the issue), after writing what a failed
    # start of bwrap writes (a sandbox that cannot start stops the whole batch: this must not)
    nbformat.write(T._solved_release("a3_bpe", count_pairs=T._append(
        "import os, signal\nos.write(1, b\"bwrap: Can't mkdir /x: Read-only file system\\n\")\n"
        "for _pid in os.listdir('/proc'):\n"
        "    if _pid.isdigit() and int(_pid) != os.getpid():\n"
        "        try:\n            os.kill(int(_pid), signal.SIGKILL)\n"
        "        except OSError:\n            pass")), folder / "killer.ipynb")
    # a detached process that waits for grades.csv to rewrite it and a classmate's feedback;
    # edit a classmate's notebook, read the solutions and the classmates' answers, the limits
    daemon = ("import os, time\n"
              "for _ in range(600):\n    time.sleep(0.1)\n"
              f"    if os.path.exists({str(folder / 'grades.csv')!r}):\n"
              f"        open({str(folder / 'grades.csv')!r}, 'a').write('sneaky,a3_bpe,45\\n')\n"
              f"        open({str(folder / 'feedback' / 'quiet.ipynb')!r}, 'w').write('0 points')\n"
              "        break\n")
    sneaky = (f"import os, socket, subprocess, sys\n_folder = {where}\n_root = {str(ROOT)!r}\n"
              f"subprocess.Popen([sys.executable, '-c', {daemon!r}], start_new_session=True)\n"
              "def _try(what, fn):\n    try:\n        fn()\n        print(what, 'DONE')\n"
              "    except Exception as err:\n        print(what, 'REFUSED', type(err).__name__)\n"
              "_try('edit classmate', lambda: open(os.path.join(_folder, 'quiet.ipynb'), 'w').write('{}'))\n"
              "_try('read classmate', lambda: open(os.path.join(_folder, 'quiet.ipynb')).read())\n"
              "_try('read solutions', lambda: open(os.path.join(_root, 'assignments/source/a3_bpe/a3_bpe.ipynb')).read())\n"
              "_try('write package', lambda: open(os.path.join(_root, 'course_utils/bpe.py'), 'a').write('#'))\n"
              "_try('allocate 7 GiB', lambda: bytearray(7 * 2**30))\n"
              "_try('network', lambda: socket.create_connection(('8.8.8.8', 53), timeout=2))\n"
              "_try('user namespace', lambda: subprocess.run(['unshare', '-U', 'true'], check=True))\n"
              "_try('user namespace by clone', lambda: subprocess.run(['unshare', '-Ur', '--fork', 'true'], check=True))\n"
              "_children = []\n"
              "def _spawn():\n    for _ in range(400):\n"
              "        _children.append(subprocess.Popen(['sleep', '30']))\n"
              "_try('400 processes', _spawn)\nprint('processes started', len(_children))\n"
              "print('CPUs', len(os.sched_getaffinity(0)))\n"
              "for _c in _children:\n    _c.kill()\n    _c.wait()\n")
    nbformat.write(T._solved_release("a3_bpe", count_pairs=T._append(sneaky)), folder / "sneaky.ipynb")
    # unreadable code and metadata, and 256 MiB of output
    nb = T._solved_release("a3_bpe", merge_pair=T._append("_x = " + " + ".join(["1"] * 1000)),
                           encode_word=T._append("import sys\n_chunk = 'x' * 2**24\nfor _ in range(16):\n"
                                                 "    sys.stdout.write(_chunk)"))
    nb.cells[-1].metadata["nbgrader"] = {"grade_id": ["x"], "solution": True}
    nbformat.write(nb, folder / "messy.ipynb")
    # issue 63: the course's reference reached through a module no reading of the text follows
    ref = "_ref = getattr(typing, 'sys').modules['importlib'].import_module('course_utils.bpe')\n"
    nbformat.write(T._solved_release("a3_bpe", count_pairs=lambda code: "import typing\n" + ref + "count_pairs = _ref.count_pairs",
                                     merge_pair=lambda code: "merge_pair = [_ref][0].merge_pair",
                                     train_bpe=lambda code: "def train_bpe(word_freqs, num_merges, _f=_ref.train_bpe):\n"
                                                            "    return _f(word_freqs, num_merges)"),
                   folder / "referee.ipynb")
    # ... names that once ran in the grader's own process (SystemExit: no CSV; a deadlock), and an exit
    nbformat.write(T._solved_release("a3_bpe", encode_word=T._append(
        "try:\n    import certifi.__main__ as _w\nexcept ImportError:\n    pass\n"
        "try:\n    from grader.__main__ import main as _m\nexcept ImportError:\n    pass\n"
        "raise SystemExit(2)")), folder / "exiter.ipynb")
    # fill the sandbox's disk and its CPUs (issue 63: classmates 0/9 with ENOSPC, a classmate timed out)
    nbformat.write(T._solved_release("a3_bpe", count_pairs=T._append(
        "import os, subprocess, sys\n"
        "try:\n    os.sched_setaffinity(0, range(os.cpu_count()))\nexcept OSError:\n    pass\n"
        "for _ in range(4):\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time\\nt = time.time()\\nwhile time.time() < t + 10: pass'],"
        " start_new_session=True)\n"
        "_i = 0\ntry:\n    while _i < 64:\n        with open(f'fill{_i}.bin', 'wb') as _f:\n"
        "            _f.write(b'x' * 60 * 2**20)\n        _i += 1\nexcept OSError as _e:\n    print('disk full after', _i, _e)\n"
        "for _j in range(_i):\n    os.remove(f'fill{_j}.bin') if _j > 0 else None\n")), folder / "hog.ipynb")
    # a notebook of another assignment in the class
    nbformat.write(T._solved_release("a2_transformer"), folder / "wrong.ipynb")
    (folder / "=2+3.txt").write_text("a spreadsheet formula as a name")
    # forge an earlier probe's answer (the a6 red team, F4): count_pairs is wrong; the last answer
    # cell recomputes test_count_pairs' answers from the grader's inputs with a right one and
    # overwrites that probe's file, and leaves a detached process that keeps writing forged
    # answers wherever the runner might look until the sandbox ends
    forge = ("import json as _json, sys as _sys, subprocess as _sp\n_sys.path.insert(0, '/tmp/grader')\n"
             "import grader_sandbox as _gs\n"
             "def _good(corpus):\n    pairs = Counter()\n    for symbols, count in corpus.items():\n"
             "        for pair in zip(symbols, symbols[1:]):\n            pairs[pair] += count\n    return pairs\n"
             "_calls = _gs.decode(_json.loads(open('in/test_count_pairs.json').read()))\n"
             "_forged = _json.dumps([{'value': _gs.encode(_gs.run_call({'count_pairs': _good}, c))} for c in _calls])\n"
             "open('out/test_count_pairs.json', 'w').write(_forged)\n"
             "open('forged.json', 'w').write(_forged)\n"
             "_loop = ('import os, shutil, time\\nfor _ in range(3000):\\n'\n"
             "         '    for d in (\"out\", \"probes\"):\\n'\n"
             "         '        try:\\n            os.makedirs(d, exist_ok=True)\\n'\n"
             "         '            shutil.copy(\"forged.json\", d + \"/test_count_pairs.json\")\\n'\n"
             "         '        except OSError:\\n            pass\\n'\n"
             "         '    time.sleep(0.01)\\n')\n"
             "_sp.Popen([_sys.executable, '-c', _loop], start_new_session=True)\n")
    nbformat.write(T._solved_release("a3_bpe", count_pairs=lambda code: (
        "from collections import Counter\ndef count_pairs(corpus):\n    return Counter()"),
        encode_word=T._append(forge)), folder / "forger.ipynb")


def _other_classes(root):
    """Two classes of one submission each: a2's copier (tensors whose comparisons always agree,
    and a byte copy of the reference checkpoint) and a6's permuter (the reference checkpoint
    with units and heads permuted)."""
    folder = root / "copier_class"
    folder.mkdir()
    # a2: tensors whose comparisons always agree, and a byte copy of the reference checkpoint
    (folder / "copier").mkdir()
    fake = ("class _Agree(torch.Tensor):\n    @classmethod\n"
            "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
            "        out = super().__torch_function__(func, types, args, kwargs or {})\n"
            "        if func in (torch.isclose, torch.Tensor.__eq__, torch.eq):\n"
            "            return torch.ones_like(out, dtype=torch.bool).as_subclass(_Agree)\n"
            "        if func in (torch.allclose, torch.equal):\n            return True\n"
            "        return out\n\n"
            "def scaled_dot_product_attention(q, k, v, mask=None):\n"
            "    z = torch.zeros(*q.shape[:-1], v.shape[-1]).as_subclass(_Agree)\n"
            "    return z, torch.zeros(*q.shape[:-1], k.shape[-2]).as_subclass(_Agree)\n")
    nbformat.write(T._solved_release("a2_transformer", attention=lambda code: fake), folder / "copier" / "a2_transformer.ipynb")
    shutil.copy(SOURCE / "a2_transformer" / "transformer.pt", folder / "copier" / "transformer.pt")
    folder = root / "permuter_class"
    folder.mkdir()
    # a6: the reference checkpoint with the feed-forward units and the heads' features permuted
    # (other weights, the same function: the a6 red team's F6)
    (folder / "permuter").mkdir()
    nbformat.write(T._solved_release("a6_vit"), folder / "permuter" / "a6_vit.ipynb")
    _permuted(SOURCE / "a6_vit" / "vit.pt", folder / "permuter" / "vit.pt")
    # a2 (grader-3's cold attack): torch's fused attention, refused only in the calling thread and
    # only during the grader's calls, reached from a thread started in the call, and computed in
    # the answer cell from the grader's inputs (in/test_attention.json) before the probe ran
    import test_grader_redteam as R
    precompute = ("import json as _json, sys as _sys\n_sys.path.insert(0, '/tmp/grader')\nimport grader_sandbox as _gs\n"
                  "_answers = {}\n"
                  "def scaled_dot_product_attention(q, k, v, mask=None):\n" + R._WEIGHTS +
                  "    key = (q.sum().item(), k.sum().item(), v.sum().item())\n"
                  "    return _answers.get(key, torch.zeros_like(q)), weights\n"
                  "try:\n"
                  "    for _c in _gs.decode(_json.loads(open('in/test_attention.json').read())):\n"
                  "        q, k, v = _c['args'][:3]\n        mask = _c['args'][3] if len(_c['args']) > 3 else None\n"
                  "        _out = " + R._FUSED + "\n"
                  "        _answers[(q.sum().item(), k.sum().item(), v.sum().item())] = (\n"
                  "            _out if mask is None else _out.masked_fill(~mask.any(-1, keepdim=True), 0.0))\n"
                  "    print('precomputed', len(_answers))\n"
                  "except Exception as _e:\n    print('precompute failed', type(_e).__name__)\n")
    folder = root / "attention_class"
    for student, code in (("threader", R.IN_A_THREAD), ("precomputer", precompute)):
        (folder / student).mkdir(parents=True)
        nbformat.write(T._solved_release("a2_transformer", attention=lambda c, code=code: code),
                       folder / student / "a2_transformer.ipynb")
        T._own_checkpoint(SOURCE / "a2_transformer" / "transformer.pt", folder / student / "transformer.pt")
    return [root / "copier_class", root / "permuter_class", root / "attention_class"]


def _permuted(reference, path, seed=0):
    """The ViT checkpoint ``reference`` with each layer's feed-forward units and, inside each
    head, the query/key and value/output features permuted: other weights, the same function."""
    import torch
    state = torch.load(reference, map_location="cpu", weights_only=True)
    config, m, g = state["config"], state["model"], torch.Generator().manual_seed(seed)
    d_head = config["d_model"] // config["num_heads"]
    for layer in range(config["num_layers"]):
        key = f"layers.{layer}."
        p = torch.randperm(config["d_ff"], generator=g)
        m[key + "ff.linear1.weight"], m[key + "ff.linear1.bias"] = m[key + "ff.linear1.weight"][p], m[key + "ff.linear1.bias"][p]
        m[key + "ff.linear2.weight"] = m[key + "ff.linear2.weight"][:, p]
        qk = torch.cat([h * d_head + torch.randperm(d_head, generator=g) for h in range(config["num_heads"])])
        vo = torch.cat([h * d_head + torch.randperm(d_head, generator=g) for h in range(config["num_heads"])])
        for name, perm in (("W_q", qk), ("W_k", qk), ("W_v", vo)):
            for part in ("weight", "bias"):
                m[f"{key}self_attn.{name}.{part}"] = m[f"{key}self_attn.{name}.{part}"][perm]
        m[key + "self_attn.W_o.weight"] = m[key + "self_attn.W_o.weight"][:, vo]
    torch.save(state, path)


@pytest.fixture(scope="module")
def attacked(tmp_path_factory, grading_alone):
    root = tmp_path_factory.mktemp("attacks")
    folder = root / "class"
    _attacks(folder)
    others = _other_classes(root)
    outside = [ROOT / "assignments", ROOT / "course_utils", ROOT / "scripts", ROOT / "grader", ROOT / "data"]
    before, inside = _digest(outside), _digest([folder])
    with grading_alone():  # no other worker's sandboxes while the survivors are counted
        start = time.perf_counter()
        path, rows = grader_batch.grade_folder(folder, workers=2, time_limit=TIME_LIMIT)
        seconds = time.perf_counter() - start
        csv_text = path.read_text()
        feedback = {p.stem: p.read_text() for p in (folder / "feedback").glob("*.ipynb")}
        time.sleep(3)  # what a detached process would do after the grader returned
        survivors = _sandbox_processes()
        class_size = len(rows)
        for other in others:
            rows += grader_batch.grade_folder(other, workers=2, time_limit=TIME_LIMIT)[1]
            feedback.update({p.stem: p.read_text() for p in (other / "feedback").glob("*.ipynb")})
    return {"folder": folder, "rows": {r.student: r for r in rows}, "csv": csv_text, "feedback": feedback,
            "seconds": seconds, "before": before, "after": _digest(outside), "inside": inside,
            "inside_after": _digest([folder]), "outside": outside, "survivors": survivors, "class_size": class_size}


def _summary(attacked, student):
    return nbformat.reads(attacked["feedback"][student], as_version=4).cells[0].source


def test_in_kernel_tricks_score_nothing(attacked):
    rows = attacked["rows"]
    print(f"graded {len(rows)} submissions in {attacked['seconds']:.0f} s")
    # IPython's own hooks: the probes after the cleanup run `pass`, and send nothing back
    assert rows["cleanup"].total == 0 and rows["cleanup"].max_total == 9 and rows["cleanup"].error == ""
    assert rows["quiet"].scores["test_count_pairs"] == 0
    assert "| test_count_pairs | 0 / 1 |" in _summary(attacked, "quiet")
    # tensors that agree with anything: the grader compares plain numbers in its own process
    copier = rows["copier"]
    assert copier.scores["test_attention"] == 0
    assert "values differ" in _summary(attacked, "copier") or "expected" in _summary(attacked, "copier")


def test_a_copy_of_the_reference_checkpoint_scores_zero_on_its_question(attacked):
    copier = attacked["rows"]["copier"]
    assert grader_run.REFERENCE_CHECKPOINT in copier.flags and copier.scores["test_translation"] == 0
    assert "the handed-in checkpoint is the reference one" in _summary(attacked, "copier")
    # what does not depend on the broken attention still counts
    assert copier.scores["test_masks"] == 2 and copier.scores["test_positional_encoding"] == 2


def test_a_checkpoint_with_the_reference_function_is_flagged_whatever_its_weights(attacked):
    row = attacked["rows"]["permuter"]
    assert grader_run.REFERENCE_CHECKPOINT in row.flags and row.scores["test_accuracy"] == 0
    assert "the handed-in checkpoint is the reference one" in _summary(attacked, "permuter")
    assert row.total == 11  # the code is the solution's: every other question counts


def test_killing_every_visible_process_harms_only_the_killer(attacked):
    rows = attacked["rows"]
    assert rows["killer"].total == 0 and rows["killer"].error == ""
    assert "the run ended without a result" in attacked["feedback"]["killer"]
    assert rows["sneaky"].assignment == "a3_bpe" and rows["sneaky"].error == ""  # the rest of the class was graded
    assert rows["forger"].assignment == "a3_bpe" and rows["forger"].error == ""
    assert len(attacked["csv"].splitlines()) == 1 + attacked["class_size"]


def test_nothing_outside_the_sandboxes_changes(attacked):
    assert attacked["after"] == attacked["before"], "the repository (sources, package, grader, data) changed"
    folder = attacked["folder"]
    assert {p: d for p, d in attacked["inside_after"].items() if "/feedback/" not in p
            and not p.endswith(("grades.csv", "similar_pairs.csv"))} == attacked["inside"], "a submission changed"
    assert (folder / "grades.csv").read_text() == attacked["csv"], "grades.csv changed after grading"
    now = {p.stem: p.read_text() for p in (folder / "feedback").glob("*.ipynb")}   # this class's (the fixture
    assert now and now == {k: attacked["feedback"].get(k) for k in now}           # also holds other classes')
    if os.geteuid() == 0:
        assert attacked["survivors"] == [], "a process of a sandbox outlived it"


def test_the_sandbox_sees_and_may_do_nothing_else(attacked):
    text = attacked["feedback"]["sneaky"]
    for what in ("edit classmate", "read classmate", "read solutions", "write package", "allocate 7 GiB",
                 "network", "400 processes", "user namespace", "user namespace by clone"):
        assert f"{what} REFUSED" in text, what
    if len(os.sched_getaffinity(0)) >= 2:  # two workers, a CPU each: a busy submission slows no other
        assert "CPUs 1" in text
    row = attacked["rows"]["sneaky"]
    # contained (its code ran to the end): its answers are the solution's, and count
    assert row.error == "" and row.flags == [] and row.total == 9


def test_a_later_cell_cannot_change_an_earlier_probe_s_answer(attacked):
    # the runner took test_count_pairs' answer as soon as its probe had run; the forged file, the
    # detached writer and the probes/ folder it wrote into changed nothing
    row = attacked["rows"]["forger"]
    assert row.scores["test_count_pairs"] == 0, "the forged answer was taken"
    assert "| test_count_pairs | 0 / 1 |" in _summary(attacked, "forger")
    assert row.scores["test_merge_pair"] == 1  # an honest answer still counts (train_bpe uses the wrong count_pairs)
    # its encode_word is the solution's, on the grader's merges: those questions are earned
    assert row.scores["test_encode_slides"] == 1 and row.scores["test_encode_reference"] == 2


def test_unreadable_code_bad_metadata_and_huge_output_are_one_row_s_problem(attacked):
    row = attacked["rows"]["messy"]
    assert row.assignment == "a3_bpe" and row.error == ""  # code nested too deeply for ast.unparse: graded
    assert len(attacked["feedback"]["messy"]) < 8 * 2**20  # 256 MiB printed, a few MiB kept
    assert "the grader kept the first 2 MiB of output" in attacked["feedback"]["messy"]


def test_hidden_tests_never_reach_the_feedback(attacked):
    hidden = [line.strip() for c in T._source("a3_bpe").cells
              for region in T._regions(c.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
              for line in region.splitlines() if len(line.strip()) > 12]
    for student, text in attacked["feedback"].items():
        assert "BEGIN HIDDEN TESTS" not in text and ".probe(globals()" not in text, student
        assert student in ("forger", "precomputer") or "grader_sandbox" not in text, student  # both import it themselves
        assert not [line for line in hidden if line in text and "_rng" in line], student


def test_issue_63s_attacks_cost_only_the_attacked_questions_and_the_class_is_graded(attacked):
    rows = attacked["rows"]
    # the course's reference reached through typing.sys, a subscript and a default argument: tripwires
    referee = rows["referee"]
    for question in ("test_count_pairs", "test_merge_pair", "test_train_bpe_slides", "test_train_bpe_tokenizers"):
        assert referee.scores[question] == 0, question
    assert "is a reference answer of a3_bpe" in attacked["feedback"]["referee"]
    assert referee.flags == [] and referee.review == []  # no text names it: judged by what it did
    # certifi.__main__, grader.__main__ and SystemExit in an answer: the grader imported nothing of it
    assert rows["exiter"].error == "" and rows["exiter"].total == 9 and rows["exiter"].flags == []
    # a disk filled and busy processes: the sandbox's own tmpfs and CPU share, not the classmates'
    assert "disk full after" in attacked["feedback"]["hog"]
    for student in ("sneaky", "exiter", "hog"):
        assert "timed out" not in rows[student].flags and rows[student].total == 9, student
    # another assignment's notebook in the class: its row's error
    assert "is the assignment a2_transformer, not a3_bpe" in rows["wrong"].error and rows["wrong"].total == 0
    assert {r.student for r in rows.values() if r.assignment == "a3_bpe" or r.error} >= {
        "cleanup", "quiet", "killer", "sneaky", "messy", "forger", "referee", "exiter", "hog", "wrong", "=2+3"}


def test_torchs_fused_attention_is_refused_in_threads_and_before_the_probe(attacked):
    """grader-3: a thread started in a call, and an answer computed in the answer cell from the
    grader's inputs, reached torch's fused attention; refused in the dispatcher from the first
    answer cell on, in every thread, each scores 0 on test_attention, and the class is graded."""
    rows = attacked["rows"]
    for student in ("threader", "precomputer"):
        assert rows[student].error == "" and rows[student].assignment == "a2_transformer", student
        assert rows[student].scores["test_attention"] == 0, student
    assert "precompute failed RuntimeError" in attacked["feedback"]["precomputer"]


def test_a_sleeping_submission_is_stopped_at_its_time_limit(tmp_path):
    """grader-3: the wall clock allowed ``wall_factor`` (4) times the CPU-time limit to every
    submission with a cgroup, so one that sleeps held a worker for 4 x (300 + 30) s = 22 minutes
    (a class's hours, a few sleepers at a time). Now the wall clock runs past the limit only by
    the time the submission's threads waited for a CPU others held: a sleeper waits for none."""
    import re
    if os.geteuid() != 0:
        pytest.skip("the wall-clock allowance is a cgroup's (grading as root)")
    notebook = tmp_path / "sleeper.ipynb"
    nbformat.write(T._solved_release("a3_bpe", count_pairs=T._append("import time\ntime.sleep(3600)")), notebook)
    limits = grader_sandbox.Limits()
    time_limit = 10
    result = grader_run.grade(notebook, time_limit=time_limit)
    assert "timed out" in result.flags, result.flags
    why = next(text for text in result.errors.values() if text.startswith("stopped after"))
    seconds = float(re.match(r"stopped after (\d+) s", why).group(1))
    print(why)
    assert seconds < (time_limit + limits.grace_seconds) * limits.wall_factor - 10, why


def test_no_user_namespace_inside_a_sandbox():
    # issue 63, 7: as root bwrap cannot --disable-userns; the seccomp filter refuses CLONE_NEWUSER
    for argv in (["unshare", "-U", "/bin/true"], ["unshare", "-Ur", "--fork", "/bin/true"]):
        started, done = grader_sandbox.run_empty(argv, ROOT)
        assert started and done.returncode != 0 and b"Operation not permitted" in done.stderr, argv
    started, done = grader_sandbox.run_empty(["/bin/sh", "-c", "echo inside"], ROOT)
    assert started and done.returncode == 0 and done.stdout == b"inside\n"  # the filter lets the rest run


def test_spreadsheet_formulas_are_escaped(attacked):
    assert "\n'=2+3,,," in attacked["csv"]
    rows = [grader_report.Row("=SUM(A1)", error="-1 is not a notebook", flags=["@x", "+y"]), grader_report.Row("+cmd"), grader_report.Row("@a"),
            grader_report.Row("plain-name")]
    lines = grader_report.grades_csv(rows).splitlines()[1:]
    assert lines == ["'+cmd,,,,,,", "'=SUM(A1),,,,'@x; +y,'-1 is not a notebook,", "'@a,,,,,,", "plain-name,,,,,,"]


# ---- without running anything ------------------------------------------------------------

def test_without_bwrap_the_grader_says_what_to_install(tmp_path, monkeypatch, capsys):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "erin.txt").write_text("notes")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(grader_sandbox.SandboxError, match=r"apt-get install bubblewrap.*--no-sandbox"):
        grader_batch.grade_folder(tmp_path / "class")
    assert grader_cli.main(["grade", str(tmp_path / "class")]) == 2
    assert "bubblewrap" in capsys.readouterr().err
    # trusted use only: every row says it was not sandboxed
    _, rows = grader_batch.grade_folder(tmp_path / "class", sandbox=False)
    assert [r.flags for r in rows] == [[grader_sandbox.NO_SANDBOX_FLAG]]
    assert grader_sandbox.NO_SANDBOX_FLAG in (tmp_path / "class" / "grades.csv").read_text()


def test_a_weight_identical_checkpoint_is_the_reference_one(tmp_path):
    import torch
    ref = SOURCE / "a2_transformer" / "transformer.pt"
    shutil.copy(ref, tmp_path / "copy.pt")
    assert grader_checkpoints.same_weights(tmp_path / "copy.pt", ref)
    state = torch.load(ref, map_location="cpu", weights_only=True)
    state["extra"]["note"] = "saved again"  # other bytes, the same weights
    torch.save(state, tmp_path / "resaved.pt")
    assert (tmp_path / "resaved.pt").read_bytes() != ref.read_bytes() and grader_checkpoints.same_weights(tmp_path / "resaved.pt", ref)
    T._own_checkpoint(ref, tmp_path / "own.pt")
    assert not grader_checkpoints.same_weights(tmp_path / "own.pt", ref)
    T._own_checkpoint(ref, tmp_path / "noisy.pt", noise=1e-6)  # a copy with a little noise is still a copy
    assert grader_checkpoints.same_weights(tmp_path / "noisy.pt", ref)
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    assert not grader_checkpoints.same_weights(tmp_path / "junk.pt", ref)


def test_near_copies_compute_the_reference_function_and_other_runs_do_not(tmp_path):
    # F6: the grader compares what the reference class does with the handed-in weights and with
    # the reference ones (a6's trained-model inputs); weights alone miss these copies
    import torch
    ref = SOURCE / "a6_vit" / "vit.pt"
    question = grader_run.questions_judged_outside(SOURCE / "a6_vit" / "a6_vit.ipynb")["test_accuracy"]
    reference = grader_checkpoints.reference_outputs(question, ref)
    state = torch.load(ref, map_location="cpu", weights_only=True)
    g = torch.Generator().manual_seed(0)
    noisy = {**state, "model": {k: v + 0.01 * v.std() * torch.randn(v.shape, generator=g) if v.numel() > 1 else v
                                for k, v in state["model"].items()}}
    hotter = {**state, "model": {k: 1.5 * v if k.startswith("norm.") else v for k, v in state["model"].items()}}
    torch.save(noisy, tmp_path / "noisy.pt")
    _permuted(ref, tmp_path / "permuted.pt")
    copies = {"1 % noise": noisy, "permuted": torch.load(tmp_path / "permuted.pt", weights_only=True),
              "final norm x1.5 (a temperature)": hotter}
    assert not grader_checkpoints.same_weights(tmp_path / "noisy.pt", ref) and not grader_checkpoints.same_weights(tmp_path / "permuted.pt", ref)
    for what, copy in copies.items():
        distance = grader_checkpoints.output_distance(question.expected_for(question.calls(copy)), reference)
        assert distance < grader_checkpoints.NEAR_REFERENCE_OUTPUTS, (what, distance)
    T._own_checkpoint(ref, tmp_path / "own.pt")  # the tests' stand-in for an honest run
    own = torch.load(tmp_path / "own.pt", weights_only=True)
    assert grader_checkpoints.output_distance(question.expected_for(question.calls(own)), reference) > 2 * grader_checkpoints.NEAR_REFERENCE_OUTPUTS
    assert question.verdict(own) == (True, "")  # and it still passes the accuracy thresholds


def test_links_and_oversized_files_are_refused_before_anything_runs(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("root:the grader's secret")
    (folder / "mallory.ipynb").symlink_to(secret)
    (folder / "trudy").mkdir()
    shutil.copy(RELEASE / "a2_transformer" / "a2_transformer.ipynb", folder / "trudy")
    (folder / "trudy" / "transformer.pt").symlink_to(secret)
    (folder / "huge.ipynb").write_bytes(b" " * (grader_assemble.MAX_NOTEBOOK_BYTES + 1))
    _, rows = grader_batch.grade_folder(folder, time_limit=TIME_LIMIT)
    errors = {r.student: r.error for r in rows}
    assert "symbolic link" in errors["mallory"] and "symbolic link" in errors["trudy"]
    assert "expected at most 32 MiB" in errors["huge"]
    assert "secret" not in (folder / "grades.csv").read_text()


def test_forged_or_malformed_answers_score_nothing():
    import json

    from grader import verdicts as grader_verdicts
    question = grader_verdicts.load_checks(SOURCE / "a3_bpe" / "a3_bpe.ipynb")["test_merge_pair"]
    n = len(question.cases())
    deep = "[" * 5000 + "]" * 5000
    tensor = {"value": {"__tensor__": {"dtype": "float32", "shape": [10**9], "data": [1.0]}}}
    for forged in (None, "not json", deep, json.dumps([{"value": 1}] * (n - 1)), json.dumps([tensor] * n),
                   json.dumps([{"value": {"__dtype__": "manual_seed"}}] * n), json.dumps(["x"] * n)):
        ok, why = grader_verdicts.judge(question, forged)
        assert not ok and why, forged if forged is None else forged[:40]
    # the right answers, sent back as plain data, do score
    right = [{"value": grader_verdicts.inside.encode(x)} for x in question.expected()]
    assert grader_verdicts.judge(question, json.dumps(right)) == (True, "")


@pytest.mark.parametrize("name", T.NAMES)
def test_every_question_is_judged_outside_and_no_hidden_test_enters_the_sandbox(name):
    source = T._source(name)
    checks = grader_run.questions_judged_outside(SOURCE / name / f"{name}.ipynb")
    assert set(checks) == set(grader_cells.points(source)), "a test cell with no verdict outside the sandbox"
    sent = grader_run.to_run(grader_assemble.assemble(T._solved_release(name), source).nb, checks, "/tmp/work", "/tmp/grader")
    text = nbformat.writes(sent)
    hidden = [line.strip() for c in source.cells
              for region in T._regions(c.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
              for line in region.splitlines() if len(line.strip()) > 12]
    visible = "\n".join(grader_cells.HIDDEN_TESTS.sub("", c.source) for c in source.cells)
    assert "HIDDEN TESTS" not in text and hidden
    assert [line for line in hidden if line not in visible and line in text] == []
    probes = [c for c in sent.cells if grader_run.PROBE in c.metadata]
    assert sorted(c.metadata[grader_run.PROBE] for c in probes) == sorted(checks)

"""`make full` (scripts/run_full.py): executed copies and a table in the build folder,
the committed notebooks untouched."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.integration  # executes 00 in the full profile: `make integration` (Makefile)
def test_make_full_writes_copies_and_a_table_and_leaves_the_notebook_alone(tmp_path, device):
    notebook = ROOT / "notebooks" / "00_welcome.ipynb"
    before = notebook.read_bytes()
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_full.py"), "--out", str(tmp_path),
                          str(notebook)], capture_output=True, text=True, timeout=300)  # 00 trains nothing
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert notebook.read_bytes() == before
    executed = json.loads((tmp_path / "00_welcome.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    assert "profile: full" in text
    rows = json.loads((tmp_path / "summary.json").read_text())
    assert [r["notebook"] for r in rows] == ["00_welcome.ipynb"] and rows[0]["status"] == "ok"
    # the device the kernel's setup() reported: this run's (it inherits COURSE_DEVICE)
    assert rows[0]["device"] == f"{device} (full)" and rows[0]["seconds"] > 0
    table = (tmp_path / "summary.md").read_text()
    assert "| notebook | wall time (s) | main score | device | status |" in table and "00_welcome" in table
    assert "00_welcome.ipynb" in out.stdout and "| total |" in out.stdout
    # before it starts it says what to expect on this kind of machine
    assert out.stdout.index(f"make full on {device}: expected wall time") < out.stdout.index("00_welcome.ipynb:")


def test_the_expected_times_name_every_notebook_and_what_is_measured():
    """Every notebook's full profile has a measured time on a 2-core CPU, within issue 32's 20
    minutes, and each one that ran to its end on a GPU has its time there."""
    from scripts import run_full
    from course_utils.files import chapters
    names = chapters()
    assert set(run_full.MEASURED_MINUTES["cpu"]) == {p.stem for p in names}
    assert all(minutes <= 20 for minutes in run_full.MEASURED_MINUTES["cpu"].values())
    cpu, gpu = run_full.expected_time(names, "cpu"), run_full.expected_time(names, "cuda:0")
    assert "not measured" not in cpu and "03_convs2s: about 6 min" in cpu and "within 20 minutes" in cpu
    assert "07_gpt: about 3 min" in gpu and "not measured" not in gpu
    assert "08_vision_transformer: about 4 min (estimated: alone it reached" in gpu
    assert "within 20 minutes" not in gpu


@pytest.mark.integration  # runs scripts/run_full.py on a notebook in a kernel: `make integration` (CI, after `make test`; issue 39)
def test_make_full_reports_a_failing_notebook(tmp_path):
    import nbformat
    broken = tmp_path / "src" / "99_broken.ipynb"
    broken.parent.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise ValueError('no GPU magic')")])
    nbformat.write(nb, broken)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_full.py"), "--out", str(tmp_path / "out"),
                          str(broken)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    rows = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert rows[0]["status"].startswith("FAILED") and "no GPU magic" in rows[0]["status"]


def test_jobs_run_at_most_n_at_once_each_after_what_it_reads():
    import threading
    import time
    from scripts import run_full
    names = ["00_welcome", "01_seq2seq_bottleneck", "02_bahdanau_attention", "03_convs2s",
             "04_transformer", "05_bert", "05b_bert_finetuning", "06_bpe"]
    started, ended, lock = {}, {}, threading.Lock()
    slow = {"01_seq2seq_bottleneck": 0.3, "02_bahdanau_attention": 0.2}

    def run_one(name):
        with lock:
            started[name] = time.perf_counter()
            assert sum(1 for n in started if n not in ended) <= 3, "more than 3 at once"
        time.sleep(slow.get(name, 0.05))
        with lock:
            ended[name] = time.perf_counter()
        return name.upper()

    finished = run_full.schedule(names, 3, run_one)
    assert sorted(n for n, _ in finished) == sorted(names) and all(r == n.upper() for n, r in finished)
    for name, reads in run_full.READS.items():
        assert all(started[name] >= ended[dep] for dep in reads), name   # after what it reads
    # 05 and 06 read nothing: they did not wait behind 03 and 04, which waited for 01 and 02
    assert started["05_bert"] < ended["02_bahdanau_attention"]
    # one at a time: the order given, nothing beside it
    order = []
    assert [n for n, _ in run_full.schedule(["03_convs2s", "00_welcome"], 1, order.append)] == ["03_convs2s", "00_welcome"]
    with pytest.raises(ValueError, match="jobs must be a positive int, got 0"):
        run_full.schedule(names, 0, run_one)


@pytest.mark.integration  # runs scripts/run_full.py on three notebooks in kernels: `make integration` (CI, after `make test`; issue 39)
def test_make_full_with_jobs_runs_notebooks_side_by_side_and_reports_each(tmp_path):
    import nbformat
    src = tmp_path / "src"
    src.mkdir()
    for name, code in (("91_one", "import time; time.sleep(1); print('one')"),
                       ("92_two", "import time; time.sleep(1); print('two')"),
                       ("93_broken", "raise ValueError('no GPU magic')")):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), src / f"{name}.ipynb")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_full.py"), "--out", str(tmp_path / "out"),
                          "--jobs", "3", *sorted(str(p) for p in src.glob("*.ipynb"))],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    rows = {r["notebook"]: r for r in json.loads((tmp_path / "out" / "summary.json").read_text())}
    assert rows["91_one.ipynb"]["status"] == rows["92_two.ipynb"]["status"] == "ok"
    assert rows["93_broken.ipynb"]["status"].startswith("FAILED") and "no GPU magic" in rows["93_broken.ipynb"]["status"]
    executed = json.loads((tmp_path / "out" / "91_one.ipynb").read_text())
    assert "".join(executed["cells"][0]["outputs"][0]["text"]) == "one\n"
    assert "3 notebooks at a time:" in (tmp_path / "out" / "summary.md").read_text()
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_full.py"), "--jobs", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--jobs must be at least 1, got 0" in bad.stderr

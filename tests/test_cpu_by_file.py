"""scripts/cpu_by_file.py, the summary of where a test run's time went: a child process's CPU
time counts for the file whose test waited for it, once; a test that only waits costs no CPU;
an xdist worker's counts reach the controller, once; the machine's busy time leaves out idle
and steal."""

import os
import re
import subprocess
import sys

import pytest

from scripts import cpu_by_file
from scripts.cpu_by_file import summary_lines

BURN = """
import subprocess, sys

def test_a_child_that_computes():
    # a child process that spends about 1.5 s of CPU time, waited for
    subprocess.run([sys.executable, "-c",
                    "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.5: pass"], check=True)
"""
WAIT = """
import time

def test_a_wait():
    time.sleep(1.5)
"""


def _run(tmp_path, *args):
    (tmp_path / "test_burn.py").write_text(BURN)
    (tmp_path / "test_wait.py").write_text(WAIT)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")   # not the course's settings or conftest
    # no plugins but this one (and xdist when asked): the installed ones (nbval, ...) take seconds to load
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "scripts.cpu_by_file", "-p", "no:cacheprovider",
                          *args, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = {m["file"]: (float(m["cpu"]), float(m["wall"]), int(m["tests"]))
            for m in re.finditer(r"^\s*(?P<cpu>\d+)\s+(?P<wall>\d+)\s+(?P<tests>\d+)\s+(?P<file>test_\w+\.py)$",
                                 run.stdout, re.M)}
    assert "where the time went" in run.stdout, run.stdout[-3000:]
    if sys.platform.startswith("linux"):
        assert "the machine (anything else it ran included)" in run.stdout, run.stdout[-3000:]
    return rows, run.stdout


@pytest.mark.integration  # runs pytest twice in processes of its own: `make integration` (CI, after `make test`; issue 39)
@pytest.mark.parametrize("workers", [[], ["-p", "xdist.plugin", "-n", "2"]], ids=["one process", "xdist"])
def test_a_childs_cpu_counts_for_its_file_and_a_wait_costs_none(tmp_path, workers):
    rows, out = _run(tmp_path, *workers)
    if workers:
        assert re.search(r"\b2 workers\b", out), out[:2000]
    assert set(rows) == {"test_burn.py", "test_wait.py"}, rows
    burn_cpu, _, burn_tests = rows["test_burn.py"]
    wait_cpu, wait_wall, wait_tests = rows["test_wait.py"]
    assert 1 <= burn_cpu <= 2 and burn_tests == 1   # the child's 1.5 s, once (whole seconds in the summary)
    assert wait_cpu == 0 and wait_wall >= 1 and wait_tests == 1


def test_the_summary_ranks_files_sums_the_rest_and_the_notebooks():
    by_file = {"tests/test_a.py": [10.0, 12.0, 3], "notebooks/01.ipynb": [300.0, 320.0, 40],
               "tests/test_b.py": [2.0, 30.0, 1], "notebooks/02.ipynb": [100.0, 90.0, 20]}
    lines = summary_lines(by_file, top=2, machine=(800.0, 449.6, 2))
    assert lines[1].split() == ["300", "320", "40", "notebooks/01.ipynb"]
    assert lines[2].split() == ["100", "90", "20", "notebooks/02.ipynb"]
    assert lines[3].split() == ["12", "42", "4", "the", "other", "2", "files"]
    assert lines[4].split()[:4] == ["412", "452", "64", "in"] and "(400 CPU s of it in notebooks)" in lines[4]
    assert "800 CPU s busy of 2 cores x 450 s = 900 CPU s (89% busy)" in lines[5]
    assert len(summary_lines(by_file, top=10)) == 6   # every file listed, no "other" line, no machine line


class _Worker:
    def __init__(self, counts):
        import json
        self.workeroutput = {"cpu_by_file": json.dumps(counts)}


def test_a_workers_counts_are_added_once_and_two_workers_add_up(monkeypatch):
    monkeypatch.setattr(cpu_by_file, "_by_file", {})   # not the running session's counts
    first = _Worker({"tests/test_a.py": [3.0, 4.0, 2]})
    cpu_by_file.pytest_testnodedown(first, None)
    cpu_by_file.pytest_testnodedown(first, "interrupted")   # xdist's second call for an interrupted worker
    cpu_by_file.pytest_testnodedown(_Worker({"tests/test_a.py": [1.0, 1.0, 1], "tests/test_b.py": [5.0, 6.0, 3]}), None)
    assert cpu_by_file._by_file == {"tests/test_a.py": [4.0, 5.0, 3], "tests/test_b.py": [5.0, 6.0, 3]}


def test_the_machines_busy_time_leaves_out_idle_iowait_and_steal(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 20 30 400 50 6 4 1000 0 0\ncpu0 50 10 15 200 25 3 2 500 0 0\n")
    assert cpu_by_file.machine_busy_seconds(str(stat)) == pytest.approx(160 / os.sysconf("SC_CLK_TCK"))
    stat.write_text("not a stat file\n")
    assert cpu_by_file.machine_busy_seconds(str(stat)) is None
    assert cpu_by_file.machine_busy_seconds(str(tmp_path / "missing")) is None

"""scripts/cpu_by_file.py, the summary of where a test run's time went: a child process's CPU
time counts for the file whose test waited for it, a test that only waits costs no CPU, and
an xdist worker's counts reach the controller."""

import os
import re
import subprocess
import sys

import pytest

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
    rows = {m["file"]: (float(m["cpu"]), float(m["wall"]))
            for m in re.finditer(r"^\s*(?P<cpu>\d+)\s+(?P<wall>\d+)\s+\d+\s+(?P<file>test_\w+\.py)$",
                                 run.stdout, re.M)}
    assert "where the time went" in run.stdout, run.stdout[-3000:]
    return rows


@pytest.mark.parametrize("workers", [[], ["-p", "xdist.plugin", "-n", "2"]], ids=["one process", "xdist"])
def test_a_childs_cpu_counts_for_its_file_and_a_wait_costs_none(tmp_path, workers):
    rows = _run(tmp_path, *workers)
    assert set(rows) == {"test_burn.py", "test_wait.py"}, rows
    burn_cpu, _ = rows["test_burn.py"]
    wait_cpu, wait_wall = rows["test_wait.py"]
    assert burn_cpu >= 1            # the child's 1.5 s (rounded to whole seconds in the summary)
    assert wait_cpu == 0 and wait_wall >= 1


def test_the_summary_ranks_files_sums_the_rest_and_the_notebooks():
    by_file = {"tests/test_a.py": [10.0, 12.0, 3], "notebooks/01.ipynb": [300.0, 320.0, 40],
               "tests/test_b.py": [2.0, 30.0, 1], "notebooks/02.ipynb": [100.0, 90.0, 20]}
    lines = summary_lines(by_file, top=2, machine=(800.0, 450.0, 2))
    assert lines[1].split() == ["300", "320", "40", "notebooks/01.ipynb"]
    assert lines[2].split() == ["100", "90", "20", "notebooks/02.ipynb"]
    assert lines[3].split() == ["12", "42", "4", "the", "other", "2", "files"]
    assert lines[4].split()[:4] == ["412", "452", "64", "in"] and "(400 CPU s of it in notebooks)" in lines[4]
    assert "800 CPU s busy of 2 cores x 450 s = 900 (89% busy)" in lines[5]
    assert len(summary_lines(by_file, top=10)) == 6   # every file listed, no "other" line, no machine line

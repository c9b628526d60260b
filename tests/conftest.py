"""Shared fixtures: every test runs in the fast profile, seeded, on one CPU thread, on the
CPU unless ``COURSE_DEVICE`` says otherwise (``cuda``), or on a GPU pretended on the CPU
under the device check's plugin (``pytest -p scripts.device_check``, ``make unit-check``);
tests that train or decode use the ``device`` fixture.

Environment set here reaches the notebook kernels that nbval starts in the same run,
so nothing that changes how notebooks render (such as MPLBACKEND) belongs here.
"""

import os

import course_utils  # (sets OMP_WAIT_POLICY before torch loads)

# course_utils/check.env: the fast profile, one thread, the CPU (the tests and the stored
# notebooks are CPU runs, also on a machine with a GPU), unless the caller set otherwise
course_utils.use_check_env()

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from scripts.foreign_arithmetic import GUARD_KEYS  # noqa: E402
from scripts.kernel_sockets import use_unix_sockets  # noqa: E402
from browser import CHROMIUM  # noqa: E402  (COURSE_CHROMIUM, else Debian's)

use_unix_sockets()   # kernels started side by side cannot pick the same TCP port (see the module)

# where the time goes: CPU seconds per file (notebooks too), printed at the end of a run
pytest_plugins = ["scripts.cpu_by_file"]


# ---- the two tiers: `make test` starts no browser and no sandbox ---------------------------

#: programs that only tests marked ``integration`` may start (`make integration`, pyproject.toml):
#: `make test` needs nothing but pip's packages, and stays within its time
INTEGRATION_PROGRAMS = {"bwrap", "chromium", "chromium-browser", "chrome", "google-chrome", "run-driver",
                        CHROMIUM.name}  # run-driver: Playwright's


def _programs(args, kwargs) -> set[str]:
    """The names of the programs a ``subprocess.Popen(args, **kwargs)`` would start: the
    command's words that are not options (so also a program behind taskset or prlimit)."""
    import shlex
    if isinstance(args, (str, bytes, os.PathLike)):
        args = shlex.split(os.fsdecode(args)) if kwargs.get("shell") else [args]
    words = [os.fsdecode(a) for a in args if isinstance(a, (str, bytes, os.PathLike))]
    if kwargs.get("executable") is not None:
        words.append(os.fsdecode(kwargs["executable"]))
    return {os.path.basename(w) for w in words if not w.startswith("-")}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test not marked ``integration`` (its fixtures' set-up and tear-down included) that
    starts bubblewrap, Chromium or Playwright fails, naming the mark it needs; the process is
    never started."""
    if not isinstance(item, pytest.Function) or item.get_closest_marker("integration"):
        yield
        return
    import subprocess
    real = subprocess.Popen.__init__

    def refuse(self, args, *more, **kwargs):
        args = args if isinstance(args, (str, bytes, os.PathLike)) else list(args)   # a generator, once
        refused = sorted(_programs(args, kwargs) & INTEGRATION_PROGRAMS)
        if refused:
            raise RuntimeError(f"{item.nodeid} starts {refused[0]}: mark it @pytest.mark.integration (it then "
                               "runs in `make integration`, not in `make test`)")
        real(self, args, *more, **kwargs)
    subprocess.Popen.__init__ = refuse
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real


@pytest.fixture(scope="session")
def device():
    """The device the package would use (``runtime.get_device()``): the CPU by default (set
    above), a CUDA GPU with ``COURSE_DEVICE=cuda``, and under the device check's plugin
    (``-p scripts.device_check``) a GPU pretended on the CPU. Tests that train, decode, generate or evaluate a model move the
    model and its inputs here (``model.to(device)``, ``batch.to(device)``), as a notebook
    does: the package refuses a model left on the CPU beside a GPU (``runtime.check_device``)."""
    from course_utils.runtime import get_device
    return get_device()


@pytest.fixture(autouse=True)
def _seeded():
    from course_utils.runtime import set_seed
    set_seed(0)
    yield


@pytest.fixture(scope="session")
def small_synthetic():
    """A small, uncached copy of the synthetic task (fast to generate)."""
    from course_utils.data import load_synthetic
    return load_synthetic(num_train=600, num_valid=100, num_test=100, seed=0, cache=False)


@pytest.fixture(scope="session")
def padded_batch(small_synthetic):
    """(training data, a batch of 8 pairs of mixed lengths, so with real padding)."""
    from course_utils.data import TranslationData
    data = TranslationData.build(small_synthetic.train)
    b = data.batches(8, shuffle=True, by_length=False)[0]
    assert (b.src_lengths < b.src.shape[1]).any()
    return data, b


# ---- scheduling: longest files first, so that the xdist workers finish together ----------

#: Wall seconds per file in `make test` and `make integration` on a 2-core AMD EPYC with AVX-512
#: (2026-12-01, from the summary that scripts/cpu_by_file.py prints). A file not listed counts as
#: cheap. With --dist loadfile --no-loadscope-reorder (Makefile) each worker takes the next file
#: in this order when it is free: longest first, so that the two finish together.
EXPECTED_SECONDS = {   # make test
    "05b_bert_finetuning.ipynb": 145, "01_seq2seq_bottleneck.ipynb": 134, "02_bahdanau_attention.ipynb": 129,
    "08_vision_transformer.ipynb": 127, "04_transformer.ipynb": 114, "05_bert.ipynb": 100, "03_convs2s.ipynb": 60,
    "07b_small_llm.ipynb": 100, "07_gpt.ipynb": 54, "06_bpe.ipynb": 50, "test_runtime.py": 15, "test_assignments.py": 13,
    "00_welcome.ipynb": 8,
}
#: the same for `make integration` (-m integration)
INTEGRATION_SECONDS = {
    "test_hub.py": 400, "test_assignments.py": 364, "test_grader_redteam.py": 239, "test_browser_lab_a.py": 160,
    "test_browser_lab_c.py": 158, "test_browser_lab_b.py": 137, "test_slides.py": 83, "test_book.py": 72,
    "test_grader_sandbox.py": 61, "test_run_full.py": 35, "test_grader_calls.py": 34, "test_device_check.py": 28,
    "test_foreign_arithmetic.py": 15, "test_bench.py": 14, "test_cpu_by_file.py": 5,
    "test_full_profile_smoke.py": 0,   # skipped when the browser test runs the full profile...
}
if not CHROMIUM.exists():
    INTEGRATION_SECONDS["test_full_profile_smoke.py"] = 150   # ...which it cannot without Chromium


def pytest_collection_modifyitems(session, config, items):
    expected = INTEGRATION_SECONDS if config.option.markexpr.strip() == "integration" else EXPECTED_SECONDS
    items.sort(key=lambda item: -expected.get(Path(str(item.fspath)).name, 0))  # stable


# ---- a failed notebook cell under the foreign arithmetic: say what it means ---------------

def pytest_terminal_summary(terminalreporter, exitstatus, config):
    failed = [r.nodeid for r in terminalreporter.stats.get("failed", []) if ".ipynb::" in r.nodeid]
    foreign = " ".join(f"{k}={os.environ[k]}" for k in GUARD_KEYS if k in os.environ)
    if failed and foreign:
        terminalreporter.write_sep("-", "notebook cells that failed under the foreign arithmetic path")
        terminalreporter.write_line(
            f"These runs used {foreign} (make test's portability guard; the notebooks were stored on "
            "the native path). A cell whose output differs only in numbers, words or order that come "
            "from training or a long reduction prints text that depends on the last bits of the "
            "arithmetic and would fail on another CPU: mark it # NBVAL_IGNORE_OUTPUT and assert what "
            "matters with a tolerance in the next cell. `make test FOREIGN_ARITHMETIC=0` tells the "
            "two apart (it passes natively if only the arithmetic is to blame). Cells: "
            + ", ".join(failed))


@pytest.fixture(scope="session")
def grading_alone(tmp_path_factory):
    """A context manager: while it is held, no other pytest worker grades a folder in sandboxes
    (a lock file shared by the workers). tests/test_grader_sandbox.py checks that no sandbox
    process outlives its grading: a class graded at the same time by another worker (the mixed
    folder of tests/test_assignments.py) would be seen as one."""
    import contextlib
    import fcntl

    path = tmp_path_factory.getbasetemp().parent / "grading.lock"

    @contextlib.contextmanager
    def alone():
        with open(path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    return alone

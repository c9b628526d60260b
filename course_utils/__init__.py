"""Helper package of the course "Attention-based models".

One module per concept; each public function names the notebook where it is taught.
Importing the package is cheap: submodules are imported on first use
(``course_utils.data``, ``course_utils.training``, ...).

Importing it also sets ``OMP_WAIT_POLICY=PASSIVE`` unless already set, *before* torch
starts its OpenMP thread pool: with spin-waiting threads, PyTorch on a 2-core machine can
stall for minutes (see ``course_utils.runtime``). And it sets ``HF_HUB_OFFLINE=1`` and
``TRANSFORMERS_OFFLINE=1`` unless already set: the course loads its pre-trained model from
an installed package, and nothing may wait on the network. And ``USE_HUB_KERNELS=0``:
``transformers`` (5.x) otherwise swaps layers of a loaded model for compiled kernels that it
fetches from the Hub at run time, on the device type it sees (on a GPU: by its compute
capability), which an offline course must not do, and which the device check's pretended GPU
cannot answer.
"""

import importlib
import os
import pkgutil
import sys

# Must happen before torch loads its OpenMP runtime, which reads it once (at load time).
TORCH_LOADED_BEFORE_US = "torch" in sys.modules
#: OMP_WAIT_POLICY as torch's OpenMP runtime saw it, if torch was imported first (else None)
OMP_POLICY_TORCH_SAW = os.environ.get("OMP_WAIT_POLICY", "") if TORCH_LOADED_BEFORE_US else None


def _read_env(name: str) -> dict[str, str]:
    """KEY=VALUE lines of a settings file beside this one (the Makefile reads the same file)."""
    with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    return dict(line.split("=", 1) for line in lines)


#: the settings of every kernel the course starts for itself (the grader's, the browser test's,
#: the device check's, the full-profile smoke test's), from kernel.env: OpenMP threads that wait
#: without spinning, nothing fetched from the network, Python's string hashes fixed. All but
#: PYTHONHASHSEED are also this process's defaults.
KERNEL_ENV = _read_env("kernel.env")
#: the settings every check runs under (tests, stored outputs, benchmarks, grading), from
#: check.env: the fast profile, one CPU thread, the CPU. Set them with ``use_check_env()``.
CHECK_ENV = _read_env("check.env")
for _key, _value in KERNEL_ENV.items():
    if _key != "PYTHONHASHSEED":      # fixed only in the processes the course starts
        os.environ.setdefault(_key, _value)


def use_check_env() -> None:
    """Set ``CHECK_ENV`` in this process where not already set (tests, benchmarks, grading)."""
    for key, value in CHECK_ENV.items():
        os.environ.setdefault(key, value)


__version__ = "0.1.0"

#: every module of the package (read from its folder: a list kept by hand went stale), the
#: subpackage ``data`` included (``vendor`` holds no Python: not a package)
_SUBMODULES = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
__all__ = sorted(_SUBMODULES) + ["setup"]


def setup(seed: int = 0, deterministic: bool = True, verbose: bool = True, lecture: bool | None = None):
    """The first cell of every notebook: ``runtime.setup`` (seeds, device, profile, threads;
    prints and returns its summary), then the figure style (``viz.use_style``; large fonts for
    a projector when ``lecture`` or ``$COURSE_LECTURE=1``). Taught in: 00_welcome."""
    from course_utils import runtime, viz  # torch and matplotlib: only when called
    summary = runtime.setup(seed=seed, deterministic=deterministic, verbose=verbose, lecture=lecture)
    viz.use_style(lecture=summary.lecture)
    return summary


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

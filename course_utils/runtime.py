"""Runtime set-up shared by every notebook: seeds, device, profile, CPU threads.

Taught in: 00_welcome (and the first cell of every notebook).
Leaves out: multi-GPU and distributed set-up.

Profiles: ``fast`` (CPU, CI: every notebook in about two minutes) and ``full`` (GPU:
bigger models, the real corpus). ``COURSE_PROFILE=fast|full`` chooses; otherwise the
device does (CUDA -> full, anything else -> fast).

Threads: with OpenMP threads that spin-wait, PyTorch on a 2-core machine can stall for
minutes. ``import course_utils`` sets ``OMP_WAIT_POLICY=PASSIVE`` before torch loads, and
``setup()`` then uses every core (at most 8). If torch was imported earlier without that
policy (too late to change it), ``setup()`` falls back to one thread and its summary says
so and how to fix it: every notebook imports course_utils first (a test checks).
``COURSE_NUM_THREADS`` overrides the thread count.

Smoke test: ``COURSE_SMOKE_STEPS=N`` keeps the profile's models and data but runs N optimiser
steps per training run, so that the ``full`` profile can be checked on a CPU in minutes
(tests/test_full_profile_smoke.py); the numbers printed then mean nothing. ``smoke_steps`` and
``smoke_eval_size`` read it (and ``COURSE_SMOKE_EVAL``, test examples per split, default 128).
``recipes.recipe`` writes the caps into the recipe it returns (every count of steps, batch
size and what ``recipes.SMOKE_CAPS`` names): training and the fits run the steps they are
given. Two caps are not in a recipe yet: ``data.load_synthetic`` and ``data.es_en_splits``
keep ``smoke_eval_size()`` test pairs (validation splits stay whole: notebooks index into
them), and ``decoding`` writes at most ``SMOKE_DECODE_LEN`` tokens per output
(``cap_decode_len``).
"""

from __future__ import annotations

import os
import platform
import random
import re
import warnings
from dataclasses import dataclass, asdict

import numpy as np
import torch

import course_utils

PROFILES = ("fast", "full")


#: test examples per split in a smoke run when ``COURSE_SMOKE_EVAL`` is unset (the browser
#: test and the full-profile smoke test read it from here)
SMOKE_EVAL_DEFAULT = 128


def get_device() -> torch.device:
    """The best available device: cuda > mps > cpu, or ``$COURSE_DEVICE`` (cpu, cuda,
    cuda:N, mps) when set. Taught in: 00_welcome."""
    name = os.environ.get("COURSE_DEVICE", "").strip().lower()
    if name:
        if name not in ("cpu", "cuda", "mps") and not re.fullmatch(r"cuda:\d+", name):
            raise ValueError(f"COURSE_DEVICE must be cpu, cuda, cuda:N or mps, got {name!r} (to run on "
                             "this CPU as if a CUDA GPU were there and find device mistakes, use the "
                             "course's device check: make device-check, docs/RUNNING.md)")
        if name.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"COURSE_DEVICE={name} but torch sees no CUDA GPU")
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def check_device(model: torch.nn.Module, *tensors: torch.Tensor, what: str = "training") -> torch.device:
    """The device of ``model``'s parameters, after two checks that stop a silent mistake:
    CUDA is available but the model sits on the CPU (it would train there, for hours), or a
    tensor given with it sits on another device (torch would fail deep inside with an
    index_select message). Both errors name the devices and the fix. Taught in: 00_welcome."""
    param = next(model.parameters(), None)
    if param is None:
        return get_device()
    here = param.device
    if here.type == "cpu" and get_device().type == "cuda":
        raise RuntimeError(f"{what}: the model is on the CPU but a CUDA GPU is available; move it "
                           "first: model.to(device), with device = torch.device(setup().device) "
                           "(or run everything on the CPU with COURSE_DEVICE=cpu)")
    for t in tensors:
        if torch.is_tensor(t) and t.device.type != here.type:
            raise RuntimeError(f"{what}: the model is on {here} but its input {tuple(t.shape)} is on "
                               f"{t.device}; move the input (tensor.to(device), batch.to(device)) first")
    return here


def set_seed(seed: int = 0) -> None:
    """Seed Python, NumPy and torch (all devices). Taught in: 00_welcome."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def profile(device: torch.device | None = None) -> str:
    """The active profile: ``$COURSE_PROFILE`` if set, else 'full' on CUDA, else 'fast'."""
    name = os.environ.get("COURSE_PROFILE", "").strip().lower()
    if name:
        if name not in PROFILES:
            raise ValueError(f"COURSE_PROFILE must be one of {PROFILES}, got {name!r}")
        return name
    device = device if device is not None else get_device()
    return "full" if device.type == "cuda" else "fast"


def pick(fast, full, name: str | None = None):
    """Return ``fast`` or ``full`` depending on the active profile (or ``name``)."""
    name = name or profile()
    if name not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {name!r}")
    return fast if name == "fast" else full


def _positive_int_env(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a positive int, got {value!r}") from None
    if number < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return number


def smoke_steps() -> int | None:
    """``$COURSE_SMOKE_STEPS``: the cap on optimiser steps per training run of a smoke
    test, or None (no smoke test: train as the profile says)."""
    return _positive_int_env("COURSE_SMOKE_STEPS")


def smoke_eval_size() -> int | None:
    """In a smoke test, the cap on test examples: ``$COURSE_SMOKE_EVAL`` (default 128);
    None outside a smoke test."""
    if smoke_steps() is None:
        return None
    size = _positive_int_env("COURSE_SMOKE_EVAL")
    return SMOKE_EVAL_DEFAULT if size is None else size


#: in a smoke test, the longest output a decoder writes (an untrained model rarely ends its
#: outputs, and decoding every test sentence to the full length was most of a smoke run)
SMOKE_DECODE_LEN = 12


def cap_decode_len(max_len: int) -> int:
    """``max_len`` (tokens a decoder may write) capped at ``SMOKE_DECODE_LEN`` in a smoke
    test; unchanged outside one."""
    return max_len if smoke_steps() is None else min(max_len, SMOKE_DECODE_LEN)


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


MAX_THREADS = 8  # small models gain little from more


def thread_choice() -> tuple[int, str]:
    """How many CPU threads to use, and a note for the summary when it is fewer than the
    machine offers for a reason the student can fix ('' otherwise).

    ``$COURSE_NUM_THREADS`` wins. Else every usable core (at most 8), unless torch was
    imported *before* course_utils while ``OMP_WAIT_POLICY`` was not PASSIVE: its OpenMP
    threads then spin-wait, which can stall a small machine for minutes, so one thread is
    used and the note says how to get them all (import course_utils first)."""
    requested = _positive_int_env("COURSE_NUM_THREADS")
    if requested is not None:
        return requested, ""
    cores = min(_usable_cores(), MAX_THREADS)
    saw = course_utils.OMP_POLICY_TORCH_SAW  # None: course_utils came first, all is well
    if saw is not None and saw.strip().upper() != "PASSIVE" and cores > 1:
        return 1, (f"1 CPU thread instead of {cores}: torch was imported before course_utils, too late "
                   "to stop its threads from spin-waiting (which can stall a small machine). "
                   "Import course_utils first and restart the kernel to use them all.")
    return cores, ""


def _set_threads(num_threads: int) -> None:
    if torch.get_num_threads() != num_threads:
        torch.set_num_threads(num_threads)
    # numpy's and scipy's BLAS (scikit-learn's probes and classifiers) the same number: by
    # default OpenBLAS takes every core, and on the small matrices of the course its threads
    # cost more than they give (a logistic regression of 05's probe size: 0.76 s on 2 threads,
    # 0.12 s on 1, on a 2-core CPU). The variable reaches the BLAS libraries loaded later
    # (scipy's), threadpoolctl (a scikit-learn dependency) those already loaded (numpy's).
    os.environ["OPENBLAS_NUM_THREADS"] = str(num_threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=num_threads, user_api="blas")


def configure_threads() -> int:
    """Set a CPU thread count that cannot stall (``thread_choice``); returns it."""
    num_threads, _ = thread_choice()
    _set_threads(num_threads)
    return num_threads


@dataclass(frozen=True)
class Summary:
    """What ``setup()`` configured."""
    seed: int
    device: str
    profile: str
    num_threads: int
    lecture: bool
    python: str
    torch: str
    numpy: str
    platform: str
    notes: tuple[str, ...] = ()  # warnings worth a student's attention (threads, profile)

    def __str__(self) -> str:
        return (f"course_utils {course_utils.__version__} | Python {self.python} | torch {self.torch}"
                f" | numpy {self.numpy}\ndevice: {self.device} | profile: {self.profile}"
                f" | CPU threads: {self.num_threads} | seed: {self.seed}"
                + "".join(f"\nNOTE: {note}" for note in self.notes))

    def as_dict(self) -> dict:
        return asdict(self)


def setup(seed: int = 0, deterministic: bool = True, verbose: bool = True,
          lecture: bool | None = None) -> Summary:
    """Seed everything, pick device and profile, set safe threads; print and return a
    summary.

    ``lecture`` is recorded in the summary (default: ``$COURSE_LECTURE=1``); the figure style
    that it chooses is set by ``course_utils.setup``, which notebooks call (runtime sets up
    the environment only, not the views).
    """
    num_threads, threads_note = thread_choice()
    _set_threads(num_threads)
    set_seed(seed)
    device = get_device()
    if deterministic:
        # cuBLAS needs this for deterministic matmuls; harmless elsewhere.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        # On a GPU a few kernels have no deterministic version (the 2-D negative log-likelihood,
        # memory-efficient attention's backward): they run anyway, and warn_only would print a
        # UserWarning into every training cell that uses them.
        warnings.filterwarnings("ignore", message=r".*(does not have a deterministic implementation|"
                                                  r"defaults to a non-deterministic algorithm)")
    # Denormal floats slow small convolutional models down a lot on some CPUs.
    torch.set_flush_denormal(True)
    if lecture is None:
        lecture = os.environ.get("COURSE_LECTURE", "0").strip().lower() in ("1", "true", "yes")
    summary = Summary(
        seed=seed,
        device=str(device),
        profile=profile(device),
        num_threads=num_threads,
        lecture=bool(lecture),
        python=platform.python_version(),
        torch=torch.__version__,
        numpy=np.__version__,
        platform=f"{platform.system()} {platform.machine()}",
        notes=tuple(n for n in (threads_note,) if n),
    )
    if verbose:
        print(summary)
        if smoke_steps() is not None:
            print(f"SMOKE TEST: at most {smoke_steps()} training steps per run and "
                  f"{smoke_eval_size()} test examples per split; the numbers mean nothing")
    return summary

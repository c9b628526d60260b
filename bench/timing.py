"""How the benchmark times: medians of repeated calls (``time.perf_counter`` or
``torch.utils.benchmark``), and the machine the numbers were taken on."""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

import torch


def median_time(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` calls (after ``warmup``)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_timer(stmt, env: dict, min_run_time: float = 0.3) -> float:
    """Median seconds per call of ``stmt`` with torch.utils.benchmark (blocked autorange)."""
    from torch.utils import benchmark
    return benchmark.Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads()) \
        .blocked_autorange(min_run_time=min_run_time).median


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    import tokenizers
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "load_1min_at_start": None if load is None else round(load, 2),
            "python": platform.python_version(), "torch": torch.__version__,
            "tokenizers": tokenizers.__version__, "platform": f"{platform.system()} {platform.machine()}"}

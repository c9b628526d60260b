"""Print environment settings that put PyTorch on a floating-point path other than this
machine's native one (``make test`` runs every test and notebook under them).

Why: the notebooks are stored executed, on the native path of whoever ran
``make notebooks``. A printed number that depends on the last bits of a training run or a
long reduction then passes nbval on that machine and fails on a student's laptop (another
CPU, other kernels). Checking the stored outputs under a *different* path on the
developer's own machine catches such an output before it lands.

What changes the bits, measured on x86 (see the closing note of the ``make test`` issue):
- ``ATEN_CPU_CAPABILITY``: the vector width of PyTorch's own kernels (softmax, reductions,
  random numbers). On an AVX-512 machine ``avx2`` costs nothing; ``default`` (no vector
  instructions) makes training about 1.4x slower.
- ``MKL_CBWR``: MKL's code path for matrix products. ``AVX2`` on an AVX-512 machine costs
  nothing; ``COMPATIBLE`` (SSE2) about 1.5x.
- ``ONEDNN_MAX_CPU_ISA``: the same for oneDNN (convolutions).

So the cheapest foreign path is one step below the native one: AVX-512 -> AVX2 (free),
AVX2 -> no vectors (slower, still under the budget). On a CPU without these knobs
(aarch64) only the thread-independent settings are printed and the guard is weaker; the
first line of output (to stderr) says which path was chosen.

Usage: ``env $(python scripts/foreign_arithmetic.py) pytest ...``; ``--explain`` prints
one line for a person instead.
"""

from __future__ import annotations

import platform
import sys

#: native ATen capability -> the settings of the next path down
FOREIGN = {
    "AVX512": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "AVX2": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def native_capability() -> str:
    """PyTorch's CPU capability on this machine without any override ('AVX512', 'AVX2', ...)."""
    import os
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")}
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip().upper()


def foreign_settings(native: str) -> dict[str, str]:
    """The settings of a path other than ``native`` (empty if none is known for it)."""
    return dict(FOREIGN.get(native.upper(), {}))


def main(argv: list[str]) -> int:
    native = native_capability()
    settings = foreign_settings(native)
    if "--explain" in argv:
        if settings:
            print(f"native path {native} ({platform.machine()}); tests run on "
                  + " ".join(f"{k}={v}" for k, v in settings.items()))
        else:
            print(f"native path {native} ({platform.machine()}): no other path known, tests run natively "
                  "(stored outputs are not checked against another arithmetic here)")
        return 0
    print(" ".join(f"{k}={v}" for k, v in settings.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

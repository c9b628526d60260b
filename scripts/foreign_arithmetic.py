"""Print environment settings that put PyTorch on a floating-point path other than this
machine's native one (``make test`` and ``make integration`` run every test and notebook under them).

Why: the notebooks are stored executed, on the native path of whoever ran
``make notebooks``. A printed number that depends on the last bits of a training run or a
long reduction then passes nbval on that machine and fails on a student's laptop (another
CPU, other kernels). Checking the stored outputs under a *different* path on the
developer's own machine catches such an output before it lands.

What changes the bits, measured on this project's 2-core AMD EPYC (AVX-512) machine with
05_bert's stored cells made fragile on purpose (the closing note of the ``make test``
issue has the table):
- ``ATEN_CPU_CAPABILITY``: the vector width of PyTorch's own kernels (softmax, GELU,
  LayerNorm, reductions, random normals). ``avx2`` on an AVX-512 machine costs nothing but
  changes few kernels (softmax). ``default`` (no vector instructions) changes every
  elementwise kernel; it costs about 1.1x on 05 (matrix products dominate) and up to 1.4x
  on small-model training.
- ``MKL_CBWR``: MKL's code path for matrix products. On this AMD CPU ``AVX2``/``AVX``
  change nothing and ``COMPATIBLE`` (SSE2) makes products 2.2x slower; on Intel CPUs MKL
  honours ``AVX2`` (AVX-512 -> AVX2 kernels; not measured here), so it is set on AVX-512
  machines too.
- ``ONEDNN_MAX_CPU_ISA``: the same for oneDNN (convolutions): ``AVX2`` about 1.6x, ``SSE41``
  about 3x slower than AVX-512 on a ConvS2S-sized convolution.
- One CPU thread against two: changes large matrix products only.

The issue's three fragile cells of 05 (fill-in words and fine-tuning table, both from
training; the probe table, from a logistic regression that stopped at 200 iterations):
the strong guard caught all three, the cheap one the two from training. With the probe
made a converged fit on standardised features, its table passes unchanged under both paths
(it is no longer fragile), and both guards still catch the other two when their
``NBVAL_IGNORE_OUTPUT`` markers are taken out.

So there are two guards. ``make test`` takes the cheap one: one step below the native
path (AVX-512 -> ``avx2`` kernels and MKL's and oneDNN's AVX2 paths: no extra time;
AVX2 -> ``default``), which catches what comes out of training. ``make test
FOREIGN_ARITHMETIC=strong`` takes ``ATEN_CPU_CAPABILITY=default`` everywhere (MKL and
oneDNN as in the cheap guard), which moves more bits, at about 1.1x the notebooks' time
(and over the 10-minute budget on 2 cores): run it before committing a notebook whose
stored numbers come from a long reduction rather than from training. On a CPU whose
native path is already ``default`` no other path is known and the guard says so.

Usage: ``env $(python scripts/foreign_arithmetic.py [--strong]) pytest ...``; ``--explain``
prints one line for a person instead.
"""

from __future__ import annotations

import platform
import sys

#: native ATen capability -> the settings of the next path down (the cheap guard)
FOREIGN = {
    "AVX512": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    # (oneDNN stays native on AVX2: its SSE4.1 path made 03's ConvS2S 4x slower under nbval,
    # 119 s against 30 s, and ATen's unvectorised kernels already move every training run)
    "AVX2": {"ATEN_CPU_CAPABILITY": "default"},
    "SVE256": {"ATEN_CPU_CAPABILITY": "default"},
}
#: unvectorised kernels: the whole foreign path of a CPU not listed in FOREIGN; the strong
#: guard takes only its ATen setting (MKL and oneDNN stay one step down as in the cheap
#: guard: oneDNN's SSE4.1 path would make 03's convolutions 3x slower)
STRONG = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"}


#: every variable the guard may set (the browser test and `make notebooks` clear them)
GUARD_KEYS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def native_capability() -> str:
    """PyTorch's CPU capability on this machine without any override ('AVX512', 'AVX2', ...)."""
    import os
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in GUARD_KEYS}
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip().upper()


def foreign_settings(native: str, strength: str = "cheap") -> dict[str, str]:
    """The settings of a path other than ``native`` (empty if none is known for it);
    ``strength`` 'cheap' (one step down) or 'strong' (no vector kernels)."""
    if strength not in ("cheap", "strong"):
        raise ValueError(f"strength must be 'cheap' or 'strong', got {strength!r}")
    if native.upper() == "DEFAULT":
        return {}
    settings = dict(FOREIGN.get(native.upper(), STRONG))
    if strength == "strong":   # the cheap path's MKL and oneDNN settings, with ATen unvectorised
        settings.update(ATEN_CPU_CAPABILITY=STRONG["ATEN_CPU_CAPABILITY"])
    return settings


def main(argv: list[str]) -> int:
    strength = "strong" if "--strong" in argv else "cheap"
    native = native_capability()
    settings = foreign_settings(native, strength)
    if "--explain" in argv:
        if settings:
            print(f"native path {native} ({platform.machine()}); tests run on the {strength} foreign path "
                  + " ".join(f"{k}={v}" for k, v in settings.items()))
        else:
            print(f"native path {native} ({platform.machine()}): no other path known, tests run natively "
                  "(stored outputs are not checked against another arithmetic here)")
        return 0
    print(" ".join(f"{k}={v}" for k, v in settings.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

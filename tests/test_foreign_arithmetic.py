"""make test's portability guard (scripts/foreign_arithmetic.py) really moves PyTorch off
this machine's native floating-point path, and the bits of a computation change with it."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import foreign_arithmetic

SCRIPT = Path(foreign_arithmetic.__file__)

PROBE = ("import hashlib, torch; torch.manual_seed(0); x = torch.randn(257, 129); "
         "print(torch.backends.cpu.get_cpu_capability(), "
         "hashlib.md5(torch.nn.functional.gelu(x).softmax(-1).numpy().tobytes()).hexdigest())")


@functools.lru_cache(maxsize=None)   # the native run serves both strengths
def _probe(extra_env: tuple):
    env = {k: v for k, v in os.environ.items() if k not in foreign_arithmetic.GUARD_KEYS}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                         env={**env, **dict(extra_env)})
    return out.stdout.split()


def _run(extra_env):
    return _probe(tuple(sorted(extra_env.items())))


@pytest.mark.parametrize("strength", ["cheap", "strong"])
@pytest.mark.parametrize("native", sorted(foreign_arithmetic.FOREIGN))
def test_every_known_path_gets_another_one(native, strength):
    settings = foreign_arithmetic.foreign_settings(native, strength)
    assert settings["ATEN_CPU_CAPABILITY"].upper() != native
    assert set(settings) <= set(foreign_arithmetic.GUARD_KEYS)
    assert foreign_arithmetic.foreign_settings("default", strength) == {}   # nothing below it
    with pytest.raises(ValueError, match="strength must be 'cheap' or 'strong', got 'mild'"):
        foreign_arithmetic.foreign_settings(native, "mild")


@pytest.mark.integration  # starts the script and a torch probe per path: `make integration` (CI, after `make test`; issue 39)
@pytest.mark.parametrize("strength", ["cheap", "strong"])
def test_the_printed_settings_change_the_capability_and_the_bits(strength):
    native = foreign_arithmetic.native_capability()
    settings = foreign_arithmetic.foreign_settings(native, strength)
    if not settings:
        pytest.skip(f"no foreign path known for the native path {native}")
    flag = ["--strong"] if strength == "strong" else []
    printed = subprocess.run([sys.executable, str(SCRIPT), *flag], capture_output=True, text=True,
                             check=True).stdout
    assert printed.split() == [f"{k}={v}" for k, v in settings.items()]
    cap_native, bits_native = _run({})
    cap_foreign, bits_foreign = _run(settings)
    assert cap_native.upper() == native and cap_foreign.upper() != native
    assert bits_foreign != bits_native, "the foreign path gave the same bits: it would catch nothing"
    explained = subprocess.run([sys.executable, str(SCRIPT), "--explain", *flag], capture_output=True,
                               text=True, check=True).stdout
    assert f"native path {native}" in explained and f"the {strength} foreign path" in explained

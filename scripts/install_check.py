"""The README's set-up without make, run as written: a fresh virtual environment, the
commands between the ``install-without-make`` markers of README.md (all but the last line,
which starts JupyterLab), then ``00_welcome`` executed with that environment's kernel.

    python3 scripts/install_check.py [--keep]        (make install-check)

Works from the repository root on Linux and macOS (the README's Windows lines differ only in
``.venv\\Scripts\\``). The venv goes to a temporary folder, so the repository's own ``.venv``
is left alone; pip takes the wheels it already has where its configuration points to them.
Exits non-zero, naming the command, if a line fails or the notebook raises.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- install-without-make: begin", "<!-- install-without-make: end -->"


def readme_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """The shell lines of the README's set-up without make, in order."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{readme}: the markers {BEGIN!r} ... {END!r} are missing")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    fenced = re.search(r"```bash\n(.*?)```", block, re.S)
    if fenced is None:
        raise ValueError(f"{readme}: no ```bash block between the install-without-make markers")
    return [line.strip() for line in fenced.group(1).splitlines() if line.strip()]


def run(commands: list[str], venv: Path) -> None:
    """Run each set-up line with ``.venv`` replaced by ``venv`` (lab start left out)."""
    for line in commands:
        if " lab" in line and "jupyter" in line:
            continue   # starts the server: checked by executing a notebook instead
        argv = [str(venv) + part[len(".venv"):] if part.startswith(".venv/") else
                (str(venv) if part == ".venv" else part) for part in shlex.split(line)]
        if argv[0] == "python3":
            argv[0] = sys.executable
        print("$", " ".join(argv), flush=True)
        started = time.perf_counter()
        if subprocess.run(argv, cwd=ROOT).returncode:
            raise SystemExit(f"install check: the README's line failed: {line}")
        print(f"  ({time.perf_counter() - started:.0f} s)", flush=True)


def execute_welcome(venv: Path, out: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(COURSE_PROFILE="fast", COURSE_RESULTS_DIR=str(out / "results"))
    argv = [str(venv / "bin" / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
            "--output-dir", str(out), str(ROOT / "notebooks" / "00_welcome.ipynb")]
    print("$", " ".join(argv), flush=True)
    if subprocess.run(argv, cwd=ROOT / "notebooks", env=env).returncode:
        raise SystemExit("install check: 00_welcome raised with the README's environment")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary venv")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="course-install-check-"))
    started = time.perf_counter()
    run(readme_commands(), folder / "venv")
    execute_welcome(folder / "venv", folder)
    print(f"install check: the README's commands work ({time.perf_counter() - started:.0f} s); "
          f"00_welcome ran in that environment")
    if not args.keep:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Re-execute notebooks in place and store their outputs (what `make notebooks` runs).

Usage: python scripts/execute_notebooks.py notebooks/00_welcome.ipynb [...]
Runs each notebook top to bottom in its own folder with the current Python's kernel,
in the fast profile unless COURSE_PROFILE says otherwise, and prints the wall time.
A notebook that raises is still written (so the error can be read) and the script
exits non-zero. The results the notebooks save go to the committed results/ (unless
COURSE_RESULTS_DIR says otherwise): the stored outputs and the stored results stay one run.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def execute(path: Path, timeout: int, write: bool = True, out: Path | None = None) -> float:
    """Execute one notebook (in place, into ``out`` if given, or only in memory with
    ``write=False``); return its wall time in seconds. The executed notebook is written
    even when a cell raises."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        if write:
            nbformat.write(nb, path if out is None else out)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args()
    os.environ.setdefault("COURSE_PROFILE", "fast")
    os.environ.setdefault("COURSE_RESULTS_DIR", str(Path(__file__).resolve().parent.parent / "results"))
    failed = []
    for path in args.notebooks:
        try:
            print(f"{path}: {execute(path, args.timeout):.1f} s", flush=True)
        except CellExecutionError as err:
            print(f"{path}: FAILED\n{str(err)[:2000]}", flush=True)
            failed.append(path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

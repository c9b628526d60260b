"""Notebooks' wall times: from their stored execution metadata (no run), or executed once
more in the fast profile (``make notebooks``' runner, nothing written back)."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from course_utils.files import chapters

ROOT = Path(__file__).resolve().parent.parent


def _stamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def stored_notebook_times() -> list[dict]:
    """Wall time of each notebook's stored run: first cell started to last cell replied."""
    import nbformat
    rows = []
    for path in chapters():
        nb = nbformat.read(path, as_version=4)
        times = [c.metadata.get("execution", {}) for c in nb.cells if c.cell_type == "code"]
        starts = [t["iopub.execute_input"] for t in times if "iopub.execute_input" in t]
        ends = [t["shell.execute_reply"] for t in times if "shell.execute_reply" in t]
        if not starts or not ends:
            rows.append({"notebook": path.name, "seconds": None, "executed": None})
            continue
        rows.append({"notebook": path.name,
                     "seconds": round((_stamp(max(ends)) - _stamp(min(starts))).total_seconds(), 1),
                     "executed": min(starts)[:16].replace("T", " ")})
    return rows


def run_notebook_times(timeout: int = 900) -> list[dict]:
    """Execute each notebook once (fast profile, in memory, as `make notebooks` runs it: its own
    folder, the current Python's kernel; nothing written back) and time it."""
    import nbformat
    from nbclient import NotebookClient
    rows = []
    for path in chapters():
        start = time.perf_counter()
        error = None
        try:
            nb = nbformat.read(path, as_version=4)
            NotebookClient(nb, timeout=timeout, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        except Exception as err:  # noqa: BLE001  (reported in the table, not raised)
            error = type(err).__name__
        seconds = time.perf_counter() - start
        print(f"  {path.name}: {seconds:.1f} s{' ' + error if error else ''}", flush=True)
        rows.append({"notebook": path.name, "seconds": round(seconds, 1), "error": error})
    return rows

"""Execute every notebook in the ``full`` profile into a build folder and print a table:
notebook, wall time, main score, device (what ``make full`` runs).

The committed notebooks are never written: each executed copy goes to ``OUT/NAME.ipynb``,
the results the notebooks save to ``OUT/results/`` (``COURSE_RESULTS_DIR``), and the table
to ``OUT/summary.md`` and ``OUT/summary.json``, rewritten after every notebook so that a
run stopped at a time limit still leaves what it did. Notebooks run in order (later ones
read what earlier ones saved). Works with any interpreter that has the packages (a GPU
node without a package index): ``make full PY=python3``.

Usage: python scripts/run_full.py [--out build/full] [--timeout 1800] [notebooks ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main_score(results_dir: Path, since: float) -> str:
    """The scores of the models this notebook saved (results written after ``since``)."""
    scores = []
    for path in sorted(results_dir.glob("full/*.json")):
        if path.stat().st_mtime < since:
            continue
        record = json.loads(path.read_text())
        parts = [f"BLEU {record['bleu']:.1f}" if isinstance(record.get("bleu"), (int, float)) else "",
                 f"exact {record['exact_match']:.3f}" if isinstance(record.get("exact_match"), (int, float)) else ""]
        buckets = [row["exact_match"] for row in record.get("by_length", []) if row.get("exact_match") is not None]
        if buckets:
            parts.append(f"worst bucket {min(buckets):.3f}")
        scores.append(f"{record['name']}: " + ", ".join(p for p in parts if p))
    return "; ".join(scores) or "-"


def device_of(nb) -> str:
    """The device that setup() reported in the notebook's first outputs."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            match = re.search(r"device: (\S+) \| profile: (\w+)", out.get("text", ""))
            if match:
                return f"{match.group(1)} ({match.group(2)})"
    return "?"


def write_summary(out: Path, rows: list[dict]) -> str:
    lines = ["| notebook | wall time (s) | main score | device | status |", "|---|---:|---|---|---|"]
    lines += [f"| {r['notebook']} | {r['seconds']:.0f} | {r['score']} | {r['device']} | {r['status']} |" for r in rows]
    total = sum(r["seconds"] for r in rows)
    lines.append(f"| total | {total:.0f} | | | |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    return "\n".join(lines)


#: wall time of each notebook's full profile, in minutes, as measured: on a 2-core CPU
#: (`COURSE_DEVICE=cpu make full`: an AMD EPYC on 2026-11-25, an Intel Xeon on 2026-11-26, some
#: runs beside other jobs, so upper bounds) and on one H200 (all nine notebooks at once,
#: 2026-11-26, so these overstate a notebook run alone, by about 1.6x). docs/BENCHMARKS.md has
#: the tables.
MEASURED_MINUTES = {
    "cpu": {"00_welcome": 1, "01_seq2seq_bottleneck": 13, "02_bahdanau_attention": 15,
            "03_convs2s": 6, "04_transformer": 15, "05_bert": 19, "06_bpe": 16, "07_gpt": 14,
            "08_vision_transformer": 12},
    # H200, 2026-11-26: all nine at once (00 28 s, 01 313 s, 02 272 s, 03 171 s, 04 316 s,
    # 05 212 s, 06 251 s, 07 202 s, 08 494 s with the recipe before that day's cuts)
    "cuda": {"00_welcome": 1, "01_seq2seq_bottleneck": 5, "02_bahdanau_attention": 5, "03_convs2s": 3,
             "04_transformer": 5, "05_bert": 4, "06_bpe": 4, "07_gpt": 3, "08_vision_transformer": 4},
}
#: what a figure above leaves out, per kind of machine
CAVEATS = {"cpu": {},
           "cuda": {"08_vision_transformer": "estimated: alone it reached the end of section 8's shifted "
                                             "runs in 188 s with the recipe before the cuts of 2026-11-26, "
                                             "which save a third of its steps and half the cost of a step on shifted "
                                             "images: about 3.5 min alone"}}


def expected_time(notebooks: list[Path], device: str) -> str:
    """What `make full` prints before it starts: the expected time per notebook on this kind
    of device, from the measured runs (or 'not measured')."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    lines = [f"make full on {device}: expected wall time per notebook (measured runs, docs/BENCHMARKS.md):"]
    for path in notebooks:
        minutes = MEASURED_MINUTES[kind].get(path.stem)
        known = CAVEATS[kind].get(path.stem)
        text = f"about {minutes:.0f} min" if minutes is not None else "not measured on this kind of machine"
        lines.append(f"  {path.stem}: {text}" + (f" ({known})" if known else ""))
    if kind == "cpu":
        lines.append("  the full profile is meant for a GPU; on a 2-core CPU each notebook was measured "
                     "within 20 minutes")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "full")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = parser.parse_args(argv)
    import nbformat
    from nbclient.exceptions import CellExecutionError

    from execute_notebooks import execute  # scripts/ is on sys.path when this script runs

    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["COURSE_PROFILE"] = "full"                      # the kernels inherit this
    os.environ["COURSE_RESULTS_DIR"] = str(out / "results")
    if not notebooks:
        raise SystemExit("no notebooks to run")
    from course_utils.runtime import get_device
    print(expected_time([Path(p) for p in notebooks], str(get_device())), flush=True)
    rows, failed, table = [], 0, ""
    for path in notebooks:
        path = path.resolve()
        start, status = time.time(), "ok"
        try:
            execute(path, args.timeout, out=out / path.name)
        except CellExecutionError as err:
            last = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()[-1]  # no terminal colours
            status, failed = f"FAILED: {last[:160]}", failed + 1
        nb = nbformat.read(out / path.name, as_version=4)
        rows.append({"notebook": path.name, "seconds": time.time() - start, "status": status,
                     "score": main_score(out / "results", start), "device": device_of(nb)})
        print(f"{path.name}: {rows[-1]['seconds']:.0f} s, {status}", flush=True)
        table = write_summary(out, rows)
    print("\n" + table)
    print(f"\nexecuted notebooks, results and this table: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Execute every notebook in the ``full`` profile into a build folder and print a table:
notebook, wall time, main score, device (what ``make full`` runs).

The committed notebooks are never written: each executed copy goes to ``OUT/NAME.ipynb``,
the results the notebooks save to ``OUT/results/`` (``COURSE_RESULTS_DIR``), and the table
to ``OUT/summary.md`` and ``OUT/summary.json``, rewritten after every notebook so that a
run stopped at a time limit still leaves what it did. Notebooks run in order (later ones
read what earlier ones saved). Works with any interpreter that has the packages (a GPU
node without a package index): ``make full PY=python3``.

With ``--jobs N`` (``make full FULL_JOBS=N``) N notebooks run at once, each in a process and a
kernel of its own, a notebook only after those whose results it reads (``READS``): on one GPU
the course's small models leave it mostly idle, and nine notebooks at once took 494 s on an
H200 (2026-11-26), about as long as the slowest two alone (docs/BENCHMARKS.md).

Usage: python scripts/run_full.py [--out build/full] [--timeout 1800] [--jobs 1] [notebooks ...]
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


def main_score(results_dir: Path, since: float, notebook: str = "") -> str:
    """The scores of the models this notebook saved (results written after ``since`` whose
    name starts with the notebook's number: other notebooks may write beside it)."""
    scores = []
    for path in sorted(results_dir.glob(f"full/{notebook[:2]}*.json")):
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


def write_summary(out: Path, rows: list[dict], wall: float | None = None, jobs: int = 1) -> str:
    lines = ["| notebook | wall time (s) | main score | device | status |", "|---|---:|---|---|---|"]
    lines += [f"| {r['notebook']} | {r['seconds']:.0f} | {r['score']} | {r['device']} | {r['status']} |" for r in rows]
    total = sum(r["seconds"] for r in rows)
    lines.append(f"| total | {total:.0f} | | | |")
    if wall is not None:
        lines.append(f"\n{jobs} notebooks at a time: {wall:.0f} s of wall time for all (each one's time above "
                     "is shared with the others running beside it)")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    return "\n".join(lines)


#: wall time of each notebook's full profile, in minutes, as measured: on a 2-core CPU
#: (`COURSE_DEVICE=cpu make full`: an AMD EPYC on 2026-11-25, an Intel Xeon on 2026-11-26, some
#: runs beside other jobs, so upper bounds; 05's two parts on an AMD EPYC on 2026-12-01: 237 s
#: and 467 s) and on one H200 (all nine notebooks at once,
#: 2026-11-26, so these overstate a notebook run alone, by about 1.6x). docs/BENCHMARKS.md has
#: the tables.
MEASURED_MINUTES = {
    "cpu": {"00_welcome": 1, "01_seq2seq_bottleneck": 13, "02_bahdanau_attention": 15,
            "03_convs2s": 6, "04_transformer": 15, "05_bert": 4, "05b_bert_finetuning": 8, "06_bpe": 16,
            "07_gpt": 14, "07b_small_llm": 8, "08_vision_transformer": 12},
    # H200, 2026-11-26: all nine at once (00 28 s, 01 313 s, 02 272 s, 03 171 s, 04 316 s,
    # 05 212 s, 06 251 s, 07 202 s, 08 494 s with the recipe before that day's cuts); 05 was one
    # notebook then (05_bert and 05b_bert_finetuning since 2026-12-01: see CAVEATS)
    "cuda": {"00_welcome": 1, "01_seq2seq_bottleneck": 5, "02_bahdanau_attention": 5, "03_convs2s": 3,
             "04_transformer": 5, "05_bert": 2, "05b_bert_finetuning": 3, "06_bpe": 4, "07_gpt": 3,
             "07b_small_llm": 2, "08_vision_transformer": 4},
}
#: what a figure above leaves out, per kind of machine
CAVEATS = {"cpu": {"07b_small_llm": "from CPU time: 442 CPU s, 2 threads, on 2026-12-07 on a shared 2-core "
                                    "machine (load 9-12), where it took 1236 s of wall time at a third of a core"},
           "cuda": {"07b_small_llm": "estimated, not yet run on a GPU: reading the model file is CPU work "
                                     "(about a minute on a 2-core CPU in the fast profile); the rest is "
                                     "inference of a 135 M model, 442 CPU s in all on a 2-core CPU",
                    "08_vision_transformer": "estimated: alone it reached the end of section 8's shifted "
                                             "runs in 188 s with the recipe before the cuts of 2026-11-26, "
                                             "which save a third of its steps and half the cost of a step on shifted "
                                             "images: about 3.5 min alone",
                    "05_bert": "estimated: 05 before its split (2026-12-01) took 174-212 s on an H200, "
                               "its pre-training 36 s of that",
                    "05b_bert_finetuning": "estimated: 05 before its split took 174-212 s on an H200, "
                                          "its 22 fine-tuning runs most of that"}}


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


#: the notebooks whose saved results a notebook reads (its comparison plots, 05's checkpoint): with --jobs it
#: starts only after those of them that are in the same run have finished
READS = {"02_bahdanau_attention": ("01_seq2seq_bottleneck",),
         "03_convs2s": ("01_seq2seq_bottleneck", "02_bahdanau_attention"),
         "04_transformer": ("01_seq2seq_bottleneck", "02_bahdanau_attention", "03_convs2s"),
         "05b_bert_finetuning": ("05_bert",)}   # the small BERT 05_bert pre-trains (results.saved_file)


def schedule(names: list[str], jobs: int, run_one) -> list[tuple[str, object]]:
    """``run_one(name)`` for every name, at most ``jobs`` at a time, in the order given, each
    only after the names it ``READS`` (those in ``names``) have finished; returns (name,
    result) pairs in the order they finished."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive int, got {jobs!r}")
    if jobs == 1:   # in this thread, in the order given (nbclient runs its kernel from here)
        return [(name, run_one(name)) for name in names]
    waiting, running, done, finished = list(names), {}, set(), []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while waiting or running:
            for name in list(waiting):
                if len(running) >= jobs:
                    break
                if all(dep in done or dep not in names for dep in READS.get(name, ())):
                    waiting.remove(name)
                    running[pool.submit(run_one, name)] = name
            completed, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in completed:
                name = running.pop(future)
                done.add(name)
                finished.append((name, future.result()))
    return finished


def execute_status(path: Path, out: Path, timeout: int) -> str:
    """Execute one notebook into ``out``: 'ok', or 'FAILED: ' and the error's last line."""
    from nbclient.exceptions import CellExecutionError

    from scripts.execute_notebooks import execute
    try:
        execute(path, timeout, out=out)
    except CellExecutionError as err:
        last = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()[-1]  # no terminal colours
        return f"FAILED: {last[:160]}"
    return "ok"


def _execute_elsewhere(path: Path, out: Path, timeout: int) -> str:
    """``execute_status`` in a process of its own (``--jobs``: one kernel per process)."""
    import subprocess
    code = ("import sys; from pathlib import Path; from scripts import run_full; "
            "print('STATUS ' + run_full.execute_status(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))")
    run = subprocess.run([sys.executable, "-c", code, str(path), str(out), str(timeout)],
                         capture_output=True, text=True)
    status = [line[len("STATUS "):] for line in run.stdout.splitlines() if line.startswith("STATUS ")]
    if run.returncode == 0 and status:
        return status[-1]
    return f"FAILED: exit status {run.returncode}: {run.stderr.strip()[-160:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "full")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks at once (each after those it reads)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    import nbformat

    from course_utils.files import chapters

    notebooks = args.notebooks or chapters()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["COURSE_PROFILE"] = "full"                      # the kernels inherit this
    os.environ["COURSE_RESULTS_DIR"] = str(out / "results")
    if not notebooks:
        raise SystemExit("no notebooks to run")
    from course_utils.runtime import get_device
    print(expected_time([Path(p) for p in notebooks], str(get_device())), flush=True)
    import threading
    rows, table, started, lock = [], "", time.time(), threading.Lock()
    paths = {Path(p).resolve().stem: Path(p).resolve() for p in notebooks}

    def run_one(name: str) -> None:
        path, start = paths[name], time.time()
        run = _execute_elsewhere if args.jobs > 1 else execute_status
        status = run(path, out / path.name, args.timeout)
        nb = nbformat.read(out / path.name, as_version=4) if (out / path.name).exists() else None
        with lock:   # (--jobs: notebooks finish in other threads)
            record(path, start, status, nb)

    def record(path, start, status, nb) -> None:
        nonlocal table
        rows.append({"notebook": path.name, "seconds": time.time() - start, "status": status,
                     "score": main_score(out / "results", start, path.name), "device": device_of(nb) if nb else "?"})
        print(f"{path.name}: {rows[-1]['seconds']:.0f} s, {status}", flush=True)
        table = write_summary(out, sorted(rows, key=lambda r: r["notebook"]),
                              wall=time.time() - started if args.jobs > 1 else None, jobs=args.jobs)

    schedule(list(paths), args.jobs, run_one)
    failed = sum(not r["status"].startswith("ok") for r in rows)
    print("\n" + table)
    print(f"\nexecuted notebooks, results and this table: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

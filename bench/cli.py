"""The course's benchmarks (`make bench`): docs/BENCHMARKS.md and docs/benchmarks.json.

Usage: python -m bench [--parts stored,models,loop,micro,bpe,speedups] [--out docs]
(`--parts ""` only renders docs/BENCHMARKS.md again from docs/benchmarks.json)
Parts (comma-separated; `all` = every part, `notebooks` included):
  stored    each notebook's wall time from its stored execution metadata (the last
            `make notebooks`), no run
  notebooks execute every notebook once more in the fast profile (nbclient, in memory,
            nothing written back) and time it: one run each (a median of repeats of
            whole notebooks costs too much); ~10-15 min on a 2-core laptop
  models    per model of 01-04: parameters and scores saved by the notebooks
            (results/fast/*.json) plus training tokens/s measured here on the same
            batches (median of repeats), and length-bucketed vs random batches
  loop      course_utils.training.train against a tight loop of the same steps, on the
            full profile's model and batch shapes (on the CPU)
  micro     course_utils.attention against torch's scaled_dot_product_attention and
            nn.MultiheadAttention (forward, forward+backward, several sizes)
  bpe       course_utils.bpe.train_bpe against tokenizers' BpeTrainer on the same text
  speedups  the package's fast paths against the plain versions they replaced
Timings are medians of repeated runs (torch.utils.benchmark or time.perf_counter);
ratios are measured in the same run. Runs in the fast profile on one CPU thread unless
COURSE_NUM_THREADS says otherwise. A part that is not run keeps its previous numbers in
the JSON (so `make bench PARTS=micro` refreshes only the micro-benchmarks).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path

from bench.kernels import ATTENTION_SIZES, bench_attention, bench_bpe
from bench.models import bench_loop, bench_models
from bench.notebooks import ROOT, run_notebook_times, stored_notebook_times
from bench.report import render
from bench.speedups import bench_speedups
from bench.timing import machine
from course_utils.files import write_atomic

PARTS = ("stored", "notebooks", "models", "loop", "micro", "bpe", "speedups")
DEFAULT_PARTS = ("stored", "models", "loop", "micro", "bpe", "speedups")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(DEFAULT_PARTS),
                        help=f"comma-separated, from {PARTS} or 'all' (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for the tests)")
    args = parser.parse_args(argv)
    parts = PARTS if args.parts.strip() == "all" else tuple(p.strip() for p in args.parts.split(",") if p.strip())
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {PARTS} or 'all'")
    from course_utils.runtime import configure_threads
    configure_threads()
    json_path = args.out / "benchmarks.json"
    report = json.loads(json_path.read_text()) if json_path.exists() else {}
    if not parts and not report:
        parser.error("no parts given and no earlier benchmarks.json to render")
    if parts and (set(DEFAULT_PARTS) <= set(parts) or "machine" not in report):
        report["machine"] = machine()   # a whole run: the report's machine is this one
        report["generated"] = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        report["parts_run"] = list(parts)
        report.pop("refreshed", None)
    elif parts:  # some parts again, maybe on another machine: say where each was measured
        now, here = dt.datetime.now().strftime("%Y-%m-%d %H:%M"), machine()
        for part in parts:
            report.setdefault("refreshed", {})[part] = {"when": now, "machine": here}
    started = time.perf_counter()
    if "stored" in parts and "notebooks" not in parts:
        print("notebooks (stored execution metadata)", flush=True)
        report["notebooks"] = {"source": "stored execution metadata of the committed notebooks "
                                         "(first cell start to last cell end of the last `make notebooks`)",
                               "rows": stored_notebook_times()}
    if "notebooks" in parts:
        print("notebooks (executing each once)", flush=True)
        report["notebooks"] = {"source": f"executed by `make bench` on {report['generated']} "
                                         "(nbclient, fast profile)", "rows": run_notebook_times()}
    if "models" in parts:
        print("models", flush=True)
        report["models"] = bench_models(steps=2 if args.quick else 8, repeats=1 if args.quick else 3)
    if "loop" in parts:
        print("training loop (full-profile shapes)", flush=True)
        report["loop"] = bench_loop(steps=2 if args.quick else 6, repeats=1 if args.quick else 3, quick=args.quick)
    if "micro" in parts:
        print("attention", flush=True)
        report["attention"] = bench_attention(ATTENTION_SIZES[:1] if args.quick else ATTENTION_SIZES,
                                              min_run_time=0.02 if args.quick else 0.3)
    if "bpe" in parts:
        print("bpe", flush=True)
        report["bpe"] = (bench_bpe(num_paragraphs=200, num_merges=50, repeats=1) if args.quick
                         else bench_bpe())
    if "speedups" in parts:
        print("speed-ups", flush=True)
        report["speedups"] = bench_speedups(repeats=1 if args.quick else 5, quick=args.quick)
    if parts:
        report["seconds"] = round(time.perf_counter() - started, 1)
    write_atomic(json_path, (json.dumps(report, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    write_atomic(args.out / "BENCHMARKS.md", (render(report) + "\n").encode("utf-8"))
    print(f"wrote {args.out / 'BENCHMARKS.md'} and {json_path} in {time.perf_counter() - started:.0f} s")
    return 0

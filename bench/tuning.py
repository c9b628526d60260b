"""What the tuning scripts share (scripts/tune_transformer.py, scripts/tune_convs2s.py,
scripts/compare_attention.py): run every (candidate, seed) in a process pool, each on one
thread, and print the markdown table of a notebook's appendix (greedy exact match in % on the
validation split, by bucket)."""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from course_utils.files import write_atomic


def table(results, header: str, raw: tuple = ()) -> str:
    """One row per (candidate label, seed, {column: value}): values in %, except the
    columns named in ``raw`` (two decimals, as they are)."""
    buckets = list(results[0][2])
    lines = [f"| {header} | seed | " + " | ".join(buckets) + " |", "|---|---|" + "---|" * len(buckets)]
    for label, seed, by_bucket in results:
        lines.append(f"| {label} | {seed} | " + " | ".join(f"{v:.2f}" if key in raw else f"{100 * v:.1f}"
                                                          for key, v in by_bucket.items()) + " |")
    return "\n".join(lines)


def main(doc: str, candidates, run, header: str, argv=None, table_fn=None) -> int:
    """The command line: ``--workers N`` runs at once, ``--out FILE`` also writes the table.
    ``candidates``: (label, changes, seeds); ``run(label, changes, seed)`` returns
    (label, seed, {bucket: exact match on valid})."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    jobs = [(label, changes, seed) for label, changes, seeds in candidates for seed in seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(run, *zip(*jobs)))
    text = (table(results, header) if table_fn is None else table_fn(results)) + "\n"
    print(text)
    if args.out:
        write_atomic(args.out, text.encode("utf-8"))
    return 0

"""How 04's fast Transformer recipe was chosen: train each candidate on the synthetic
task and score it on the **validation** split (never the test split), by source length.

    .venv/bin/python scripts/tune_transformer.py [--workers 2] [--out FILE.md]

Prints (and writes) the markdown table of 04's appendix. Each run uses one thread;
``--workers`` runs that many at once (about 5 minutes with 2 on a 2-core CPU). The
candidates are the ones tried while the recipe was made; the two that decide it (with and
without the cool-down) run with two seeds, because one run of a high learning rate
without a cool-down is noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("COURSE_NUM_THREADS", "1")
os.environ.setdefault("COURSE_PROFILE", "fast")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: (label, changes to transformer.FAST, seeds)
CANDIDATES = [
    ("2+2 layers, lr 2e-3, warm-up 100, 1500 steps, no cool-down",
     dict(lr=2e-3, warmup=100, max_steps=1500, cooldown=0), (0,)),
    ("1+1 layers, lr 4e-3, warm-up 150, 1000 steps, no cool-down",
     dict(num_layers=1, lr=4e-3, max_steps=1000, cooldown=0), (0,)),
    ("2+2 layers, lr 4e-3, warm-up 150, 1000 steps, no cool-down",
     dict(lr=4e-3, max_steps=1000, cooldown=0), (0,)),
    ("2+2 layers, lr 4e-3, warm-up 150, 1500 steps, no cool-down",
     dict(lr=4e-3, max_steps=1500, cooldown=0), (0,)),
    ("2+2 layers, lr 6e-3, warm-up 150, 1300 steps, no cool-down",
     dict(cooldown=0), (0, 1)),
    ("2+2 layers, lr 6e-3, warm-up 150, 1600 steps, no cool-down",
     dict(max_steps=1600, cooldown=0), (0,)),
    ("**the fast recipe**: 2+2 layers, lr 6e-3, warm-up 150, 1300 steps, cool-down over the last 300",
     dict(), (0, 1)),
]


def run(label: str, changes: dict, seed: int) -> tuple[str, int, dict]:
    """Train one candidate with ``seed`` (its initial weights) and score it on valid."""
    import torch

    from course_utils import data, setup
    from course_utils import transformer as T
    from course_utils.decoding import score_translations
    setup(seed=seed, verbose=False)
    recipe = replace(T.FAST, **changes)
    splits = data.load_synthetic()
    train_data = data.TranslationData.build(splits.train)
    torch.manual_seed(seed)
    model = T.Transformer(recipe.model_config(len(train_data.src_vocab), len(train_data.tgt_vocab)))
    T.fit(model, train_data, recipe, progress=False)
    scores = score_translations(model.eval(), train_data, splits.valid)
    return label, seed, {row["bucket"]: row["exact_match"] for row in scores["by_length"]}


def table(results) -> str:
    """The markdown table: one row per (candidate, seed), exact match in % per bucket."""
    buckets = list(results[0][2])
    lines = ["| candidate (d_model 64, pre-LN, batches of 64) | seed | " + " | ".join(buckets) + " |",
             "|---|---|" + "---|" * len(buckets)]
    for label, seed, by_bucket in results:
        lines.append(f"| {label} | {seed} | " + " | ".join(f"{100 * v:.1f}" for v in by_bucket.values()) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    jobs = [(label, changes, seed) for label, changes, seeds in CANDIDATES for seed in seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(run, *zip(*jobs)))
    text = table(results) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

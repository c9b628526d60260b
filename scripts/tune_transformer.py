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

import sys
from functools import partial
from dataclasses import replace

from bench import tuning  # first: sets the one-thread environment before torch starts (bench/__init__.py)

#: (label, changes to recipes.TRANSFORMER_FAST, seeds)
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
    from course_utils import recipes, transformer as T
    from course_utils.translation_training import fit_transformer
    from course_utils.decoding import score_translations
    device = torch.device(setup(seed=seed, verbose=False).device)
    recipe = replace(recipes.TRANSFORMER_FAST, **changes)
    splits = data.load_synthetic()
    train_data = data.TranslationData.build(splits.train)
    torch.manual_seed(seed)
    model = T.Transformer(recipe.model_config(len(train_data.src_vocab), len(train_data.tgt_vocab))).to(device)
    fit_transformer(model, train_data, recipe, progress=False)
    scores = score_translations(model.eval(), train_data, splits.valid)
    return label, seed, {row["bucket"]: row["exact_match"] for row in scores["by_length"]}


HEADER = "candidate (d_model 64, pre-LN, batches of 64)"


table = partial(tuning.table, header=HEADER)   # the markdown table of the appendix

if __name__ == "__main__":
    sys.exit(tuning.main(__doc__, CANDIDATES, run, HEADER))

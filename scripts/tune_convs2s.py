"""How 03's ConvS2S recipe was chosen: train each candidate on the synthetic task and score
it on the **validation** split (never the test split), by source length.

    .venv/bin/python scripts/tune_convs2s.py [--workers 2] [--out FILE.md] [--full]

Prints (and writes) the markdown table of 03's appendix. Each run uses one thread;
``--workers`` runs that many at once (about 3 minutes with 2 on a 2-core CPU). The
candidates retrace how the recipe was made, one change at a time from the way tutorials
train ConvS2S; the recipe itself runs with two seeds. ``--full`` scores the full profile's
candidates instead (bigger models: meant for a GPU, about 4 minutes a run on one CPU thread).
"""

from __future__ import annotations

import sys
from functools import partial
from dataclasses import replace

from bench import tuning  # first: sets the one-thread environment before torch starts (bench/__init__.py)

CONSTANT = dict(warmup=0, final_lr=1.0)
#: (label, changes to recipes.CONVS2S_FAST, seeds)
CANDIDATES = [
    ("embeddings N(0, 1) (PyTorch's default), lr 5e-3 constant, 500 steps",
     dict(emb_std=1.0, steps=500, **CONSTANT), (0,)),
    ("embeddings N(0, 1), lr 2e-3 constant, 500 steps",
     dict(emb_std=1.0, lr=2e-3, steps=500, **CONSTANT), (0,)),
    ("embeddings N(0, 0.1) (the paper's), lr 5e-3 constant, 500 steps",
     dict(steps=500, **CONSTANT), (0,)),
    ("N(0, 0.1), kernel 5, 4 encoder layers, lr 5e-3 constant, 500 steps",
     dict(kernel_size=5, encoder_layers=4, steps=500, **CONSTANT), (0,)),
    ("N(0, 0.1), lr 5e-3 decaying linearly to 5 %, 500 steps",
     dict(steps=500, warmup=0), (0,)),
    ("N(0, 0.1), decay, 1000 steps", dict(steps=1000, warmup=0), (0, 1)),
    ("N(0, 0.1), decay, 100 warm-up steps, 1000 steps", dict(steps=1000), (0,)),
    ("N(0, 0.1), lr 5e-3 constant, 1300 steps", dict(**CONSTANT), (0,)),
    ("**the fast recipe**: N(0, 0.1), decay, 100 warm-up steps, 1300 steps", dict(), (0, 1)),
]
#: the full profile's candidates: (label, changes to recipes.CONVS2S_FULL, seeds)
FULL_CANDIDATES = [
    ("**the full recipe**: 128 channels, 4+4 layers, lr 2e-3, decay, 100 warm-up, 3000 steps", dict(), (0, 1, 2)),
    ("128 channels, 4+4 layers, lr 5e-3 (the earlier full recipe), decay, 100 warm-up, 3000 steps",
     dict(lr=5e-3), (0, 1, 2)),
    ("128 channels, 4+4 layers, lr 5e-3, decay, 100 warm-up, 4000 steps", dict(lr=5e-3, steps=4000), (0, 1, 2)),
    ("128 channels, 3+3 layers, lr 5e-3, decay, 100 warm-up, 3000 steps",
     dict(encoder_layers=3, decoder_layers=3, lr=5e-3), (0,)),
]
HEADER = "candidate (64 channels, 3+3 layers, kernel 3, batches of 64 unless said)"


def run(label: str, changes: dict, seed: int, full: bool = False) -> tuple[str, int, dict]:
    """Train one candidate with ``seed`` (its initial weights) and score it on valid."""
    import torch

    from course_utils import convs2s as C, recipes
    from course_utils import data, setup
    from course_utils.decoding import score_translations
    from course_utils.translation_training import fit_convs2s
    device = torch.device(setup(seed=seed, verbose=False).device)
    recipe = replace(recipes.CONVS2S_FULL if full else recipes.CONVS2S_FAST, **changes)
    splits = data.load_synthetic()
    train_data = data.TranslationData.build(splits.train)
    torch.manual_seed(seed)
    model = C.ConvS2S(recipe.model_config(len(train_data.src_vocab), len(train_data.tgt_vocab))).to(device)
    fit_convs2s(model, train_data, recipe, progress=False)
    scores = score_translations(model.eval(), train_data, splits.valid)
    return label, seed, {row["bucket"]: row["exact_match"] for row in scores["by_length"]}


def run_full(label: str, changes: dict, seed: int):
    return run(label, changes, seed, full=True)


table = partial(tuning.table, header=HEADER)   # the markdown table of the appendix


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--full" in argv:
        argv.remove("--full")
        return tuning.main(__doc__, FULL_CANDIDATES, run_full, "full-profile candidate", argv)
    return tuning.main(__doc__, CANDIDATES, run, HEADER, argv)


if __name__ == "__main__":
    sys.exit(main())

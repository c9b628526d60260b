"""02's appendix: the four score functions and the encoder's direction, each trained with
three seeds for the budget of 02's section 6 and scored on the **validation** split.

    .venv/bin/python scripts/compare_attention.py [--workers 2] [--out FILE.md]

Prints (and writes) the markdown table of 02's appendix: greedy exact match in % on the
validation split, overall and by source length. Each run uses one thread; ``--workers``
runs that many at once (about 5 minutes with 2 on a 2-core CPU). The fast profile's
sizes (embeddings 64, 64 GRU units per direction, batches of 64, Adam 5e-3, 500 steps).
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _tuning  # noqa: E402  (sets the one-thread environment before torch starts)

SEEDS = (0, 1, 2)
STEPS, LR, BATCH, EMB, HIDDEN = 500, 5e-3, 64, 64, 64
#: (label, Seq2SeqConfig changes, seeds)
CANDIDATES = [
    ("dot, bi-directional", dict(attention="dot"), SEEDS),
    ("multiplicative, bi-directional", dict(attention="multiplicative"), SEEDS),
    ("additive, bi-directional (02's model)", dict(attention="additive"), SEEDS),
    ("MLP, bi-directional", dict(attention="mlp"), SEEDS),
    ("additive, left-to-right only (128 units: the same size of z_j)",
     dict(attention="additive", bidirectional=False, hidden_size=2 * HIDDEN), SEEDS),
]
HEADER = "score function, encoder"


def run(label: str, changes: dict, seed: int) -> tuple[str, int, dict]:
    """Train one configuration from ``seed`` and score it on valid: {'all', buckets...}."""

    import torch

    from course_utils import data, setup
    from course_utils.decoding import score_translations
    from course_utils.seq2seq import Seq2Seq, Seq2SeqConfig, seq2seq_loss
    from course_utils.training import train
    device = torch.device(setup(seed=seed, verbose=False).device)
    splits = data.load_synthetic()
    train_data = data.TranslationData.build(splits.train)
    cfg = Seq2SeqConfig(len(train_data.src_vocab), len(train_data.tgt_vocab), emb_size=EMB,
                        **{"hidden_size": HIDDEN, "bidirectional": True, **changes})
    torch.manual_seed(seed)
    model = Seq2Seq(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    train(model, lambda e: train_data.batches(BATCH, shuffle=True, seed=e), seq2seq_loss, opt,
          max_steps=STEPS, progress=False)
    scores = score_translations(model.eval(), train_data, splits.valid)
    return label, seed, {"all": scores["exact_match"],
                         **{row["bucket"]: row["exact_match"] for row in scores["by_length"]}}


table = partial(_tuning.table, header=HEADER)   # the markdown table of the appendix

if __name__ == "__main__":
    sys.exit(_tuning.main(__doc__, CANDIDATES, run, HEADER))

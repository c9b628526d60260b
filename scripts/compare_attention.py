"""02's appendix: the four score functions and the encoder's direction, each trained with
three seeds for the budget of 02's section 6 and scored on the **validation** split.

    .venv/bin/python scripts/compare_attention.py [--workers 2] [--out FILE.md]

Prints (and writes) the markdown table of 02's appendix: greedy exact match in % on the
validation split, overall and by source length, and how the attention behaves on the
validation sentences (teacher forced, every real target word) before and after training:
the spread of the scores e_ij over a sentence's source words (their standard deviation,
mean over rows), and the share of rows whose largest weight is over 0.9 (a saturated
softmax). Each run uses one thread; ``--workers`` runs that many at once (about 5 minutes
with 2 on a 2-core CPU). The fast profile's sizes (embeddings 64, 64 GRU units per
direction, batches of 64, Adam 5e-3, 500 steps). The seed sets the initial weights and the
order of the batches.
"""

from __future__ import annotations

import sys

from bench import tuning  # first: sets the one-thread environment before torch starts (bench/__init__.py)

SEEDS = (0, 1, 2)
STEPS, LR, BATCH, EMB, HIDDEN = 500, 5e-3, 64, 64, 64
EARLY = 50   # the attention statistics also after this many steps
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


def attention_stats(model, data, pairs, batch_size: int = 250) -> dict:
    """On ``pairs``, teacher forced: the mean over real target words of the standard
    deviation of the scores e_ij over the real source words ('score sd'), and the share of
    those rows whose largest weight is over 0.9 ('sharp')."""
    import torch

    from course_utils.attention import masked_softmax, padding_mask
    from course_utils.data import PAD_ID
    attention, scores = model.attention, []
    original = attention.score
    attention.score = lambda query, prepared: scores.append(original(query, prepared)) or scores[-1]
    sds, sharp = [], []
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            for batch in data.with_pairs(pairs).batches(batch_size):
                batch = batch.to(device)
                scores.clear()
                model(batch.src, batch.src_lengths, batch.tgt[:, :-1])
                real_words = (batch.tgt[:, 1:] != PAD_ID).T               # (steps, batch)
                keep = padding_mask(batch.src_lengths, batch.src.shape[1]).to(device)   # (batch, src_len)
                for step_scores, real in zip(scores, real_words):        # one decoder step each
                    e = step_scores.reshape(len(keep), -1)[real]          # (rows, src_len)
                    k = keep[real]
                    mean = (e * k).sum(1) / k.sum(1)
                    sds.append((((e - mean[:, None]) ** 2 * k).sum(1) / k.sum(1)).sqrt())
                    sharp.append(masked_softmax(e, k).amax(1) > 0.9)
    finally:
        del attention.score
        model.train(was_training)
    return {"score sd": float(torch.cat(sds).mean()), "sharp": float(torch.cat(sharp).float().mean())}


def run(label: str, changes: dict, seed: int) -> tuple[str, int, dict]:
    """Train one configuration from ``seed`` (initial weights and batch order) and score it
    on valid: {'all', buckets..., then the attention statistics before and after}."""

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
    start = attention_stats(model, train_data, splits.valid)
    early = []   # the statistics after the first EARLY steps

    def after_early_steps(m):   # train's valid_fn, called every EARLY steps: measure the first time only
        if not early:
            early.append(attention_stats(m, train_data, splits.valid))
        return {}

    opt = torch.optim.Adam(model.parameters(), lr=LR)
    train(model, lambda e: train_data.batches(BATCH, shuffle=True, seed=seed * 10_000 + e), seq2seq_loss, opt,
          max_steps=STEPS, progress=False, valid_every=EARLY, valid_fn=after_early_steps)
    scores = score_translations(model.eval(), train_data, splits.valid)
    end = attention_stats(model, train_data, splits.valid)
    return label, seed, {"all": scores["exact_match"],
                         **{row["bucket"]: row["exact_match"] for row in scores["by_length"]},
                         "score sd, start": start["score sd"],
                         f"score sd, step {EARLY}": early[0]["score sd"], f"sharp, step {EARLY}": early[0]["sharp"],
                         "score sd, end": end["score sd"], "sharp, end": end["sharp"]}


def table(results) -> str:
    """The appendix's table: exact match and the share of sharp rows in %, score sd as it is."""
    return tuning.table(results, header=HEADER, raw=("score sd, start", f"score sd, step {EARLY}", "score sd, end"))


if __name__ == "__main__":
    sys.exit(tuning.main(__doc__, CANDIDATES, run, HEADER, table_fn=table))

"""Pre-train the small GPT of notebook 07 for longer than the notebook can, and ship it.

07_gpt trains a GPT for a CPU minute (the fast profile) to show that it learns; for
generation, the classification comparison with 05's small BERT and the attention views it
loads this longer-trained model. Same code (the byte-level BPE of 06 on the training
paragraphs of the novels, course_utils.gpt's model, gpt_training's ``fit``, the fast recipe of
course_utils.recipes), a larger model and more steps.
Writes data/small_gpt.pt (float16 weights, config, BPE merges, held-out scores), its data
card data/small_gpt.md and its line in data/SHA256SUMS.

    python scripts/pretrain_small_gpt.py      # 4,000 steps, ~25 min on one CPU core

Reproducible bit for bit on the same machine (1 thread, deterministic algorithms); other
CPUs give other bits and the same scores to about a hundredth of a nat.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("COURSE_NUM_THREADS", "1")
os.environ.setdefault("COURSE_PROFILE", "fast")

import torch  # noqa: E402

from scripts._shipping import DATA_DIR, machine_line, record_checkpoint  # noqa: E402
from course_utils import gpt, gpt_training, recipes  # noqa: E402
from course_utils.novels import split_paragraphs  # noqa: E402
from course_utils.bpe import BPETokenizer  # noqa: E402
from course_utils.data import load_english_text  # noqa: E402
from course_utils.runtime import setup  # noqa: E402

#: The shipped model: four times the notebook's width-by-depth, GPT-2's layout.
SHIPPED = dict(max_len=64, d_model=128, num_heads=4, num_layers=4, d_ff=512, dropout=0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--out-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args()
    device = torch.device(setup(seed=0, verbose=False).device)
    recipe = recipes.recipe("gpt", "fast")
    train_paragraphs, test_paragraphs = split_paragraphs(load_english_text())
    tokenizer = BPETokenizer.train((p.text for p in train_paragraphs), recipe.num_merges, byte_level=True)
    train_tokens = gpt_training.encode_text(tokenizer, gpt_training.novel_text(train_paragraphs))
    test_tokens = gpt_training.encode_text(tokenizer, gpt_training.novel_text(test_paragraphs))
    config = gpt.GPTConfig(len(tokenizer), **SHIPPED)
    heldout = gpt_training.heldout_windows(test_tokens, config.max_len, 1000)
    torch.manual_seed(0)
    model = gpt.GPT(config).to(device)
    long_recipe = replace(recipe, batch_size=args.batch_size, lr=args.lr, warmup=args.steps // 25,
                          dropout=config.dropout)
    started = time.perf_counter()
    history = gpt_training.fit(model, train_tokens, long_recipe, max_steps=args.steps, progress=True,
                               valid_fn=lambda m: {"heldout_loss": gpt_training.heldout_loss(m, heldout)},
                               valid_every=max(args.steps // 10, 1))
    minutes = (time.perf_counter() - started) / 60
    loss = gpt_training.heldout_loss(model, heldout)
    curve = [(row["step"], round(row["heldout_loss"], 3)) for row in history.valid]
    info = {"steps": args.steps, "batch_size": args.batch_size, "lr": args.lr, "minutes": round(minutes, 1),
            "heldout_loss": round(loss, 4), "heldout_perplexity": round(math.exp(loss), 2),
            "heldout_curve": curve,
            "train_tokens": len(train_tokens), "heldout_tokens": int(heldout[:, 1:].numel()),
            "machine": machine_line()}
    path = args.out_dir / gpt_training.SHIPPED_CHECKPOINT
    gpt_training.save_pretrained(path, model, tokenizer, info)
    digest = record_checkpoint(args.out_dir, path)
    params = sum(p.numel() for p in model.parameters())
    tokens_seen = args.steps * args.batch_size * config.max_len
    (args.out_dir / "small_gpt.md").write_text(f"""# Data card: small_gpt.pt

A small GPT (decoder-only Transformer language model) trained on the shipped novels
(data/austen_novels.tsv.gz), for notebook 07_gpt.

- Made by: `python scripts/pretrain_small_gpt.py --steps {args.steps} --batch-size {args.batch_size} --lr {args.lr}`
  (the code of `course_utils.gpt` and `gpt_training`: `BPETokenizer.train` of `course_utils.bpe`, byte level,
  {recipe.num_merges:,} merges; `GPT`; `gpt_training.fit`: AdamW, warm-up and cosine decay; seed 0, one thread).
- Training text: the paragraphs that `novels.split_paragraphs` keeps for training (4 of every
  5, {len(train_tokens):,} tokens); the held-out fifth is never seen (05's and 07's test sets
  come from it).
- Model: {params:,} parameters ({config.num_layers} layers, d_model {config.d_model}, {config.num_heads} heads,
  d_ff {config.d_ff}, context {config.max_len} tokens, dropout {config.dropout}), output layer tied
  to the token embedding, vocabulary {len(tokenizer):,} (256 bytes and {recipe.num_merges:,} merges,
  stored in the file); weights stored as float16.
- Training: {args.steps:,} steps of {args.batch_size} windows ({tokens_seen:,} tokens, about
  {tokens_seen / len(train_tokens):.0f} passes over the text), {minutes:.1f} min wall time on {info['machine']}.
- Held-out score ({info['heldout_tokens']:,} tokens of the held-out paragraphs): {loss:.3f} nats per token,
  perplexity {math.exp(loss):.1f}. Curve (step, loss): {curve}.
- Licence: the weights are derived from public domain text (the novels); they are released
  with the course code under the MIT licence.
- Format: a checkpoint of `training.save_checkpoint` (`config`, the float16 weights under
  `model`, and `extra`: the byte-level BPE merges under `merges`, this run's `info`), read by
  `gpt_training.load_pretrained()` through `training.load_model`.
- sha256: `{digest}` (also in data/SHA256SUMS; `gpt_training.load_pretrained()` checks it).
""")
    print(f"wrote {path} ({path.stat().st_size:,} bytes) after {minutes:.1f} min: "
          f"held-out loss {loss:.3f}, curve {curve}")


if __name__ == "__main__":
    main()

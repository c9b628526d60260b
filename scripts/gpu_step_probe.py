"""Milliseconds per training step of the full recipes' models (``course_utils.training.train``,
synchronised on CUDA) at the recipe's batch and at 4x: what a full recipe costs per step on a
device, each model alone (docs/BENCHMARKS.md, "On a GPU", run 2).

Usage: python scripts/gpu_step_probe.py OUT.json   (PROBE_DEVICE=cuda|cpu, PROBE_STEPS=40)
On a GPU node with ../shared/gpu set up this takes under two minutes."""
import json
import os
import sys
import time
from dataclasses import replace

import torch

from course_utils import convs2s as C, data, gpt as G, gpt_training as GT, recipes, transformer as T, vit as V
from course_utils import vit_training as VT
from course_utils.seq2seq import Seq2Seq, seq2seq_loss
from course_utils.training import train

DEVICE = torch.device(os.environ.get("PROBE_DEVICE", "cuda"))
STEPS = int(os.environ.get("PROBE_STEPS", "40"))
WARMUP = 5


def ms_per_step(run) -> float:
    """``run(steps, warm_up)`` trains that many steps; the milliseconds of one step after
    ``WARMUP`` steps of warm-up, the device synchronised around the timed ones."""
    sync = torch.cuda.synchronize if DEVICE.type == "cuda" else (lambda: None)
    run(WARMUP, True)
    sync()
    started = time.perf_counter()
    run(STEPS, False)
    sync()
    return 1000 * (time.perf_counter() - started) / STEPS


def seq_run(build, loss_fn, batches):
    """A ``run`` for ``ms_per_step``: the model trains with Adam on ``batches`` (on the device),
    the warm-up on the first ``WARMUP``, the timed steps on the next ``STEPS``."""
    torch.manual_seed(0)
    model = build().to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches = [b.to(DEVICE) for b in batches[:WARMUP + STEPS]]
    return lambda steps, warm: train(model, batches[:WARMUP] if warm else batches[WARMUP:WARMUP + steps],
                                     loss_fn, optimizer, max_steps=steps, progress=False)


def vit_run(build, images, labels, recipe):
    """A ``run`` for ``ms_per_step`` through 08's own ``VT.fit`` (AdamW, its schedule)."""
    torch.manual_seed(0)
    model = build().to(DEVICE)
    return lambda steps, warm: VT.fit(model, images, labels, recipe, max_steps=steps)


def main() -> None:
    splits = data.load_synthetic()
    td = data.TranslationData.build(splits.train)
    src, tgt = len(td.src_vocab), len(td.tgt_vocab)
    pairs = lambda bs: td.batches(bs, shuffle=True, seed=0)   # noqa: E731
    tokens = torch.randint(0, 2000, (200_000,), generator=torch.Generator().manual_seed(0))
    windows = lambda bs: [GT.random_windows(tokens, recipes.GPT_FULL.max_len, bs, torch.Generator().manual_seed(i))  # noqa: E731
                          for i in range(WARMUP + STEPS)]
    digits = data.load_digit_images()
    cases = []   # (name, batch size, run)
    for bs in (64, 256):
        cases += [("01 fixed d256", bs, lambda bs=bs: seq_run(
                       lambda: Seq2Seq(recipes.SEQ2SEQ_FULL.model_config(src, tgt)), seq2seq_loss, pairs(bs))),
                  ("02 additive h128 bi", bs, lambda bs=bs: seq_run(
                       lambda: Seq2Seq(recipes.ATTENTION_FULL.model_config(src, tgt)), seq2seq_loss, pairs(bs)))]
    for bs in (128, 512):
        cases.append(("04 T full", bs, lambda bs=bs: seq_run(
            lambda: T.Transformer(recipes.TRANSFORMER_FULL.model_config(src, tgt)), T.transformer_loss, pairs(bs))))
    for bs in (64, 256):
        cases += [("04 compare full", bs, lambda bs=bs: seq_run(
                       lambda: T.Transformer(recipes.TRANSFORMER_COMPARISON_FULL.model_config(src, tgt)), T.transformer_loss, pairs(bs))),
                  ("03 ConvS2S full", bs, lambda bs=bs: seq_run(
                       lambda: C.ConvS2S(recipes.CONVS2S_FULL.model_config(src, tgt)), seq2seq_loss, pairs(bs)))]
    for bs in (64, 256):
        cases.append(("07 GPT full", bs, lambda bs=bs: seq_run(
            lambda: G.GPT(recipes.GPT_FULL.model_config(2000)), G.lm_loss, windows(bs))))
    for bs in (64, 256):
        for name, build in (("08 ViT full", lambda: V.ViT(recipes.VIT_FULL.model_config())), ("08 CNN", VT.small_cnn),
                            ("08 MLP", VT.mlp)):
            cases.append((name, bs, lambda build=build, bs=bs: vit_run(
                build, digits.train.images, digits.train.labels, replace(recipes.VIT_FULL, batch_size=bs))))
    rows = {}
    for name, bs, make_run in cases:
        ms = ms_per_step(make_run())
        rows[f"{name} b{bs}"] = round(ms, 2)
        print(f"{name} b{bs}: {ms:.1f} ms/step", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

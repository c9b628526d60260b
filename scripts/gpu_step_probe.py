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

from course_utils import data, gpt_training as GT, vit_training as VT
from course_utils.recipes import RECIPES
from course_utils.registry import REGISTRY
from course_utils.training import train

DEVICE = torch.device(os.environ.get("PROBE_DEVICE", "cuda"))
STEPS = int(os.environ.get("PROBE_STEPS", "40"))
WARMUP = 5
#: (batch sizes, [(name, recipe)]): each group's full recipes' models at each batch size in turn,
#: model and loss from ``course_utils.registry`` (GPT on random ids of a 2,000-token vocabulary)
GROUPS = [((64, 256), [("01 fixed d256", "seq2seq"), ("02 additive h128 bi", "attention")]),
          ((128, 512), [("04 T full", "transformer")]),
          ((64, 256), [("04 compare full", "transformer_comparison"), ("03 ConvS2S full", "convs2s")]),
          ((64, 256), [("07 GPT full", "gpt")])]


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
    """A ``run`` for ``ms_per_step`` through 08's own fit (``REGISTRY["vit"].fit``: AdamW, its schedule)."""
    torch.manual_seed(0)
    model = build().to(DEVICE)
    return lambda steps, warm: REGISTRY["vit"].fit(model, images, labels, recipe, max_steps=steps)


def main() -> None:
    splits = data.load_synthetic()
    td = data.TranslationData.build(splits.train)
    src, tgt = len(td.src_vocab), len(td.tgt_vocab)
    pairs = lambda bs: td.batches(bs, shuffle=True, seed=0)   # noqa: E731
    tokens = torch.randint(0, 2000, (200_000,), generator=torch.Generator().manual_seed(0))
    windows = lambda bs: [GT.random_windows(tokens, RECIPES["gpt"].full.max_len, bs, torch.Generator().manual_seed(i))  # noqa: E731
                          for i in range(WARMUP + STEPS)]
    digits = data.load_digit_images()
    cases = []   # (name, batch size, run)
    for batch_sizes, models in GROUPS:
        for bs in batch_sizes:
            for name, recipe in models:
                vocab, batches = ((2000,), windows) if recipe == "gpt" else ((src, tgt), pairs)
                cases.append((name, bs, lambda e=REGISTRY[recipe], r=RECIPES[recipe].full, vocab=vocab,
                              batches=batches, bs=bs: seq_run(lambda: e.build(r, *vocab), e.loss, batches(bs))))
    vit_full = RECIPES["vit"].full
    for bs in (64, 256):
        for name, build in (("08 ViT full", lambda: REGISTRY["vit"].build(vit_full)), ("08 CNN", VT.small_cnn),
                            ("08 MLP", VT.mlp)):
            cases.append((name, bs, lambda build=build, bs=bs: vit_run(
                build, digits.train.images, digits.train.labels, replace(vit_full, batch_size=bs))))
    rows = {}
    for name, bs, make_run in cases:
        ms = ms_per_step(make_run())
        rows[f"{name} b{bs}"] = round(ms, 2)
        print(f"{name} b{bs}: {ms:.1f} ms/step", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

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

from course_utils import convs2s as C, data, gpt as G, transformer as T, vit as V
from course_utils.seq2seq import Seq2Seq, Seq2SeqConfig, seq2seq_loss
from course_utils.training import train
dev = torch.device(os.environ.get("PROBE_DEVICE", "cuda"))
N = int(os.environ.get("PROBE_STEPS", "40"))
sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
splits = data.load_synthetic()
td = data.TranslationData.build(splits.train)
Vs, Vt = len(td.src_vocab), len(td.tgt_vocab)
rows = {}
def timed(name, build, loss_fn, batches_of, bs):
    torch.manual_seed(0)
    m = build().to(dev)
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    bt = [b.to(dev) if hasattr(b, "to") else b for b in batches_of(bs)[: N + 5]]
    train(m, bt[:5], loss_fn, opt, max_steps=5, progress=False); sync()
    t = time.perf_counter(); train(m, bt[5:5 + N], loss_fn, opt, max_steps=N, progress=False); sync()
    ms = 1000 * (time.perf_counter() - t) / N
    rows[f"{name} b{bs}"] = round(ms, 2); print(f"{name} b{bs}: {ms:.1f} ms/step", flush=True)
tb = lambda bs: td.batches(bs, shuffle=True, seed=0)
for bs in (64, 256):
    timed("01 fixed d256", lambda: Seq2Seq(Seq2SeqConfig(Vs, Vt, emb_size=64, hidden_size=256)), seq2seq_loss, tb, bs)
    timed("02 additive h128 bi", lambda: Seq2Seq(Seq2SeqConfig(Vs, Vt, emb_size=64, hidden_size=128, bidirectional=True, attention="additive")), seq2seq_loss, tb, bs)
for bs in (128, 512):
    timed("04 T full", lambda: T.Transformer(T.FULL.model_config(Vs, Vt)), T.transformer_loss, tb, bs)
for bs in (64, 256):
    timed("04 compare full", lambda: T.Transformer(T.COMPARE_FULL.model_config(Vs, Vt)), T.transformer_loss, tb, bs)
    timed("03 ConvS2S full", lambda: C.ConvS2S(C.FULL.model_config(Vs, Vt)), seq2seq_loss, tb, bs)
tokens = torch.randint(0, 2000, (200_000,), generator=torch.Generator().manual_seed(0))
for bs in (64, 256):
    timed("07 GPT full", lambda: G.GPT(G.FULL.model_config(2000)), G.lm_loss,
          lambda b: [G.random_windows(tokens, G.FULL.max_len, b, torch.Generator().manual_seed(i)) for i in range(N + 5)], bs)
digits = data.load_digit_images()
for bs in (64, 256):
    for name, build in (("08 ViT full", lambda: V.ViT(V.FULL.model_config())), ("08 CNN", V.small_cnn), ("08 MLP", V.mlp)):
        torch.manual_seed(0); m = build().to(dev)
        r = replace(V.FULL, batch_size=bs)
        V.fit(m, digits.train.images, digits.train.labels, r, max_steps=5); sync()
        t = time.perf_counter(); V.fit(m, digits.train.images, digits.train.labels, r, max_steps=N); sync()
        ms = 1000 * (time.perf_counter() - t) / N
        rows[f"{name} b{bs}"] = round(ms, 2); print(f"{name} b{bs}: {ms:.1f} ms/step", flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)

"""Benchmarks of the course (what `make bench` runs): writes docs/BENCHMARKS.md and
docs/benchmarks.json.

Usage: python scripts/bench.py [--parts stored,models,micro,bpe,speedups] [--out docs]
(`--parts ""` only renders docs/BENCHMARKS.md again from docs/benchmarks.json)
Parts (comma-separated; `all` = every part, `notebooks` included):
  stored    each notebook's wall time from its stored execution metadata (the last
            `make notebooks`), no run
  notebooks execute every notebook once more in the fast profile (nbclient, in memory,
            nothing written back) and time it: one run each (a median of repeats of
            whole notebooks costs too much); ~10-15 min on a 2-core laptop
  models    per model of 01-04: parameters and scores saved by the notebooks
            (results/fast/*.json) plus training tokens/s measured here on the same
            batches (median of repeats), and length-bucketed vs random batches
  micro     course_utils.attention against torch's scaled_dot_product_attention and
            nn.MultiheadAttention (forward, forward+backward, several sizes)
  bpe       course_utils.bpe.train_bpe against tokenizers' BpeTrainer on the same text
  speedups  the package's fast paths against the plain versions they replaced
Timings are medians of repeated runs (torch.utils.benchmark or time.perf_counter);
ratios are measured in the same run. Runs in the fast profile on one CPU thread unless
COURSE_NUM_THREADS says otherwise. A part that is not run keeps its previous numbers in
the JSON (so `make bench PARTS=micro` refreshes only the micro-benchmarks).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("COURSE_PROFILE", "fast")
os.environ.setdefault("COURSE_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("COURSE_DEVICE", "cpu")   # a CPU benchmark: on a GPU machine too (the package refuses CPU models beside a GPU)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import course_utils  # noqa: E402  (sets OMP_WAIT_POLICY before torch loads)
import torch  # noqa: E402

PARTS = ("stored", "notebooks", "models", "loop", "micro", "bpe", "speedups")
DEFAULT_PARTS = ("stored", "models", "loop", "micro", "bpe", "speedups")
MODELS = ("01_seq2seq", "02_attention", "03_convs2s", "04_transformer")
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"


def median_time(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` calls (after ``warmup``)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_timer(stmt, env: dict, min_run_time: float = 0.3) -> float:
    """Median seconds per call of ``stmt`` with torch.utils.benchmark (blocked autorange)."""
    from torch.utils import benchmark
    return benchmark.Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads()) \
        .blocked_autorange(min_run_time=min_run_time).median


# --------------------------------------------------------------------------------------
# Notebooks
# --------------------------------------------------------------------------------------

def _stamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def stored_notebook_times() -> list[dict]:
    """Wall time of each notebook's stored run: first cell started to last cell replied."""
    import nbformat
    rows = []
    for path in sorted((ROOT / "notebooks").glob(NOTEBOOK_GLOB)):
        nb = nbformat.read(path, as_version=4)
        times = [c.metadata.get("execution", {}) for c in nb.cells if c.cell_type == "code"]
        starts = [t["iopub.execute_input"] for t in times if "iopub.execute_input" in t]
        ends = [t["shell.execute_reply"] for t in times if "shell.execute_reply" in t]
        if not starts or not ends:
            rows.append({"notebook": path.name, "seconds": None, "executed": None})
            continue
        rows.append({"notebook": path.name,
                     "seconds": round((_stamp(max(ends)) - _stamp(min(starts))).total_seconds(), 1),
                     "executed": min(starts)[:16].replace("T", " ")})
    return rows


def run_notebook_times(timeout: int = 900) -> list[dict]:
    """Execute each notebook once (fast profile, in memory: `make notebooks`' runner without
    writing back) and time it."""
    from execute_notebooks import execute
    rows = []
    for path in sorted((ROOT / "notebooks").glob(NOTEBOOK_GLOB)):
        start = time.perf_counter()
        error = None
        try:
            execute(path, timeout, write=False)
        except Exception as err:  # noqa: BLE001  (reported in the table, not raised)
            error = type(err).__name__
        seconds = time.perf_counter() - start
        print(f"  {path.name}: {seconds:.1f} s{' ' + error if error else ''}", flush=True)
        rows.append({"notebook": path.name, "seconds": round(seconds, 1), "error": error})
    return rows


# --------------------------------------------------------------------------------------
# Models of 01-04
# --------------------------------------------------------------------------------------

def model_builders(train_data):
    """name -> (build model, loss fn) with the fast-profile sizes of notebooks 01-04."""
    from course_utils import recipes, transformer as T
    from course_utils.convs2s import ConvS2S
    from course_utils.seq2seq import Seq2Seq, seq2seq_loss
    V_src, V_tgt = len(train_data.src_vocab), len(train_data.tgt_vocab)
    return {
        "01_seq2seq": (lambda: Seq2Seq(recipes.SEQ2SEQ_FAST.model_config(V_src, V_tgt, context="last")), seq2seq_loss),
        "02_attention": (lambda: Seq2Seq(recipes.ATTENTION_FAST.model_config(V_src, V_tgt)), seq2seq_loss),
        "03_convs2s": (lambda: ConvS2S(recipes.CONVS2S_FAST.model_config(V_src, V_tgt)), seq2seq_loss),
        "04_transformer": (lambda: T.Transformer(recipes.TRANSFORMER_FAST.model_config(V_src, V_tgt)),
                           lambda m, b: T.transformer_loss(m, b)),
    }


def train_tokens_per_second(build, loss_fn, batches, steps: int, repeats: int) -> float:
    """Median target tokens/s of ``steps`` Adam steps on ``batches`` (after one warm-up run)."""
    from course_utils.training import train
    torch.manual_seed(0)
    model = build()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rates = []
    for r in range(repeats + 1):
        chunk = batches[(r * steps) % len(batches):][:steps]
        h = train(model, chunk, loss_fn, opt, max_steps=steps, progress=False)
        if r:  # the first run warms up allocator and caches
            rates.append(h.tokens_per_second)
    return statistics.median(rates)


def bench_models(steps: int = 8, repeats: int = 3) -> dict:
    """Parameters, scores (saved by the notebooks) and training throughput per model."""
    from course_utils import data
    from course_utils.results import load_results
    from course_utils.training import count_parameters
    splits = data.load_synthetic()
    train_data = data.TranslationData.build(splits.train)
    bucketed = train_data.batches(64, shuffle=True, seed=0)
    random_batches = train_data.batches(64, shuffle=True, by_length=False, seed=0)
    saved = load_results(profile="fast")
    rows = []
    for name, (build, loss_fn) in model_builders(train_data).items():
        rec = saved.get(name, {})
        params = count_parameters(build())
        if rec.get("parameters") not in (None, params):
            print(f"  warning: {name} has {params} parameters here, the notebook saved "
                  f"{rec['parameters']}", flush=True)
        tps_bucketed = train_tokens_per_second(build, loss_fn, bucketed, steps, repeats)
        tps_random = train_tokens_per_second(build, loss_fn, random_batches, steps, repeats)
        print(f"  {name}: {tps_bucketed:,.0f} tokens/s bucketed, {tps_random:,.0f} random", flush=True)
        rows.append({"model": name, "parameters": params, "steps": rec.get("steps"),
                     "bleu": rec.get("bleu"), "exact_match": rec.get("exact_match"),
                     "by_length": {r["bucket"]: r["bleu"] for r in rec.get("by_length", [])},
                     "em_by_length": {r["bucket"]: r["exact_match"] for r in rec.get("by_length", [])},
                     "tokens_per_s": round(tps_bucketed), "tokens_per_s_random_batches": round(tps_random),
                     "bucketing_speedup": round(tps_bucketed / tps_random, 2)})

    def padding(batches):
        real = sum(int(b.src_lengths.sum()) + int(b.tgt_lengths.sum()) for b in batches)
        total = sum(b.src.numel() + b.tgt.numel() for b in batches)
        return 1 - real / total
    return {"rows": rows, "steps_per_repeat": steps, "repeats": repeats, "batch_size": 64,
            "padding_bucketed": round(padding(bucketed), 3),
            "padding_random": round(padding(random_batches), 3)}


# --------------------------------------------------------------------------------------
# The training loop against a tight loop (full-profile shapes)
# --------------------------------------------------------------------------------------

def loop_cases(quick: bool = False):
    """name -> (build model, loss fn, batches): the full profile's models and batch shapes."""
    from course_utils import convs2s as C, data, gpt as G, gpt_training as GT, recipes, transformer as T
    from course_utils.seq2seq import Seq2Seq, seq2seq_loss
    splits = data.load_synthetic()
    train_data = data.TranslationData.build(splits.train)
    V_src, V_tgt = len(train_data.src_vocab), len(train_data.tgt_vocab)
    t_recipe, c_recipe, g_recipe, a_recipe = (recipes.TRANSFORMER_FULL, recipes.CONVS2S_FULL, recipes.GPT_FULL,
                                              recipes.ATTENTION_FULL)
    t_batches = train_data.batches(t_recipe.batch_size, shuffle=True, seed=0)
    c_batches = train_data.batches(c_recipe.batch_size, shuffle=True, seed=0)
    tokens = torch.randint(0, 2000, (200_000,), generator=torch.Generator().manual_seed(0))
    g_batches = [GT.random_windows(tokens, g_recipe.max_len, g_recipe.batch_size,
                                  torch.Generator().manual_seed(i)) for i in range(64)]
    a_batches = train_data.batches(a_recipe.batch_size, shuffle=True, seed=0)
    cases = {
        "02 GRU + attention (full)": (lambda: Seq2Seq(a_recipe.model_config(V_src, V_tgt)), seq2seq_loss, a_batches),
        "04 Transformer (full)": (lambda: T.Transformer(t_recipe.model_config(V_src, V_tgt)),
                                  lambda m, b: T.transformer_loss(m, b), t_batches),
        "03 ConvS2S (full)": (lambda: C.ConvS2S(c_recipe.model_config(V_src, V_tgt)), seq2seq_loss, c_batches),
        "07 GPT (full)": (lambda: G.GPT(g_recipe.model_config(2000)), G.lm_loss, g_batches),
    }
    return {"03 ConvS2S (full)": cases["03 ConvS2S (full)"]} if quick else cases


def bench_loop(steps: int = 6, repeats: int = 3, quick: bool = False) -> list[dict]:
    """Seconds per step of ``training.train`` against a tight loop (zero_grad, forward, loss,
    backward, clip, step; nothing else) on the same model size and the same batches,
    interleaved; the median of ``repeats`` runs of ``steps`` steps each (after a warm-up)."""
    from course_utils.training import train
    rows = []
    for name, (build, loss_fn, batches) in loop_cases(quick).items():
        torch.manual_seed(0)
        model = build()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)

        def tight(chunk):
            model.train()
            for batch in chunk:
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model, batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            return float(loss.detach())

        def ours(chunk):
            train(model, chunk, loss_fn, opt, max_steps=len(chunk), progress=False)

        timings = {"tight": [], "train": []}
        for r in range(repeats + 1):
            chunk = batches[(r * steps) % len(batches):][:steps]
            for label, fn in (("tight", tight), ("train", ours)) if r % 2 else (("train", ours), ("tight", tight)):
                started = time.perf_counter()
                fn(chunk)
                if r:  # the first round warms up
                    timings[label].append((time.perf_counter() - started) / len(chunk))
        tight_s, train_s = statistics.median(timings["tight"]), statistics.median(timings["train"])
        params = sum(p.numel() for p in model.parameters())
        rows.append({"model": name, "parameters": params, "tight_ms": round(1000 * tight_s, 1),
                     "train_ms": round(1000 * train_s, 1), "ratio": round(train_s / tight_s, 3)})
        print(f"  {name}: tight {1000 * tight_s:.1f} ms/step, train() {1000 * train_s:.1f} ms/step "
              f"({train_s / tight_s:.2f}x)", flush=True)
    return rows


# --------------------------------------------------------------------------------------
# Attention against torch
# --------------------------------------------------------------------------------------

ATTENTION_SIZES = ((64, 16, 64, 4), (32, 64, 128, 8), (16, 128, 256, 8), (4, 512, 256, 8))


def bench_attention(sizes=ATTENTION_SIZES, min_run_time: float = 0.3) -> list[dict]:
    """Ours vs torch, forward and forward+backward, with a padding mask, per size."""
    import torch.nn.functional as F
    from course_utils.attention import MultiHeadAttention, padding_mask, scaled_dot_product_attention
    rows = []
    for batch, n, d_model, heads in sizes:
        torch.manual_seed(0)
        d_head = d_model // heads
        q, k, v = (torch.randn(batch, heads, n, d_head, requires_grad=True) for _ in range(3))
        lengths = torch.randint(n // 2, n + 1, (batch,))
        lengths[0] = n
        mask = padding_mask(lengths, n)[:, None, None, :]  # (batch, 1, 1, n): True = attend
        x = torch.randn(batch, n, d_model, requires_grad=True)
        mha = torch.nn.MultiheadAttention(d_model, heads, batch_first=True)
        ours_mha = MultiHeadAttention(d_model, heads).copy_from_torch(mha)
        kpm = ~padding_mask(lengths, n)  # torch: True = ignore
        out_ours, _ = ours_mha(x, x, x, mask[:, 0])
        out_torch, _ = mha(x, x, x, key_padding_mask=kpm, need_weights=False)
        torch.testing.assert_close(out_ours, out_torch, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask)[0],
                                   F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                                   atol=1e-5, rtol=1e-4)
        env = dict(q=q, k=k, v=v, mask=mask, x=x, kpm=kpm, mha=mha, ours=ours_mha, F=F,
                   sdpa=scaled_dot_product_attention)
        cases = {
            ("sdpa", "forward"): ("with torch.no_grad(): sdpa(q, k, v, mask)",
                                  "with torch.no_grad(): F.scaled_dot_product_attention(q, k, v, attn_mask=mask)"),
            ("sdpa", "forward+backward"): ("sdpa(q, k, v, mask)[0].sum().backward()",
                                           "F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()"),
            ("mha", "forward"): ("with torch.no_grad(): ours(x, x, x, mask[:, 0])",
                                 "with torch.no_grad(): mha(x, x, x, key_padding_mask=kpm, need_weights=False)"),
            ("mha", "forward+backward"): ("ours(x, x, x, mask[:, 0])[0].sum().backward()",
                                          "mha(x, x, x, key_padding_mask=kpm, need_weights=False)[0].sum().backward()"),
        }
        env["torch"] = torch
        for (what, mode), (ours_stmt, torch_stmt) in cases.items():
            t_ours = bench_timer(ours_stmt, env, min_run_time)
            t_torch = bench_timer(torch_stmt, env, min_run_time)
            rows.append({"module": what, "mode": mode, "batch": batch, "length": n, "d_model": d_model,
                         "heads": heads, "ours_ms": round(1e3 * t_ours, 3), "torch_ms": round(1e3 * t_torch, 3),
                         "ratio": round(t_ours / t_torch, 2)})
            print(f"  {what:4s} {mode:16s} B={batch:3d} n={n:4d} d={d_model:3d} h={heads}: "
                  f"ours {1e3 * t_ours:8.3f} ms, torch {1e3 * t_torch:8.3f} ms, x{t_ours / t_torch:.2f}",
                  flush=True)
    return rows


# --------------------------------------------------------------------------------------
# BPE against tokenizers
# --------------------------------------------------------------------------------------

def bench_bpe(num_paragraphs: int = 4000, num_merges: int = 2000, repeats: int = 3) -> dict:
    """train_bpe (counting included) vs tokenizers' BpeTrainer: same text, same merges."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from course_utils import bpe, data
    texts = [p.text for p in data.load_english_text() if p.book != "Persuasion"][:num_paragraphs]

    def ours():
        freqs = bpe.word_frequencies(texts, byte_level=True)
        return bpe.train_bpe(freqs, num_merges, min_frequency=2, alphabet=bpe.byte_alphabet())

    def theirs():
        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=256 + num_merges, min_frequency=2, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        hf.train_from_iterator(texts, trainer=trainer)
        return [tuple(p) for p in json.loads(hf.to_str())["model"]["merges"]]

    same = ours() == theirs()
    t_ours = median_time(ours, repeats, warmup=0)
    t_theirs = median_time(theirs, repeats, warmup=0)
    words = sum(len(t.split()) for t in texts)
    print(f"  BPE {num_merges} merges on {len(texts)} paragraphs: ours {t_ours:.2f} s, "
          f"tokenizers {t_theirs:.2f} s, x{t_ours / t_theirs:.1f}, same merges: {same}", flush=True)
    return {"paragraphs": len(texts), "words": words, "merges": num_merges, "ours_s": round(t_ours, 3),
            "tokenizers_s": round(t_theirs, 3), "ratio": round(t_ours / t_theirs, 1), "same_merges": same,
            "tokenizers_threads": os.environ.get("RAYON_NUM_THREADS", "all cores")}


# --------------------------------------------------------------------------------------
# Speed-ups of the package, before/after in one run
# --------------------------------------------------------------------------------------

def _same_decoded(a, b) -> bool:
    return (a.tokens == b.tokens and a.scores == b.scores
            and all((x is None and y is None) or torch.equal(x, y) for x, y in zip(a.weights, b.weights)))


def speedup_cases(quick: bool = False) -> list[dict]:
    """(name, where, before, after, same) for each fast path of the package; ``before`` is
    the plain version kept in scripts/_bench_reference.py."""
    import _bench_reference as ref
    from course_utils import data, decoding, recipes
    from course_utils import transformer as T
    from course_utils.seq2seq import Seq2Seq
    splits = data.load_synthetic()
    train_data = data.TranslationData.build(splits.train)
    num_pairs = 640 if quick else len(train_data)
    chunks = [list(range(s, min(s + 64, num_pairs))) for s in range(0, num_pairs, 64)]

    def pad_with(pad):
        return [(pad([train_data.src_ids[i] for i in c]), pad([train_data.tgt_ids[i] for i in c]))
                for c in chunks]

    def same_padding(a, b):
        return all(torch.equal(x[0][0], y[0][0]) and torch.equal(x[1][0], y[1][0]) for x, y in zip(a, b))

    n_test, max_len = (32, 12) if quick else (500, 40)
    test = train_data.with_pairs(splits.test[:n_test]).batch(range(n_test))
    torch.manual_seed(0)
    V_src, V_tgt = len(train_data.src_vocab), len(train_data.tgt_vocab)
    gru = Seq2Seq(recipes.ATTENTION_FAST.model_config(V_src, V_tgt)).eval()
    torch.manual_seed(0)
    transformer = T.Transformer(recipes.TRANSFORMER_FAST.model_config(V_src, V_tgt)).eval()
    n_beam = 16 if quick else 200
    beam_src, beam_len = test.src[:n_beam], test.src_lengths[:n_beam]
    return [
        {"name": f"pad one epoch of batches ({num_pairs:,} pairs, batches of 64)",
         "where": "data.pad_sequences", "before": lambda: pad_with(ref.pad_sequences),
         "after": lambda: pad_with(data.pad_sequences), "same": same_padding},
        {"name": f"greedy decoding with attention weights ({n_test} sentences, {max_len} steps, 02 model)",
         "where": "decoding.greedy_decode",
         "before": lambda: ref.greedy_decode(gru, test.src, test.src_lengths, max_len=max_len),
         "after": lambda: decoding.greedy_decode(gru, test.src, test.src_lengths, max_len=max_len),
         "same": _same_decoded},
        {"name": f"beam search, K=4 ({n_beam} sentences, up to {max_len} steps, 04 model)",
         "where": "decoding.beam_search",
         "before": lambda: ref.beam_search(transformer, beam_src, beam_len, beam_size=4, max_len=max_len),
         "after": lambda: decoding.beam_search(transformer, beam_src, beam_len, beam_size=4, max_len=max_len),
         "same": _same_decoded},
    ]


def bench_speedups(repeats: int = 5, quick: bool = False) -> list[dict]:
    """Each fast path of the package against the plain version it replaced (same output);
    before and after alternate, so that a change of machine load hits both alike."""
    rows = []
    for case in speedup_cases(quick):
        before, after = case["before"], case["after"]
        if not case["same"](before(), after()):
            raise AssertionError(f"{case['name']}: the fast path changed the result")
        t_before, t_after = [], []
        for _ in range(repeats):
            t_before.append(median_time(before, 1, warmup=0))
            t_after.append(median_time(after, 1, warmup=0))
        t_before, t_after = statistics.median(t_before), statistics.median(t_after)
        print(f"  {case['name']}: {1e3 * t_before:.1f} ms -> {1e3 * t_after:.1f} ms "
              f"(x{t_before / t_after:.1f})", flush=True)
        rows.append({"name": case["name"], "where": case["where"], "before_ms": round(1e3 * t_before, 2),
                     "after_ms": round(1e3 * t_after, 2), "speedup": round(t_before / t_after, 2)})
    return rows


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------

def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    import tokenizers
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "load_1min_at_start": None if load is None else round(load, 2),
            "python": platform.python_version(), "torch": torch.__version__,
            "tokenizers": tokenizers.__version__, "platform": f"{platform.system()} {platform.machine()}"}


def _fmt(x, spec=""):
    return "–" if x is None else format(x, spec)


def render(report: dict) -> str:
    m = report["machine"]
    out = ["# Benchmarks", "",
           f"Generated by `make bench` ({report['generated']}; parts refreshed in this run: "
           f"{', '.join(report['parts_run'])}). Do not edit by hand.", "",
           f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} on "
           f"{m['threads']} CPU thread(s), Python {m['python']}, tokenizers {m['tokenizers']}; "
           f"1-minute load average {m['load_1min_at_start']} at the start."
           + "".join(f" Part *{part}* measured again on {r['when']}: {r['machine']['cpu']}, "
                     f"{r['machine']['cores']} cores, torch {r['machine']['torch']}, load "
                     f"{r['machine']['load_1min_at_start']}."
                     for part, r in sorted(report.get("refreshed", {}).items())),
           "Timings were taken on a shared machine unless the load average above is near 0: "
           "other processes inflate absolute times (by up to 2x). Ratios are measured in the "
           "same run, interleaved, and are the numbers to compare.",
           "", ("GPU (`full` profile): what was measured on one is in the section *On a GPU* "
                "below (recorded from those runs, not by this script). " if report.get("gpu") else
                "GPU (`full` profile): no GPU was available to this run, so there are no "
                "full-profile times or BLEU on the real corpus yet. ")
           + "The full profile is checked on "
           "a CPU: every notebook runs in the full profile with its full-size models "
           "and data but 2 training steps per run (`COURSE_SMOKE_STEPS`), as if a CUDA GPU were "
           "there (`COURSE_DEVICE=check`, `make device-check`), in JupyterLab by the "
           "browser test (`tests/test_browser_lab_*.py`), or by `tests/test_full_profile_smoke.py` "
           "where Chromium is missing. On a GPU, `make full` writes the table of wall times and "
           "scores to `build/full/summary.md`.", ""]
    nb = report.get("notebooks")
    if nb:
        out += ["## Notebooks: wall time in the fast profile (CPU)", "",
                f"Source: {nb['source']}. One run each (whole notebooks are too costly to repeat); "
                "stored runs were made while other jobs shared the CPU, so they overstate the time "
                "on an idle machine (`make bench PARTS=notebooks` times them afresh).", "",
                "| notebook | wall time (s) | run |", "|---|---:|---|"]
        for r in nb["rows"]:
            if r.get("error"):
                run = f"error: {r['error']}"
            elif r.get("executed"):
                run = r["executed"]
            else:
                run = "this run" if r["seconds"] is not None else "no stored run (not executed yet)"
            out.append(f"| {r['notebook']} | {_fmt(r['seconds'], '.0f')} | {run} |")
        out.append("")
    md = report.get("models")
    if md:
        buckets = sorted({b for r in md["rows"] for b in r["by_length"]},
                         key=lambda b: int(b.split("-")[0].rstrip("+")))
        out += ["## Models on the synthetic task (fast profile)", "",
                "Scores: greedy decoding of the 1,000 test pairs, as saved by each notebook in "
                "`results/fast/` (BLEU 0-100, exact match 0-1). Training throughput: target "
                f"tokens/s of Adam steps on the same length-bucketed batches of {md['batch_size']} "
                f"pairs, median of {md['repeats']} runs of {md['steps_per_repeat']} steps, measured by "
                "this script.", "",
                "| model | parameters | steps | tokens/s | BLEU | exact match | "
                + " | ".join(f"BLEU {b}" for b in buckets) + " |",
                "|---|---:|---:|---:|---:|---:|" + "---:|" * len(buckets)]
        for r in md["rows"]:
            out.append(f"| {r['model']} | {r['parameters']:,} | {_fmt(r['steps'])} | {r['tokens_per_s']:,} | "
                       f"{_fmt(r['bleu'], '.1f')} | {_fmt(r['exact_match'], '.3f')} | "
                       + " | ".join(_fmt(r["by_length"].get(b), ".1f") for b in buckets) + " |")
        out += ["", f"Padding waste (share of padded positions, source + target): "
                f"{md['padding_bucketed']:.1%} in length-bucketed batches, {md['padding_random']:.1%} "
                "in random batches. Training throughput, bucketed / random batches:", "",
                "| model | tokens/s bucketed | tokens/s random | speed-up |", "|---|---:|---:|---:|"]
        for r in md["rows"]:
            out.append(f"| {r['model']} | {r['tokens_per_s']:,} | {r['tokens_per_s_random_batches']:,} | "
                       f"x{r['bucketing_speedup']} |")
        out.append("")
    lp = report.get("loop")
    if lp:
        out += ["## The training loop against a tight loop (full-profile shapes, CPU)", "",
                "`course_utils.training.train` against the tightest loop of the same steps (zero_grad, "
                "forward, loss, backward, clipping, Adam step; nothing recorded) on the same model and "
                "batches of the full profile, interleaved, median seconds per step of 3 runs of 6 steps "
                "(after a warm-up). `train` keeps the loss and the gradient norm on the device and reads "
                "them back every 25 steps (one wait for the GPU instead of two per step). "
                "Goal: at most 1.2x.", "",
                "| model | parameters | tight loop (ms/step) | train() (ms/step) | ratio |",
                "|---|---:|---:|---:|---:|"]
        for r in lp:
            out.append(f"| {r['model']} | {r['parameters']:,} | {r['tight_ms']:.1f} | {r['train_ms']:.1f} | "
                       f"{r['ratio']:.2f} |")
        out.append("")
    full_cpu = report.get("full_cpu")
    if full_cpu:
        out += [f"## The full profile on a CPU: {full_cpu['machine']}", "", full_cpu["text"], ""]
    gpu = report.get("gpu")
    if gpu:
        out += [f"## On a GPU: {gpu['device']}", "", gpu["text"], ""]
    for key in ("memory", "torch_check", "make_test"):   # recorded by hand (docs/benchmarks.json), shown as they are
        part = report.get(key)
        if part:
            out += [f"## {part['title']}", "", part["text"], ""]
    at = report.get("attention")
    if at:
        out += ["## Attention: course_utils against torch", "",
                "`sdpa`: `course_utils.attention.scaled_dot_product_attention` vs "
                "`torch.nn.functional.scaled_dot_product_attention` on (batch, heads, length, d_model/heads) "
                "tensors; `mha`: `course_utils.attention.MultiHeadAttention` vs `torch.nn.MultiheadAttention` "
                "(weights copied with `copy_from_torch`, `need_weights=False`, outputs checked equal first). "
                "Self-attention with a padding mask, float32. Median ms per call "
                "(torch.utils.benchmark); ratio = ours / torch (>1: ours slower).", "",
                "| module | pass | batch | length | d_model | heads | ours (ms) | torch (ms) | ratio |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in at:
            out.append(f"| {r['module']} | {r['mode']} | {r['batch']} | {r['length']} | {r['d_model']} | "
                       f"{r['heads']} | {r['ours_ms']:.3f} | {r['torch_ms']:.3f} | {r['ratio']:.2f} |")
        out += ["", "Ours also returns the attention weights (what the notebooks draw); torch's fused "
                "kernels never materialise them.", ""]
    bp = report.get("bpe")
    if bp:
        out += ["## BPE: course_utils.bpe.train_bpe against tokenizers", "",
                f"Byte-level BPE, {bp['merges']:,} merges, min frequency 2, on the first "
                f"{bp['paragraphs']:,} training paragraphs of the Austen corpus ({bp['words']:,} words); "
                f"word counting included on both sides; median of 3 runs. Same merges in the same order: "
                f"{'yes' if bp['same_merges'] else 'NO'}.", "",
                "| trainer | seconds | ratio |", "|---|---:|---:|",
                f"| course_utils.bpe.train_bpe (Python) | {bp['ours_s']:.2f} | {bp['ratio']:.1f} |",
                f"| tokenizers BpeTrainer (Rust, {bp['tokenizers_threads']}) | {bp['tokenizers_s']:.2f} | 1.0 |", ""]
    sp = report.get("speedups")
    if sp:
        out += ["## Speed-ups in the package (before/after, same run, same results)", "",
                "Fast paths live in `course_utils`; the notebooks keep the readable version. "
                "Each row checks that both give the same result, then times both (median of 5).", "",
                "| what | where | before (ms) | after (ms) | speed-up |", "|---|---|---:|---:|---:|"]
        for r in sp:
            out.append(f"| {r['name']} | `{r['where']}` | {r['before_ms']:.1f} | {r['after_ms']:.1f} | "
                       f"x{r['speedup']:.1f} |")
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(DEFAULT_PARTS),
                        help=f"comma-separated, from {PARTS} or 'all' (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for the tests)")
    args = parser.parse_args(argv)
    parts = PARTS if args.parts.strip() == "all" else tuple(p.strip() for p in args.parts.split(",") if p.strip())
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {PARTS} or 'all'")
    from course_utils.runtime import configure_threads
    configure_threads()
    json_path = args.out / "benchmarks.json"
    report = json.loads(json_path.read_text()) if json_path.exists() else {}
    if not parts and not report:
        parser.error("no parts given and no earlier benchmarks.json to render")
    if parts and (set(DEFAULT_PARTS) <= set(parts) or "machine" not in report):
        report["machine"] = machine()   # a whole run: the report's machine is this one
        report["generated"] = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        report["parts_run"] = list(parts)
        report.pop("refreshed", None)
    elif parts:  # some parts again, maybe on another machine: say where each was measured
        now, here = dt.datetime.now().strftime("%Y-%m-%d %H:%M"), machine()
        for part in parts:
            report.setdefault("refreshed", {})[part] = {"when": now, "machine": here}
    started = time.perf_counter()
    if "stored" in parts and "notebooks" not in parts:
        print("notebooks (stored execution metadata)", flush=True)
        report["notebooks"] = {"source": "stored execution metadata of the committed notebooks "
                                         "(first cell start to last cell end of the last `make notebooks`)",
                               "rows": stored_notebook_times()}
    if "notebooks" in parts:
        print("notebooks (executing each once)", flush=True)
        report["notebooks"] = {"source": f"executed by `make bench` on {report['generated']} "
                                         "(nbclient, fast profile)", "rows": run_notebook_times()}
    if "models" in parts:
        print("models", flush=True)
        report["models"] = bench_models(steps=2 if args.quick else 8, repeats=1 if args.quick else 3)
    if "loop" in parts:
        print("training loop (full-profile shapes)", flush=True)
        report["loop"] = bench_loop(steps=2 if args.quick else 6, repeats=1 if args.quick else 3, quick=args.quick)
    if "micro" in parts:
        print("attention", flush=True)
        report["attention"] = bench_attention(ATTENTION_SIZES[:1] if args.quick else ATTENTION_SIZES,
                                              min_run_time=0.02 if args.quick else 0.3)
    if "bpe" in parts:
        print("bpe", flush=True)
        report["bpe"] = (bench_bpe(num_paragraphs=200, num_merges=50, repeats=1) if args.quick
                         else bench_bpe())
    if "speedups" in parts:
        print("speed-ups", flush=True)
        report["speedups"] = bench_speedups(repeats=1 if args.quick else 5, quick=args.quick)
    if parts:
        report["seconds"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    (args.out / "BENCHMARKS.md").write_text(render(report) + "\n")
    print(f"wrote {args.out / 'BENCHMARKS.md'} and {json_path} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

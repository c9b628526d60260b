"""The translation models of 01-04 (fast profile: parameters, saved scores, training
tokens/s with length-bucketed against random batches) and the training loop against a tight
loop on the full profile's shapes."""

from __future__ import annotations

import statistics
import time

import torch

MODELS = ("01_seq2seq", "02_attention", "03_convs2s", "04_transformer")


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

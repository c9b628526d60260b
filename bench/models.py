"""The translation models of 01-04 (fast profile: parameters, saved scores, training
tokens/s with length-bucketed against random batches) and the training loop against a tight
loop on the full profile's shapes."""

from __future__ import annotations

import statistics
import time

import torch

#: the models of 01-04, by the names the recorded results use -> their recipe (``registry``)
MODELS = {"01_seq2seq": "seq2seq", "02_attention": "attention", "03_convs2s": "convs2s",
          "04_transformer": "transformer"}


def model_builders(train_data):
    """name -> (build model, loss fn) with the fast-profile sizes of notebooks 01-04: each
    recipe's model and loss as ``course_utils.registry`` has them."""
    from course_utils.recipes import RECIPES
    from course_utils.registry import REGISTRY
    sizes = (len(train_data.src_vocab), len(train_data.tgt_vocab))
    return {name: ((lambda r=recipe: REGISTRY[r].build(RECIPES[r].fast, *sizes)), REGISTRY[recipe].loss)
            for name, recipe in MODELS.items()}


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


#: the loop's cases -> the recipe whose full profile each runs (the quick run: ConvS2S alone)
LOOP_CASES = {"02 GRU + attention (full)": "attention", "04 Transformer (full)": "transformer",
              "03 ConvS2S (full)": "convs2s", "07 GPT (full)": "gpt"}


def loop_cases(quick: bool = False):
    """name -> (build model, loss fn, batches): the full profile's models (``registry``) and
    batch shapes; GPT on windows of random ids of a 2,000-token vocabulary."""
    from course_utils import data, gpt_training as GT
    from course_utils.recipes import RECIPES
    from course_utils.registry import REGISTRY
    splits = data.load_synthetic()
    train_data = data.TranslationData.build(splits.train)
    tokens = torch.randint(0, 2000, (200_000,), generator=torch.Generator().manual_seed(0))
    cases = {}
    for name, recipe_name in LOOP_CASES.items():
        if quick and recipe_name != "convs2s":
            continue
        recipe, entry = RECIPES[recipe_name].full, REGISTRY[recipe_name]
        if recipe_name == "gpt":
            sizes = (2000,)
            batches = [GT.random_windows(tokens, recipe.max_len, recipe.batch_size, torch.Generator().manual_seed(i))
                       for i in range(64)]
        else:
            sizes = (len(train_data.src_vocab), len(train_data.tgt_vocab))
            batches = train_data.batches(recipe.batch_size, shuffle=True, seed=0)
        cases[name] = ((lambda entry=entry, recipe=recipe, sizes=sizes: entry.build(recipe, *sizes)),
                       entry.loss, batches)
    return cases


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

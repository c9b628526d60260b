"""The package's fast paths against the plain versions they replaced (``bench.reference``):
the same results checked, then both timed, alternating."""

from __future__ import annotations

import statistics

import torch

from bench.timing import median_time


def _same_decoded(a, b) -> bool:
    return (a.tokens == b.tokens and a.scores == b.scores
            and all((x is None and y is None) or torch.equal(x, y) for x, y in zip(a.weights, b.weights)))


def speedup_cases(quick: bool = False) -> list[dict]:
    """(name, where, before, after, same) for each fast path of the package; ``before`` is
    the plain version kept in bench/reference.py."""
    from bench import reference as ref
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

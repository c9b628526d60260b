"""What the course writes by hand against the library it teaches: attention against torch's
(``scaled_dot_product_attention``, ``nn.MultiheadAttention``; outputs checked equal first) and
BPE training against tokenizers' ``BpeTrainer`` (the same merges checked)."""

from __future__ import annotations

import json
import os

import torch

from bench.timing import bench_timer, median_time

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

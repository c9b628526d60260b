import math

import pytest
import torch
from torch import nn

from course_utils.attention import (MultiHeadAttention, causal_mask, fused_attention, masked_softmax, padding_mask,
                                    scaled_dot_product_attention)
from course_utils.decoding import beam_search, greedy_decode
from course_utils.transformer import DecoderLayer, EncoderLayer, Transformer, TransformerConfig, transformer_loss

# ---------------------------------------------------------------- scaled dot-product attention


def test_worked_example_from_the_slides():
    # q1.k1 = 112, q1.k2 = 96, d_k = 64: divide by 8 -> 14, 12; softmax -> 0.88, 0.12
    scores = torch.tensor([112.0, 96.0]) / math.sqrt(64)
    torch.testing.assert_close(scores, torch.tensor([14.0, 12.0]))
    weights = torch.softmax(scores, dim=-1)
    assert [round(w, 2) for w in weights.tolist()] == [0.88, 0.12]
    q = torch.zeros(1, 64)
    q[0, 0] = 1.0
    k = torch.zeros(2, 64)
    k[:, 0] = torch.tensor([112.0, 96.0])
    _, w = scaled_dot_product_attention(q, k, torch.eye(2, 64))
    torch.testing.assert_close(w[0], weights)


def test_sdpa_matches_torch_functional():
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    mask = torch.rand(2, 1, 5, 7) > 0.3
    mask[..., 0] = True
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))


# ---------------------------------------------------------------- multi-head attention vs torch


def _pair(d=16, h=4):
    theirs = nn.MultiheadAttention(d, h, batch_first=True).eval()
    ours = MultiHeadAttention(d, h).copy_from_torch(theirs).eval()
    return ours, theirs


def test_multihead_matches_torch_without_mask():
    ours, theirs = _pair()
    q, kv = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    out, w = ours(q, kv, kv)
    ref, ref_w = theirs(q, kv, kv, average_attn_weights=False)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(w, ref_w)


def test_multihead_matches_torch_with_padding_and_causal_masks():
    ours, theirs = _pair()
    x = torch.randn(3, 6, 16)
    lengths = torch.tensor([6, 4, 2])
    keep = padding_mask(lengths, 6)  # (batch, n) True = real
    out, w = ours(x, x, x, keep.unsqueeze(1))
    ref, ref_w = theirs(x, x, x, key_padding_mask=~keep, average_attn_weights=False)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(w, ref_w)
    causal = causal_mask(6)
    out, _ = ours(x, x, x, causal)
    ref, _ = theirs(x, x, x, attn_mask=~causal)
    torch.testing.assert_close(out, ref)
    out, _ = ours(x, x, x, causal & keep[:, None, :])
    ref, _ = theirs(x, x, x, attn_mask=~causal, key_padding_mask=~keep)
    torch.testing.assert_close(out, ref)


# ---------------------------------------------------------------- the fused fast path


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "causal+padding", "a row with no key"])
def test_fused_path_gives_the_written_out_output_and_gradients(masking):
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(3, 6, 16, requires_grad=True)
    keep = padding_mask(torch.tensor([6, 4, 2]), 6)[:, None, :]  # (batch, 1, n)
    mask = {"none": None, "padding": keep, "causal": causal_mask(6),
            "causal+padding": causal_mask(6) & keep,
            "a row with no key": keep & torch.tensor([True, True, False])[:, None, None]}[masking]
    slow, weights = mha(x, x, x, mask)
    fast, none = mha(x, x, x, mask, need_weights=False)
    assert weights.shape == (3, 4, 6, 6) and none is None
    torch.testing.assert_close(fast, slow)
    (g_slow,) = torch.autograd.grad(slow.square().sum(), x)
    (g_fast,) = torch.autograd.grad(fast.square().sum(), x)
    torch.testing.assert_close(g_fast, g_slow)
    assert torch.isfinite(fast).all() and torch.isfinite(g_fast).all()
    if masking == "a row with no key":   # the third sentence sees nothing: zero output before W^O
        torch.testing.assert_close(fast[2], mha.W_o.bias.expand(6, 16))


def test_fused_attention_rejects_what_the_written_out_one_rejects():
    q, k = torch.randn(2, 5, 8), torch.randn(2, 7, 8)
    with pytest.raises(ValueError, match=r"k must have shape \(\.\.\., n_k, d_k\) with d_k = 8 \(from q\)"):
        fused_attention(q, torch.randn(2, 7, 4), k)
    with pytest.raises(ValueError, match=r"v must have shape \(\.\.\., n_k, \*\) with n_k = 7 \(from k\)"):
        fused_attention(q, k, torch.randn(2, 6, 8))
    with pytest.raises(TypeError, match="bool"):
        fused_attention(q, k, k, torch.ones(2, 5, 7))


def test_training_forward_equals_the_pass_with_weights():
    """Transformer.forward (fused) gives the logits of the written-out pass that keeps the weights."""
    cfg = TransformerConfig(src_vocab_size=20, tgt_vocab_size=22, d_model=16, num_heads=4,
                            num_encoder_layers=2, num_decoder_layers=2, d_ff=32, dropout=0.0)
    model = Transformer(cfg)   # train mode, no dropout: both passes are deterministic
    src, lengths = torch.randint(4, 20, (3, 7)), torch.tensor([7, 5, 2])
    src[1, 5:], src[2, 2:] = 0, 0
    tgt_in = torch.randint(4, 22, (3, 6))
    memory, src_mask, enc_w = model.run_encoder(src, lengths)
    y, self_w, cross_w = model.run_decoder(tgt_in, memory, src_mask)
    assert all(w is not None for w in enc_w + self_w + cross_w)
    torch.testing.assert_close(model(src, lengths, tgt_in), model.generator(y))


# ---------------------------------------------------------------- masks: no leaks, no NaN


def test_causal_attention_leaks_nothing_from_the_future():
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(2, 6, 16, requires_grad=True)
    out, _ = mha(x, x, x, causal_mask(6))
    for i in range(6):
        (grad,) = torch.autograd.grad(out[:, i].sum(), x, retain_graph=True)
        assert grad[:, i + 1:].abs().sum() == 0.0, f"output {i} depends on a later input"
        assert grad[:, : i + 1].abs().sum() > 0


def test_fully_masked_rows_give_zeros_not_nan():
    scores = torch.randn(2, 3, 4, requires_grad=True)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[1, 2] = False
    w = masked_softmax(scores, mask)
    w.sum().backward()
    assert torch.isfinite(w).all() and torch.isfinite(scores.grad).all()
    assert w[1, 2].abs().sum() == 0
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    out, weights = mha(x, x, x, torch.zeros(2, 1, 3, dtype=torch.bool))
    assert torch.isfinite(out).all() and weights.abs().sum() == 0


def test_self_attention_is_permutation_equivariant():
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 7, 16)
    perm = torch.randperm(7)
    out, w = mha(x, x, x)
    out_p, w_p = mha(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_p, out[:, perm])
    torch.testing.assert_close(w_p, w[:, :, perm][..., perm])
    layer = EncoderLayer(16, 4, 32).eval()
    torch.testing.assert_close(layer(x[:, perm])[0], layer(x)[0][:, perm])


# ---------------------------------------------------------------- layers vs torch


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_encoder_layer_matches_torch(norm_first):
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = EncoderLayer(16, 4, 32, norm_first=norm_first).copy_from_torch(theirs)
    x = torch.randn(3, 6, 16)
    keep = padding_mask(torch.tensor([6, 5, 3]), 6)
    for mode in ("train", "eval"):  # eval takes torch's fused fast path
        theirs.train(mode == "train")
        ours.train(mode == "train")
        ref = theirs(x, src_key_padding_mask=~keep)
        out, _ = ours(x, keep.unsqueeze(1))
        torch.testing.assert_close(out[keep], ref[keep])
        torch.testing.assert_close(ours(x)[0], theirs(x))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_layer_matches_torch(norm_first):
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = DecoderLayer(16, 4, 32, norm_first=norm_first).copy_from_torch(theirs)
    y, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    keep = padding_mask(torch.tensor([7, 4]), 7)
    ref = theirs(y, memory, tgt_mask=~causal_mask(5), memory_key_padding_mask=~keep)
    out, _, _ = ours(y, memory, causal_mask(5), keep.unsqueeze(1))
    torch.testing.assert_close(out, ref)


# ---------------------------------------------------------------- the encoder-decoder


def _tiny(**kw):
    return Transformer(TransformerConfig(12, 12, d_model=16, num_heads=2, num_encoder_layers=1,
                                         num_decoder_layers=1, d_ff=32, dropout=0.0, **kw))


def test_decoder_does_not_see_later_target_words():
    model = _tiny().eval()
    src, lengths = torch.randint(4, 12, (2, 5)), torch.tensor([5, 3])
    tgt = torch.randint(4, 12, (2, 6))
    logits = model(src, lengths, tgt)
    changed = tgt.clone()
    changed[:, 4:] = 5
    torch.testing.assert_close(model(src, lengths, changed)[:, :4], logits[:, :4])


def test_padding_does_not_change_the_output():
    model = _tiny().eval()
    src, tgt = torch.randint(4, 12, (1, 4)), torch.randint(4, 12, (1, 5))
    padded = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], 1)
    torch.testing.assert_close(model(padded, torch.tensor([4]), tgt), model(src, torch.tensor([4]), tgt))


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_decode_step_agrees_with_the_teacher_forced_pass(norm_first):
    model = _tiny(norm_first=norm_first).eval()
    src, lengths = torch.randint(4, 12, (3, 6)), torch.tensor([6, 5, 2])
    tgt = torch.randint(4, 12, (3, 4))
    full = torch.log_softmax(model(src, lengths, tgt), -1)
    memory, state = model.encode(src, lengths)
    for i in range(4):
        log_probs, state, w = model.decode_step(tgt[:, i], state, memory)
        torch.testing.assert_close(log_probs, full[:, i])
        assert state["tokens"].shape == (3, i + 1) and w.shape == (3, 6)
        torch.testing.assert_close(w.sum(-1), torch.ones(3))
        assert w[2, 2:].abs().sum() == 0  # padded source positions get no weight
    maps = model.attention_maps(src, lengths, tgt)
    assert maps["encoder"].shape == (3, 1, 2, 6, 6) and maps["cross"].shape == (3, 1, 2, 4, 6)
    assert maps["decoder"][0, 0, 0].triu(1).abs().sum() == 0


def test_overfits_a_tiny_batch_and_decodes_it(device):
    torch.manual_seed(0)
    model = _tiny().to(device)
    src = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]], device=device)
    lengths = torch.tensor([4, 3], device=device)
    tgt = torch.tensor([[1, 6, 5, 4, 2], [1, 8, 7, 2, 0]], device=device)
    batch = type("B", (), {"src": src, "src_lengths": lengths, "tgt": tgt})()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        opt.zero_grad()
        loss = transformer_loss(model, batch)
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert greedy_decode(model, src, lengths).tokens == [[6, 5, 4, 2], [8, 7, 2]]
    assert beam_search(model, src, lengths, beam_size=3).tokens == [[6, 5, 4, 2], [8, 7, 2]]


def test_norm_and_positional_variants_run():
    for kw in ({"norm": "batch"}, {"positional": "learned"}, {"positional": "none"}, {"norm_first": False}):
        model = _tiny(**kw)
        out = model(torch.randint(4, 12, (2, 3)), torch.tensor([3, 2]), torch.randint(4, 12, (2, 4)))
        assert out.shape == (2, 4, 12) and torch.isfinite(out).all()


def test_bad_inputs():
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(10, 10, d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="norm must be"):
        TransformerConfig(10, 10, norm="group")
    with pytest.raises(ValueError, match=r"src must have shape \(batch, src_len\)"):
        _tiny()(torch.zeros(3, dtype=torch.long), torch.tensor([3]), torch.zeros(1, 2, dtype=torch.long))


def test_batch_norm_in_the_decoder_leaks_later_words_and_decoder_norm_layer_stops_it():
    from course_utils.norms import SequenceBatchNorm
    src, lengths = torch.randint(4, 12, (3, 5)), torch.tensor([5, 4, 3])
    tgt_in = torch.randint(4, 12, (3, 6))
    for decoder_norm, leaks in ((None, True), ("layer", False)):
        torch.manual_seed(0)
        model = _tiny(norm="batch", norm_first=False, decoder_norm=decoder_norm).train()
        assert isinstance(model.encoder_layers[0].norm1, SequenceBatchNorm)
        assert isinstance(model.decoder_layers[0].norm1, SequenceBatchNorm if leaks else nn.LayerNorm)
        changed = tgt_in.clone()
        changed[0, 4] = 4 if tgt_in[0, 4] != 4 else 5            # a later word of sentence 0
        before, after = model(src, lengths, tgt_in), model(src, lengths, changed)
        moved = (before - after)[0, :4].abs().max().item()       # positions 0-3 must not see word 4
        assert (moved > 1e-4) if leaks else (moved < 1e-6), (decoder_norm, moved)
    with pytest.raises(ValueError, match=r"decoder_norm must be 'layer' or 'batch' \(or None: as norm\), got 'group'"):
        TransformerConfig(10, 10, decoder_norm="group")

"""Score functions against their formulas, masks, the masked softmax."""

import math

import pytest
import torch

from course_utils.attention import (AdditiveAttention, DotAttention, MLPAttention,
                                    MultiplicativeAttention, causal_mask, make_attention,
                                    masked_softmax, padding_mask)

B, NQ, NK, DQ, DK, H = 2, 3, 5, 6, 4, 7


def _inputs(dq=DQ, dk=DK):
    torch.manual_seed(0)
    return torch.randn(B, NQ, dq), torch.randn(B, NK, dk)


def _direct(score_ij, q, k):
    """e[b, i, j] = score_ij(q[b, i], k[b, j]), one pair at a time."""
    return torch.stack([torch.stack([torch.stack([score_ij(q[b, i], k[b, j]) for j in range(NK)])
                                     for i in range(NQ)]) for b in range(B)])


def test_dot_score_is_the_dot_product():
    q, k = _inputs(dk=DQ)
    torch.testing.assert_close(DotAttention().score(q, k), _direct(lambda s, h: s @ h, q, k))


def test_multiplicative_score_is_s_W_h():
    q, k = _inputs()
    att = MultiplicativeAttention(DQ, DK)
    W = att.W.weight  # (DQ, DK)
    expected = _direct(lambda s, h: s @ W @ h, q, k)
    torch.testing.assert_close(att.score(q, att.prepare(k)), expected)


def test_additive_score_is_v_tanh_W1h_plus_W2s():
    q, k = _inputs()
    att = AdditiveAttention(DQ, DK, H)
    W1, W2, v = att.W1.weight, att.W2.weight, att.v.weight.squeeze(0)
    expected = _direct(lambda s, h: v @ torch.tanh(W1 @ h + W2 @ s), q, k)
    torch.testing.assert_close(att.score(q, att.prepare(k)), expected)


def test_mlp_score_is_an_mlp_of_the_concatenation():
    q, k = _inputs()
    att = MLPAttention(DQ, DK, H)
    first = torch.cat([att.W_query.weight, att.W_key.weight], dim=1)  # acts on [s; h]
    l2, l3 = att.rest[1], att.rest[3]

    def mlp(s, h):
        x = torch.relu(first @ torch.cat([s, h]) + att.W_query.bias)
        return (l3.weight @ torch.relu(l2.weight @ x + l2.bias) + l3.bias).squeeze(0)

    torch.testing.assert_close(att.score(q, att.prepare(k)), _direct(mlp, q, k))


@pytest.mark.parametrize("kind", ["dot", "multiplicative", "additive", "mlp"])
def test_context_is_the_weighted_sum_and_weights_sum_to_one(kind):
    q, k = _inputs(dk=DQ)
    att = make_attention(kind, DQ, DQ, H)
    v = torch.randn(B, NK, 3)
    context, weights = att(q, k, v)
    assert weights.shape == (B, NQ, NK) and context.shape == (B, NQ, 3)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, NQ))
    torch.testing.assert_close(context, torch.einsum("bqk,bkd->bqd", weights, v))
    # one decoder step: a 2-d query gives 2-d results equal to the first query's
    c1, w1 = att(q[:, 0], k, v)
    torch.testing.assert_close(c1, context[:, 0])
    torch.testing.assert_close(w1, weights[:, 0])


@pytest.mark.parametrize("kind", ["dot", "multiplicative", "additive", "mlp"])
def test_padded_positions_get_exactly_zero_weight(kind):
    q, k = _inputs(dk=DQ)
    att = make_attention(kind, DQ, DQ, H)
    lengths = torch.tensor([5, 2])
    mask = padding_mask(lengths, NK)
    _, weights = att(q[:, 0], k, mask=mask)
    assert (weights[1, 2:] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B))
    # what sits in padded positions cannot change the result
    k2 = k.clone()
    k2[1, 2:] = 1e4 * torch.randn(NK - 2, DQ)
    c_a, _ = att(q[:, 0], k, mask=mask)
    c_b, _ = att(q[:, 0], k2, mask=mask)
    torch.testing.assert_close(c_a[1], c_b[1])


def test_masked_softmax_never_gives_nan_even_for_fully_masked_rows():
    torch.manual_seed(0)
    scores = torch.randn(4, 6, requires_grad=True)
    for trial in range(50):
        mask = torch.rand(4, 6) < (trial / 50)
        mask[0] = False  # one row fully masked, always
        w = masked_softmax(scores, mask)
        (w * torch.randn_like(w)).sum().backward()
        assert not torch.isnan(w).any() and not torch.isnan(scores.grad).any()
        assert (w[~mask] == 0).all()
        assert (w[0] == 0).all()
        kept_rows = mask.any(-1)
        torch.testing.assert_close(w.sum(-1)[kept_rows], torch.ones(int(kept_rows.sum())))
        scores.grad = None


def test_masked_softmax_equals_softmax_over_kept_entries():
    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.tensor([[True, False, True, False]])
    expected = torch.tensor([[math.exp(1), 0.0, math.exp(3), 0.0]]) / (math.exp(1) + math.exp(3))
    torch.testing.assert_close(masked_softmax(scores, mask), expected)


def test_masks_and_their_errors():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert padding_mask(torch.tensor([1, 3]), 4).tolist() == [[True, False, False, False],
                                                               [True, True, True, False]]
    with pytest.raises(ValueError, match="max_len=2 is shorter than the longest length 3"):
        padding_mask(torch.tensor([3]), 2)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        causal_mask(0)
    with pytest.raises(TypeError, match=r"mask must have torch.bool \(True = keep\), got torch.float32"):
        masked_softmax(torch.zeros(2, 2), torch.ones(2, 2))
    with pytest.raises(ValueError, match=r"does not broadcast to scores of shape \(2, 3\)"):
        masked_softmax(torch.zeros(2, 3), torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="same size, got 6 and 4"):
        DotAttention()(*_inputs())
    with pytest.raises(ValueError, match="attention kind must be one of"):
        make_attention("cosine", 3, 3)


def test_split_heads_gives_each_head_its_slice_and_merge_heads_undoes_it():
    from course_utils.attention import MultiHeadAttention
    mha = MultiHeadAttention(d_model=12, num_heads=3)
    x = torch.randn(2, 5, 12)
    heads = mha.split_heads(x)
    assert heads.shape == (2, 3, 5, 4)
    torch.testing.assert_close(heads[:, 1], x[..., 4:8])     # head 1: features 4-7
    torch.testing.assert_close(mha.merge_heads(heads), x)

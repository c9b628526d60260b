import math

import pytest
import torch

from course_utils.positional import (LearnedPositionalEmbedding, SinusoidalPositionalEncoding,
                                     make_positional, position_similarity, shift_matrix,
                                     sinusoidal_encoding)


def test_sinusoidal_known_values():
    pe = sinusoidal_encoding(50, 8)
    assert pe.shape == (50, 8) and pe.dtype == torch.float32
    for p in (0, 1, 7, 49):
        for i in range(4):
            angle = p / 10000 ** (2 * i / 8)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0] * 4))


def test_every_position_vector_has_the_same_norm():
    pe = sinusoidal_encoding(200, 16)
    torch.testing.assert_close(pe.norm(dim=-1), torch.full((200,), math.sqrt(8)))


@pytest.mark.parametrize("k", [1, 3, 10, -4])
def test_shift_matrix_moves_every_position_by_k(k):
    d, pe = 32, sinusoidal_encoding(120, 32)
    m = shift_matrix(k, d)
    ps = torch.arange(max(0, -k), 120 - max(0, k))
    torch.testing.assert_close(pe[ps] @ m.T, pe[ps + k], atol=1e-4, rtol=0)
    torch.testing.assert_close(m @ m.T, torch.eye(d), atol=1e-5, rtol=0)  # a rotation


def test_least_squares_finds_the_same_shift_matrix():
    # the slowest sinusoid needs many positions to turn far enough to be identifiable
    d, k, pe = 16, 5, sinusoidal_encoding(2000, 16).double()
    found = torch.linalg.lstsq(pe[:-k], pe[k:]).solution.T  # PE(p+k) = M PE(p)
    torch.testing.assert_close(found.float(), shift_matrix(k, d), atol=1e-4, rtol=0)


def test_similarity_depends_on_distance_only():
    sim = position_similarity(sinusoidal_encoding(60, 32))
    torch.testing.assert_close(torch.diagonal(sim), torch.ones(60))
    torch.testing.assert_close(torch.diagonal(sim, 3)[:-10], torch.full((47,), sim[0, 3].item()),
                               atol=1e-5, rtol=0)


def test_modules_add_positions_and_refuse_too_long_inputs():
    x = torch.zeros(2, 5, 8)
    torch.testing.assert_close(SinusoidalPositionalEncoding(8, 10)(x), sinusoidal_encoding(5, 8).expand(2, 5, 8))
    learned = LearnedPositionalEmbedding(8, 6)
    torch.testing.assert_close(learned(x), learned.embedding.weight[:5].expand(2, 5, 8))
    with pytest.raises(IndexError, match="no vector for position 6"):
        learned(torch.zeros(1, 7, 8))
    with pytest.raises(ValueError, match="raise max_len"):
        SinusoidalPositionalEncoding(8, 4)(x)
    assert make_positional("none", 8)(x) is x


def test_bad_inputs():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_encoding(10, 7)
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        sinusoidal_encoding(0, 8)
    with pytest.raises(ValueError, match="positional kind"):
        make_positional("rotary", 8)
    with pytest.raises(ValueError, match=r"input must be \(batch, n, 8\)"):
        SinusoidalPositionalEncoding(8)(torch.zeros(2, 3, 4))


def test_learned_positions_start_at_the_scale_of_the_sinusoids_also_inside_a_transformer():
    from course_utils.transformer import Transformer, TransformerConfig
    d = 64
    sinusoid_norm = sinusoidal_encoding(200, d).norm(dim=-1).mean().item()
    assert sinusoid_norm == pytest.approx((d / 2) ** 0.5, rel=1e-3)     # sin^2 + cos^2 = 1 per pair
    torch.manual_seed(0)
    alone = LearnedPositionalEmbedding(d, 200).embedding.weight.norm(dim=-1).mean().item()
    inside = Transformer(TransformerConfig(20, 20, d_model=d, num_heads=4, positional="learned",
                                           max_len=200)).tgt_position.embedding.weight
    for norm in (alone, inside.norm(dim=-1).mean().item()):
        assert norm == pytest.approx(sinusoid_norm, rel=0.1)           # not Xavier's ~0.1 x

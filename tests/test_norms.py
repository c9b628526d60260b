import pytest
import torch
from torch import nn

from course_utils.norms import SequenceBatchNorm, batch_norm, batch_statistics, layer_norm, make_norm

# the slides' batch of two sentences, three tokens each, four features
A = torch.tensor([[1.0, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]])
B = torch.tensor([[4.0, 5, 6, 7], [5, 6, 7, 8], [6, 7, 8, 9]])
BATCH = torch.stack([A, B])  # (2, 3, 4)


def test_slides_layer_norm_example():
    a1 = A[0]
    assert a1.mean().item() == 2.5 and a1.var(unbiased=False).item() == 1.25
    expected = (a1 - 2.5) / (1.25 + 0.001) ** 0.5
    torch.testing.assert_close(layer_norm(BATCH, eps=0.001)[0, 0], expected)


def test_slides_batch_norm_example():
    mu, var = batch_statistics(BATCH)
    assert mu[0].item() == 3.5 and round(var[0].item(), 3) == 2.917
    expected = (torch.arange(1.0, 7.0) - 3.5) / (var[0] + 0.001) ** 0.5
    torch.testing.assert_close(batch_norm(BATCH, eps=0.001)[..., 0].reshape(-1), expected)


def test_layer_norm_matches_torch():
    x = torch.randn(3, 5, 16) * 4 + 2
    w, b = torch.randn(16), torch.randn(16)
    torch.testing.assert_close(layer_norm(x, 1e-5, w, b), nn.functional.layer_norm(x, (16,), w, b, 1e-5))


@pytest.mark.parametrize("shape", [(32, 6), (4, 7, 6)])
def test_batch_norm_matches_torch_in_training_mode(shape):
    x = torch.randn(*shape) * 3 + 1
    bn = nn.BatchNorm1d(6, eps=1e-5, affine=False).train()
    expected = bn(x) if x.dim() == 2 else bn(x.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(batch_norm(x, 1e-5), expected)
    torch.testing.assert_close(SequenceBatchNorm(6)(x.reshape(-1, 1, 6) if x.dim() == 2 else x).reshape(shape),
                               expected)


def test_padding_pollutes_batch_statistics_unless_masked():
    x = torch.randn(2, 5, 4) + 3.0
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    padded = x.masked_fill(~mask.unsqueeze(-1), 0.0)  # zero vectors at padded positions
    mu_real, _ = batch_statistics(x, mask)
    mu_all, _ = batch_statistics(padded)
    torch.testing.assert_close(batch_statistics(padded, mask)[0], mu_real)
    assert (mu_all < mu_real - 0.5).all()  # three zero rows drag the mean down
    # layer norm of a real token ignores the others entirely
    torch.testing.assert_close(layer_norm(padded)[1, :2], layer_norm(x)[1, :2])


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"x must have 2 or 3 dimensions, got shape \(2, 3, 4, 5\)"):
        batch_norm(torch.randn(2, 3, 4, 5))
    with pytest.raises(ValueError, match=r"mask must have shape \(2, 3\), got \(2, 4\)"):
        batch_statistics(torch.randn(2, 3, 4), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="norm must be 'layer' or 'batch'"):
        make_norm("rms", 8)

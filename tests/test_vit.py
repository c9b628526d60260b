"""course_utils.vit: patches, the Vision Transformer, rollout, training on the digits."""

import pytest
import torch

from course_utils import captioning, data, recipes, vit, vit_training


def test_patchify_known_values_row_major_and_channel_first():
    images = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(1, 2, 4, 4)  # 2 channels
    patches = vit.patchify(images, 2)
    assert patches.shape == (1, 4, 2 * 2 * 2)
    # patch 1 is the top-right 2x2 block: channel 0 (2, 3, 6, 7), then channel 1 (+16)
    assert patches[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23]
    # patch 2 is the bottom-left block (row-major order of patches)
    assert patches[0, 2, :4].tolist() == [8, 9, 12, 13]


@pytest.mark.parametrize("shape, p", [((3, 1, 8, 8), 2), ((2, 3, 6, 9), 3), ((1, 2, 8, 8), 8), ((2, 1, 4, 4), 1)])
def test_unpatchify_inverts_patchify(shape, p):
    images = torch.randn(shape)
    patches = vit.patchify(images, p)
    assert patches.shape == (shape[0], (shape[2] // p) * (shape[3] // p), shape[1] * p * p)
    assert torch.equal(vit.unpatchify(patches, p, shape[2], shape[3]), images)


def test_patchify_bad_inputs_say_what_was_expected():
    with pytest.raises(ValueError, match=r"divisible by patch_size=3"):
        vit.patchify(torch.zeros(1, 1, 8, 8), 3)
    with pytest.raises(ValueError, match=r"\(batch, channels, height, width\), got \(8, 8\)"):
        vit.patchify(torch.zeros(8, 8), 2)
    with pytest.raises(ValueError, match="positive int"):
        vit.patchify(torch.zeros(1, 1, 8, 8), 0)
    with pytest.raises(ValueError, match=r"need \(batch, 16, channels \* 4\) patches, got \(1, 15, 4\)"):
        vit.unpatchify(torch.zeros(1, 15, 4), 2, 8, 8)


def test_patch_embedding_equals_a_strided_convolution():
    torch.manual_seed(0)
    linear = torch.nn.Linear(3 * 2 * 2, 16)
    images = torch.randn(4, 3, 8, 6)
    by_linear = linear(vit.patchify(images, 2))                             # (b, n, d)
    conv = vit.patch_embedding_as_conv(linear, 2, 3)
    by_conv = conv(images).flatten(2).transpose(1, 2)                        # (b, d, 4, 3) -> (b, n, d)
    torch.testing.assert_close(by_conv, by_linear)
    with pytest.raises(ValueError, match="takes 12 inputs"):
        vit.patch_embedding_as_conv(linear, 2, 1)


def small_vit(**overrides):
    torch.manual_seed(0)
    cfg = dict(d_model=32, num_heads=4, num_layers=2, d_ff=64)
    cfg.update(overrides)
    return vit.ViT(vit.ViTConfig(**cfg)).eval()


def test_forward_shapes_and_attention_rows_sum_to_one():
    model = small_vit()
    images = torch.rand(5, 1, 8, 8)
    logits, weights = model(images, return_attention=True)
    assert logits.shape == (5, 10)
    assert len(weights) == 2 and weights[0].shape == (5, 4, 17, 17)         # 16 patches + class token
    for w in weights:
        torch.testing.assert_close(w.sum(-1), torch.ones(5, 4, 17))
    torch.testing.assert_close(model(images), logits)                       # same logits without weights


def test_bad_images_name_the_expected_shape():
    model = small_vit()
    with pytest.raises(ValueError, match=r"takes images \(batch, 1, 8, 8\), got \(2, 1, 6, 6\)"):
        model(torch.zeros(2, 1, 6, 6))
    with pytest.raises(ValueError, match="divisible by patch_size"):
        vit.ViTConfig(image_size=8, patch_size=3)
    with pytest.raises(ValueError, match="positions must be"):
        vit.ViTConfig(positions="sinusoidal")


def test_without_positions_patches_are_a_bag_with_positions_they_are_not():
    images = torch.rand(3, 1, 8, 8)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(1))
    shuffled = vit.unpatchify(vit.patchify(images, 2)[:, perm], 2, 8, 8)
    bag = small_vit(positions="none")
    # the patch tokens are permuted with the patches (equivariance) ...
    tokens, shuffled_tokens = bag.embed(images), bag.embed(shuffled)
    x, y = tokens, shuffled_tokens
    for layer in bag.layers:
        x, _ = layer(x)
        y, _ = layer(y)
    torch.testing.assert_close(y[:, 1:], x[:, 1:][:, perm])
    # ... and the class token's output, hence the prediction, does not change (invariance)
    torch.testing.assert_close(bag(shuffled), bag(images))
    placed = small_vit(positions="learned")
    with torch.no_grad():
        placed.pos_embed.normal_(std=1.0)
    assert not torch.allclose(placed(shuffled), placed(images), atol=1e-4)


def test_attention_rollout_by_hand_and_rows_sum_to_one():
    torch.manual_seed(0)
    weights = [torch.softmax(torch.randn(2, 3, 5, 5), -1) for _ in range(3)]
    rolled = vit.attention_rollout(weights)
    expected = torch.eye(5).expand(2, 5, 5)
    for w in weights:
        a = w.mean(1) + torch.eye(5)
        expected = (a / a.sum(-1, keepdim=True)) @ expected
    torch.testing.assert_close(rolled, expected)
    torch.testing.assert_close(rolled.sum(-1), torch.ones(2, 5))
    # one layer of uniform attention: half stays (residual), half spreads evenly
    uniform = vit.attention_rollout([torch.full((1, 2, 4, 4), 0.25)])
    torch.testing.assert_close(uniform[0, 0], torch.tensor([0.625, 0.125, 0.125, 0.125]))
    with pytest.raises(ValueError, match="at least one layer"):
        vit.attention_rollout([])
    with pytest.raises(ValueError, match=r"\(batch, heads, t, t\), got None"):
        vit.attention_rollout([None])


def test_random_shift_moves_by_at_most_one_pixel_and_keeps_the_shape():
    images = torch.zeros(50, 1, 8, 8)
    images[:, :, 3, 4] = 1.0
    shifted = vit_training.random_shift(images, 1, generator=torch.Generator().manual_seed(0))
    assert shifted.shape == images.shape and torch.all(shifted.sum((1, 2, 3)) == 1)
    where = shifted[:, 0].flatten(1).argmax(1)
    rows, cols = where // 8, where % 8
    assert set(rows.tolist()) == {2, 3, 4} and set(cols.tolist()) == {3, 4, 5}


def test_random_shift_is_each_image_cut_from_its_padded_copy_with_the_same_draws():
    # the batched gather against the plain per-image slice, bit for bit: two channels, shifts
    # up to two pixels, and the generator's draws (dy for every image, then dx) unchanged
    images = torch.rand(30, 2, 6, 7, generator=torch.Generator().manual_seed(1))
    shifted = vit_training.random_shift(images, 2, generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    dy, dx = torch.randint(0, 5, (30,), generator=g), torch.randint(0, 5, (30,), generator=g)
    padded = torch.nn.functional.pad(images, (2, 2, 2, 2))
    for i in range(30):
        assert torch.equal(shifted[i], padded[i, :, dy[i]:dy[i] + 6, dx[i]:dx[i] + 7])
    assert len({(int(a), int(b)) for a, b in zip(dy, dx)}) > 10   # the draws vary


def test_digits_splits_are_fixed_stratified_and_disjoint():
    splits = data.load_digit_images()
    assert [len(s.labels) for s in splits] == [1257, 180, 360]
    assert splits.train.images.shape[1:] == (1, 8, 8) and 0 <= splits.train.images.min() <= splits.train.images.max() == 1
    for s in splits:
        counts = s.labels.bincount(minlength=10)
        assert counts.min() >= 0.9 * counts.max() - 1                         # stratified
    # a partition of the 1,797 images: every image in exactly one split
    from sklearn.datasets import load_digits
    every = sorted(tuple(x.flatten().tolist()) for x in torch.tensor(load_digits().images) / 16.0)
    ours = sorted(tuple(x.flatten().tolist()) for s in splits for x in s.images)
    assert ours == every
    assert torch.equal(data.load_digit_images().test.images, splits.test.images)   # fixed
    with pytest.raises(ValueError, match="got 5 and 360"):
        data.load_digit_images(num_valid=5)


@pytest.mark.parametrize("make", [lambda: small_vit(), lambda: vit_training.small_cnn(), lambda: vit_training.mlp()],
                         ids=["vit", "cnn", "mlp"])
def test_models_overfit_a_tiny_batch(make, device):
    splits = data.load_digit_images()
    images, labels = splits.train.images[:32], splits.train.labels[:32]   # fit and accuracy move them
    model = make().to(device).train()
    recipe = recipes.ViTTraining(batch_size=32, lr=3e-3, warmup=5, max_steps=300, weight_decay=0.0)
    history = vit_training.fit(model, images, labels, recipe)
    assert history.losses[-1] < 0.05 < history.losses[0]
    assert vit_training.accuracy(model, images, labels) == 1.0


def test_recipes_and_model_config():
    assert recipes.recipe("vit", "fast") is recipes.VIT_FAST and recipes.recipe("vit", "full") is recipes.VIT_FULL
    cfg = recipes.VIT_FAST.model_config(positions="none")
    assert cfg.positions == "none" and cfg.d_model == recipes.VIT_FAST.d_model and cfg.num_patches == 16


def test_digit_strips_put_the_digits_side_by_side_and_end_the_caption():
    images = torch.arange(5, dtype=torch.float32).reshape(5, 1, 1, 1).expand(5, 1, 2, 2)
    labels = torch.tensor([0, 1, 2, 3, 4])
    strips, captions = captioning.digit_strips(images, labels, count=6, num_digits=3, seed=0)
    assert strips.shape == (6, 1, 2, 6) and captions.shape == (6, 4)
    assert torch.all(captions[:, -1] == captioning.EOS)
    for strip, caption in zip(strips, captions):      # the value of each image is its label here
        assert strip[0, 0, ::2].tolist() == caption[:3].float().tolist()


def test_captioner_shapes_attention_and_it_overfits_a_tiny_batch(device):
    from course_utils.training import train
    splits = data.load_digit_images()
    strips, captions = captioning.digit_strips(splits.train.images, splits.train.labels, 16, seed=0)
    strips, captions = strips.to(device), captions.to(device)
    torch.manual_seed(0)
    model = captioning.DigitCaptioner(hidden=32, channels=8).to(device)
    logits, weights = model(strips, captions)
    assert logits.shape == (16, 4, captioning.EOS + 1) and weights.shape == (16, 4, 12)
    torch.testing.assert_close(weights.sum(-1).cpu(), torch.ones(16, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    history = train(model, [(strips, captions)], captioning.caption_loss, optimizer, max_steps=150, progress=False)
    assert history.losses[-1] < 0.05 < history.losses[0]
    words, attention = model.eval().greedy(strips, 4)
    assert torch.equal(words, captions) and attention.shape == (16, 4, 12)

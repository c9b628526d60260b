"""The Vision Transformer (Dosovitskiy et al., 2021) on small images, from the course's layers.

Taught in: 08_vision_transformer. Built from ``course_utils.transformer.EncoderLayer``
(pre-LN, 04) and ``course_utils.training.train``. An image is cut into patches, each patch
is flattened and mapped to a vector (a token), a learned class token is put in front,
learned position embeddings are added, and a Transformer encoder reads the sequence; the
class token's final vector, normalised, goes to a linear classifier.

Leaves out: GELU in the feed-forward net (the course's is ReLU), pre-training on a large
image set and fine-tuning at a higher resolution (the paper's recipe; here every model
trains from scratch on scikit-learn's 8x8 digits), stochastic depth, mixup and RandAugment.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from course_utils.runtime import cap_steps, check_device, pick
from course_utils.transformer import EncoderLayer


# --------------------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------------------


def _check_images(images, what: str = "images") -> None:
    if not torch.is_tensor(images) or images.dim() != 4:
        shape = tuple(images.shape) if torch.is_tensor(images) else type(images).__name__
        raise ValueError(f"{what} must be a tensor (batch, channels, height, width), got {shape}")


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(batch, channels, H, W) -> (batch, num_patches, channels * patch_size**2).

    Patches in row-major order (left to right, then top to bottom); each flattened
    channel first, then row-major inside the patch. Taught in: 08_vision_transformer.
    """
    _check_images(images)
    if not isinstance(patch_size, int) or patch_size < 1:
        raise ValueError(f"patch_size must be a positive int, got {patch_size!r}")
    b, c, h, w = images.shape
    if h % patch_size or w % patch_size:
        raise ValueError(f"image height and width ({h} x {w}) must be divisible by "
                         f"patch_size={patch_size}")
    x = images.reshape(b, c, h // patch_size, patch_size, w // patch_size, patch_size)
    x = x.permute(0, 2, 4, 1, 3, 5)          # (b, rows, cols, c, p, p)
    return x.reshape(b, (h // patch_size) * (w // patch_size), c * patch_size * patch_size)


def unpatchify(patches: torch.Tensor, patch_size: int, height: int, width: int) -> torch.Tensor:
    """The inverse of ``patchify``: (batch, num_patches, channels * p**2) -> (batch,
    channels, height, width). Taught in: 08_vision_transformer."""
    if not torch.is_tensor(patches) or patches.dim() != 3:
        shape = tuple(patches.shape) if torch.is_tensor(patches) else type(patches).__name__
        raise ValueError(f"patches must be a tensor (batch, num_patches, features), got {shape}")
    if height % patch_size or width % patch_size:
        raise ValueError(f"height and width ({height} x {width}) must be divisible by "
                         f"patch_size={patch_size}")
    rows, cols = height // patch_size, width // patch_size
    b, n, f = patches.shape
    if n != rows * cols or f % (patch_size * patch_size):
        raise ValueError(f"{height} x {width} images in {patch_size} x {patch_size} patches need "
                         f"(batch, {rows * cols}, channels * {patch_size * patch_size}) patches, "
                         f"got {tuple(patches.shape)}")
    c = f // (patch_size * patch_size)
    x = patches.reshape(b, rows, cols, c, patch_size, patch_size).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, height, width)


def patch_embedding_as_conv(linear: nn.Linear, patch_size: int, channels: int) -> nn.Conv2d:
    """A ``Conv2d`` (kernel = stride = patch_size) with the weights of a patch embedding
    ``linear`` (channels * p**2 -> d): the same map, written as a strided convolution.
    Taught in: 08_vision_transformer."""
    d, f = linear.weight.shape
    if f != channels * patch_size * patch_size:
        raise ValueError(f"the linear layer takes {f} inputs, {channels} channels of "
                         f"{patch_size} x {patch_size} patches are {channels * patch_size ** 2}")
    conv = nn.Conv2d(channels, d, kernel_size=patch_size, stride=patch_size,
                     bias=linear.bias is not None)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.reshape(d, channels, patch_size, patch_size))
        if linear.bias is not None:
            conv.bias.copy_(linear.bias)
    return conv.to(linear.weight.device)


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


@dataclass
class ViTConfig:
    """Sizes and choices of a Vision Transformer."""
    image_size: int = 8         # height = width, in pixels
    patch_size: int = 2         # (image_size / patch_size)**2 patches
    channels: int = 1
    num_classes: int = 10
    d_model: int = 64           # width of every token vector
    num_heads: int = 4
    num_layers: int = 3
    d_ff: int = 128             # hidden size of the position-wise feed-forward net
    dropout: float = 0.0
    positions: str = "learned"  # 'learned' (ViT) or 'none' (a bag of patches)

    def __post_init__(self):
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size={self.image_size} must be divisible by patch_size={self.patch_size}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}")
        if self.positions not in ("learned", "none"):
            raise ValueError(f"positions must be 'learned' or 'none', got {self.positions!r}")

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


class ViT(nn.Module):
    """Patches -> linear embedding -> [class token; patches] + positions -> pre-LN encoder
    -> LayerNorm -> linear classifier on the class token. Taught in: 08_vision_transformer.

    ``forward(images (batch, channels, H, W))`` returns logits (batch, num_classes);
    ``forward(images, return_attention=True)`` returns ``(logits, weights)`` with one
    (batch, heads, tokens, tokens) tensor per layer (token 0 is the class token).
    """

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.cfg = cfg
        self.patch_embed = nn.Linear(cfg.channels * cfg.patch_size ** 2, cfg.d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.pos_embed = (nn.Parameter(torch.zeros(1, cfg.num_patches + 1, cfg.d_model))
                          if cfg.positions == "learned" else None)
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(EncoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout,
                                                 norm_first=True) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.num_classes)
        nn.init.normal_(self.cls_token, std=0.02)
        if self.pos_embed is not None:
            nn.init.normal_(self.pos_embed, std=0.02)

    def check_images(self, images: torch.Tensor) -> None:
        """A ValueError naming the expected and the given shape unless ``images`` is
        (batch, channels, image_size, image_size)."""
        _check_images(images)
        c, s = self.cfg.channels, self.cfg.image_size
        if tuple(images.shape[1:]) != (c, s, s):
            raise ValueError(f"this ViT takes images (batch, {c}, {s}, {s}), got {tuple(images.shape)}")

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """The encoder's input (batch, 1 + num_patches, d_model): the class token, then the
        embedded patches, plus the position embeddings."""
        self.check_images(images)
        tokens = self.patch_embed(patchify(images, self.cfg.patch_size))       # (b, n, d)
        cls = self.cls_token.expand(len(images), -1, -1)                        # (b, 1, d)
        x = torch.cat([cls, tokens], dim=1)                                     # (b, 1 + n, d)
        if self.pos_embed is not None:
            x = x + self.pos_embed
        return self.dropout(x)

    def forward(self, images: torch.Tensor, return_attention: bool = False):
        x = self.embed(images)
        weights = []
        for layer in self.layers:
            x, w = layer(x, need_weights=return_attention)
            weights.append(w)
        logits = self.head(self.norm(x[:, 0]))                                  # class token only
        return (logits, weights) if return_attention else logits


def attention_rollout(weights: list[torch.Tensor]) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema, 2020): per layer, average the heads, add the
    identity (the residual connection) and renormalise the rows; multiply the layers from
    the first up. ``weights``: one (batch, heads, t, t) tensor per layer; returns (batch,
    t, t), rows summing to 1. Taught in: 08_vision_transformer."""
    if not weights:
        raise ValueError("attention_rollout needs the weights of at least one layer, got none")
    rollout = None
    for w in weights:
        if w is None or w.dim() != 4 or w.shape[-1] != w.shape[-2]:
            shape = None if w is None else tuple(w.shape)
            raise ValueError(f"each layer's weights must be (batch, heads, t, t), got {shape}")
        a = w.mean(1) + torch.eye(w.shape[-1], device=w.device)               # (b, t, t)
        a = a / a.sum(-1, keepdim=True)
        rollout = a if rollout is None else a @ rollout
    return rollout


# --------------------------------------------------------------------------------------
# Baselines of the same size class, data augmentation, training
# --------------------------------------------------------------------------------------


def small_cnn(channels: int = 1, num_classes: int = 10, width: int = 32) -> nn.Module:
    """Two 3x3 convolutions (padding 1), each with ReLU and 2x2 max-pooling, then a linear
    classifier: the CNN baseline of 08 (for 8x8 images)."""
    return nn.Sequential(
        nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 8x8 -> 4x4
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),    # 4x4 -> 2x2
        nn.Flatten(), nn.Linear(2 * width * 4, num_classes))


def mlp(image_size: int = 8, channels: int = 1, num_classes: int = 10, hidden: int = 256) -> nn.Module:
    """The pixels as one vector, two hidden layers with ReLU: the MLP baseline of 08."""
    return nn.Sequential(nn.Flatten(), nn.Linear(channels * image_size ** 2, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


def random_shift(images: torch.Tensor, max_shift: int = 1, generator: torch.Generator | None = None) -> torch.Tensor:
    """Each image moved by up to ``max_shift`` pixels in each direction (filled with 0):
    the data augmentation of 08. (batch, c, H, W) -> the same shape."""
    _check_images(images)
    b, c, h, w = images.shape
    padded = nn.functional.pad(images, (max_shift,) * 4)
    dy = torch.randint(0, 2 * max_shift + 1, (b,), generator=generator)
    dx = torch.randint(0, 2 * max_shift + 1, (b,), generator=generator)
    # one gather for the whole batch (a slice per image was one small operation each: on a
    # GPU, where each costs a kernel launch, it doubled the time of a training step)
    rows = (dy[:, None] + torch.arange(h)).to(images.device)[:, None, :, None]   # (b, 1, h, 1)
    cols = (dx[:, None] + torch.arange(w)).to(images.device)[:, None, None, :]   # (b, 1, 1, w)
    batch = torch.arange(b, device=images.device)[:, None, None, None]
    channel = torch.arange(c, device=images.device)[None, :, None, None]
    return padded[batch, channel, rows, cols]


@dataclass
class ViTTraining:
    """Model sizes and the training recipe of 08 (every model of its comparisons trains
    with the same steps, batches, optimiser and schedule)."""
    patch_size: int = 2
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 3
    d_ff: int = 128
    dropout: float = 0.0
    batch_size: int = 64
    lr: float = 2e-3            # AdamW peak learning rate, after a linear warm-up
    weight_decay: float = 0.05
    warmup: int = 50
    max_steps: int = 600        # then a cosine decay to 0 over the remaining steps
    augment: bool = False       # random shifts of up to one pixel
    seeds: tuple = (0, 1)       # the comparisons' seeds
    data_sizes: tuple = (100, 300)  # training images in the data-efficiency runs (and all)
    patch_sizes: tuple = (2, 4, 8)  # the patch-size comparison (8: one patch, the whole image)
    caption_steps: int = 500    # the digit captioner of the side note (Adam, lr 3e-3)
    pretrain_steps: int = 1200  # pre-training on the digits 0-4 (shifted copies), section 8
    fine_tune_sizes: tuple = (50, 100)  # images of the digits 5-9 to fine-tune on, section 8

    def model_config(self, **overrides) -> ViTConfig:
        """The ``ViTConfig`` for these sizes (``overrides`` change single fields)."""
        kwargs = dict(patch_size=self.patch_size, d_model=self.d_model, num_heads=self.num_heads,
                      num_layers=self.num_layers, d_ff=self.d_ff, dropout=self.dropout)
        kwargs.update(overrides)
        return ViTConfig(**kwargs)


# Chosen on the validation split (one thread of a 2-core CPU, two seeds): 2 layers of width 48
# reach the accuracy of 3 layers of width 64 (94-96 % after 400 steps at lr 2e-3) in 60 % of
# the time; 300 steps at lr 3e-3 do as well or better (97-98 %) in 75 % of that, and keep the
# CNN and the MLP where they were. Shifted copies (augment) need more steps: in 300 steps the ViT
# has not fit them (08 section 8 trains four times as long).
FAST = ViTTraining(d_model=48, num_heads=4, num_layers=2, d_ff=96, lr=3e-3, warmup=40, max_steps=300)
# The full profile: 3 layers of width 64 for 400 steps (the sizes above), three seeds, the 1x1
# patch, two data sizes (50 and 300 images), section 8's shifted runs of 1,600 steps, the
# pre-training (1,200 steps) and the fine-tuning on 25 and 100 images. On one H200 alone
# (2026-11-26, a plain step about 6 ms: launch-bound, docs/BENCHMARKS.md) the notebook with four
# data sizes, 1,600 pre-training steps and four fine-tuning sizes reached the end of section 8's
# shifted runs in 188 s and would have taken about 5 minutes; those cuts (a third of the steps)
# and a random shift done in one gather (it was a slice per image, which doubled the cost of a
# step on shifted images) bring the estimate to about 3.5 minutes, still over the 3 a notebook may
# take there. On a 2-core CPU the notebook took 957 s before the cuts and 687 s after. It adds
# seeds and sizes, not a better ViT (see the comment above).
FULL = ViTTraining(max_steps=400, seeds=(0, 1, 2), data_sizes=(50, 300),
                   patch_sizes=(1, 2, 4, 8), caption_steps=1000, pretrain_steps=1200,
                   fine_tune_sizes=(25, 100))


def training_recipe(profile: str | None = None) -> ViTTraining:
    """``FAST`` or ``FULL`` for the active profile. Taught in: 08_vision_transformer."""
    return pick(FAST, FULL, profile)


def image_batches(images: torch.Tensor, labels: torch.Tensor, batch_size: int, seed: int = 0,
                  augment: bool = False):
    """``epoch -> list of (images, labels)`` batches, reshuffled every epoch (and shifted
    at random when ``augment``), for ``training.train``."""
    _check_images(images)
    if len(images) != len(labels):
        raise ValueError(f"{len(images)} images but {len(labels)} labels")

    def batches(epoch: int):
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        order = torch.randperm(len(images), generator=g)
        x = random_shift(images[order], generator=g) if augment else images[order]
        y = labels[order]
        return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(x), batch_size)]
    return batches


def classification_loss(model: nn.Module, batch) -> torch.Tensor:
    """Cross-entropy of ``model(images)`` against the labels of an ``(images, labels)`` batch."""
    images, labels = batch
    return nn.functional.cross_entropy(model(images), labels)


def fit(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, recipe: ViTTraining,
        seed: int = 0, max_steps: int | None = None, progress: bool = False):
    """Train ``model`` (already on its device) with AdamW, linear warm-up and cosine decay,
    on (images, labels) for ``max_steps`` (default ``recipe.max_steps``); returns the
    ``History``. Taught in: 08_vision_transformer."""
    from course_utils.schedules import cosine_schedule
    from course_utils.training import train
    steps = cap_steps(recipe.max_steps if max_steps is None else max_steps)
    warmup = min(recipe.warmup, steps - 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    scheduler = cosine_schedule(optimizer, warmup, steps)
    device = check_device(model, what="fit")
    return train(model, image_batches(images.to(device), labels.to(device), recipe.batch_size, seed,
                                      recipe.augment),
                 classification_loss, optimizer, scheduler=scheduler, max_steps=steps,
                 progress=progress, desc="training")


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 512) -> float:
    """Share of ``images`` whose most likely class is the label (model in eval mode)."""
    was_training = model.training
    model.eval()
    device = check_device(model, what="accuracy")
    correct = 0
    for i in range(0, len(images), batch_size):
        logits = model(images[i:i + batch_size].to(device))
        correct += int((logits.argmax(-1).cpu() == labels[i:i + batch_size].cpu()).sum())
    model.train(was_training)
    return correct / len(images)


# --------------------------------------------------------------------------------------
# Show, Attend and Tell in miniature: captioning a strip of digits
# --------------------------------------------------------------------------------------

DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
BOS, EOS = 10, 11           # the caption vocabulary: the ten digits, <bos>, <eos>


def digit_strips(images: torch.Tensor, labels: torch.Tensor, count: int, num_digits: int = 3,
                 seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` strips of ``num_digits`` random digit images side by side, (count, 1, H,
    W * num_digits), and their captions: the digits from left to right, then ``EOS``,
    (count, num_digits + 1). The toy captioning task of 08's side note."""
    _check_images(images)
    g = torch.Generator().manual_seed(seed)
    pick_ = torch.randint(len(images), (count, num_digits), generator=g)
    strips = torch.cat([images[pick_[:, k]] for k in range(num_digits)], dim=3)
    captions = torch.cat([labels[pick_], torch.full((count, 1), EOS, dtype=labels.dtype)], dim=1)
    return strips, captions


class DigitCaptioner(nn.Module):
    """Show, Attend and Tell (Xu et al., 2015) in miniature: a small CNN turns a strip of
    digits into a grid of region vectors; a GRU writes the caption one word at a time,
    reading the regions through 02's additive attention at every word.

    ``forward(images, captions)`` (teacher forcing) returns logits (batch, T, 12) and the
    attention (batch, T, regions); ``greedy(images, steps)`` returns the words and the
    attention. Taught in: 08_vision_transformer."""

    def __init__(self, hidden: int = 64, channels: int = 32):
        super().__init__()
        from course_utils.attention import AdditiveAttention
        self.cnn = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        features = 2 * channels
        self.embed = nn.Embedding(EOS + 1, hidden)
        self.init = nn.Linear(features, hidden)               # first state from the mean region
        self.attention = AdditiveAttention(hidden, features, hidden)
        self.cell = nn.GRUCell(hidden + features, hidden)
        self.out = nn.Linear(hidden + features, EOS + 1)

    def regions(self, images: torch.Tensor) -> torch.Tensor:
        """(batch, 1, H, W) -> region vectors (batch, H/4 * W/4, features), row-major."""
        _check_images(images)
        return self.cnn(images).flatten(2).transpose(1, 2)

    def start(self, images):
        """The regions, their prepared attention keys and the first state (from the mean region)."""
        regions = self.regions(images)
        return regions, self.attention.prepare(regions), torch.tanh(self.init(regions.mean(1)))

    def step(self, prev_words, state, regions, prepared):
        """One word: attend with the current state, update it, score the next word."""
        context, weights = self.attention(state, regions, prepared=prepared)       # (b, f), (b, R)
        state = self.cell(torch.cat([self.embed(prev_words), context], -1), state)
        return self.out(torch.cat([state, context], -1)), state, weights

    def forward(self, images, captions):
        regions, prepared, state = self.start(images)
        prev = torch.cat([torch.full_like(captions[:, :1], BOS), captions[:, :-1]], dim=1)
        logits, weights = [], []
        for t in range(captions.shape[1]):
            step_logits, state, w = self.step(prev[:, t], state, regions, prepared)
            logits.append(step_logits)
            weights.append(w)
        return torch.stack(logits, 1), torch.stack(weights, 1)

    @torch.no_grad()
    def greedy(self, images, steps: int):
        """The most likely word at each of ``steps`` steps: (batch, steps) words and
        (batch, steps, regions) attention."""
        regions, prepared, state = self.start(images)
        prev = torch.full((len(images),), BOS, dtype=torch.long, device=images.device)
        words, weights = [], []
        for _ in range(steps):
            logits, state, w = self.step(prev, state, regions, prepared)
            prev = logits.argmax(-1)
            words.append(prev)
            weights.append(w)
        return torch.stack(words, 1), torch.stack(weights, 1)


def caption_loss(model: DigitCaptioner, batch) -> torch.Tensor:
    """Cross-entropy of every word of a ``(strips, captions)`` batch, teacher forcing."""
    strips, captions = batch
    logits, _ = model(strips, captions)
    return nn.functional.cross_entropy(logits.flatten(0, 1), captions.flatten())

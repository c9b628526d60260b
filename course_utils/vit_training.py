"""Training around 08's Vision Transformer (``course_utils.vit``): the baselines it is
measured against, data augmentation, batches, the training run and accuracy.

- the baselines of the same size class: ``small_cnn`` and ``mlp``;
- ``random_shift`` (the augmentation) and ``image_batches``;
- ``fit`` (AdamW, warm-up and cosine decay, on ``training.train``) with
  ``classification_loss``, and ``accuracy``. They train any image classifier, the ViT and
  the baselines alike.

Taught in: 08_vision_transformer.
"""

from __future__ import annotations

import torch
from torch import nn

from course_utils.data.images import check_images
from course_utils.runtime import check_device


# -- the baselines of the same size class ----------------------------------------------------

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


# -- augmentation, batches, training ---------------------------------------------------------

def random_shift(images: torch.Tensor, max_shift: int = 1, generator: torch.Generator | None = None) -> torch.Tensor:
    """Each image moved by up to ``max_shift`` pixels in each direction (filled with 0):
    the data augmentation of 08. (batch, c, H, W) -> the same shape."""
    check_images(images)
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


def image_batches(images: torch.Tensor, labels: torch.Tensor, batch_size: int, seed: int = 0,
                  augment: bool = False):
    """``epoch -> list of (images, labels)`` batches, reshuffled every epoch (and shifted
    at random when ``augment``), for ``training.train``."""
    check_images(images)
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


def fit(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, recipe,
        seed: int = 0, max_steps: int | None = None, progress: bool = False):
    """Train ``model`` (already on its device) as ``recipe`` (a ``recipes.ViTTraining``) says:
    AdamW, linear warm-up and cosine decay, on (images, labels) for ``max_steps`` (default
    ``recipe.max_steps``); returns the ``History``. Taught in: 08_vision_transformer."""
    from course_utils.schedules import cosine_schedule
    from course_utils.training import train
    steps = recipe.max_steps if max_steps is None else max_steps
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

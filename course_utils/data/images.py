"""Images: scikit-learn's handwritten digits in fixed stratified splits, and the check of an
image batch that 08's models make.

Taught in: 08_vision_transformer. Leaves out: any image larger than 8x8 (nothing downloads).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from course_utils.checks import check_tensor
from course_utils.data.splits import Splits


def check_images(images, what: str = "images") -> None:
    """A clear error unless ``images`` is a 4-D tensor (batch, channels, height, width)."""
    check_tensor(what, images, dtype="float", shape=("batch", "channels", "height", "width"))


class ImageSplit(NamedTuple):
    """Images (count, 1, 8, 8) in [0, 1] and their labels (count,) int64."""
    images: torch.Tensor
    labels: torch.Tensor


def load_digit_images(num_valid: int = 180, num_test: int = 360, seed: int = 0) -> Splits:
    """scikit-learn's 1,797 handwritten digits (8x8 pixels, 17 grey levels, scaled to [0, 1];
    UCI ML, Alpaydin & Kaynak; installed with scikit-learn, nothing downloads) in fixed
    stratified train, valid and test splits (each an ``ImageSplit``). Taught in: 08_vision_transformer."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    if num_valid < 10 or num_test < 10 or num_valid + num_test > len(labels) - 10 * 10:
        raise ValueError(f"num_valid and num_test must be at least 10 each and leave 100 training "
                         f"images of the {len(labels)}, got {num_valid} and {num_test}")
    index = torch.arange(len(labels)).numpy()
    rest, test = train_test_split(index, test_size=num_test, stratify=labels.numpy(), random_state=seed)
    train, valid = train_test_split(rest, test_size=num_valid, stratify=labels.numpy()[rest],
                                    random_state=seed + 1)
    return Splits(*(ImageSplit(images[torch.as_tensor(i)], labels[torch.as_tensor(i)])
                    for i in (train, valid, test)))

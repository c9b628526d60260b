"""Show, Attend and Tell (Xu et al., 2015) in miniature: captioning a strip of digits, the
side note of 08_vision_transformer. A small CNN turns the strip into a grid of region
vectors; a GRU writes the digits from left to right, reading the regions through 02's
additive attention at every word.

Taught in: 08_vision_transformer.
"""

from __future__ import annotations

import torch
from torch import nn

from course_utils.attention import AdditiveAttention
from course_utils.data.images import check_images


DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
BOS, EOS = 10, 11           # the caption vocabulary: the ten digits, <bos>, <eos>


def digit_strips(images: torch.Tensor, labels: torch.Tensor, count: int, num_digits: int = 3,
                 seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` strips of ``num_digits`` random digit images side by side, (count, 1, H,
    W * num_digits), and their captions: the digits from left to right, then ``EOS``,
    (count, num_digits + 1). The toy captioning task of 08's side note."""
    check_images(images)
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
        check_images(images)
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

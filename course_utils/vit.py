"""The Vision Transformer (Dosovitskiy et al., 2021) on small images, from the course's layers.

Taught in: 08_vision_transformer. Built from ``course_utils.transformer.EncoderLayer``
(pre-LN, 04). Around it: ``course_utils.vit_training`` (the CNN and MLP baselines, the
random shifts, batches, ``fit`` and ``accuracy``) and ``course_utils.captioning`` (the side
note's Show, Attend and Tell on strips of digits). An image is cut into patches, each patch
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

from course_utils.checks import check_config, check_positive, check_tensor
from course_utils.data.images import check_images
from course_utils.transformer import EncoderLayer


# --------------------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------------------


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(batch, channels, H, W) -> (batch, num_patches, channels * patch_size**2).

    Patches in row-major order (left to right, then top to bottom); each flattened
    channel first, then row-major inside the patch. Taught in: 08_vision_transformer.
    """
    check_images(images)
    check_positive("patch_size", patch_size)
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
    check_tensor("patches", patches, shape=("batch", "num_patches", "features"))
    for name, value in (("patch_size", patch_size), ("height", height), ("width", width)):
        check_positive(name, value)
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
        check_config(self, positive=("image_size", "patch_size", "channels", "num_classes", "d_model",
                                     "num_heads", "num_layers", "d_ff"),
                     divides=[("image_size", "patch_size"), ("d_model", "num_heads")], fractions=("dropout",))
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
        check_images(images)
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
        if w is None:
            raise ValueError("each layer's weights must be (batch, heads, t, t), got None: run the "
                             "model with return_attention=True")
        check_tensor("weights (one layer's)", w, dtype="float", shape=("batch", "heads", "t", "t"), sizes={})
        a = w.mean(1) + torch.eye(w.shape[-1], device=w.device)               # (b, t, t)
        a = a / a.sum(-1, keepdim=True)
        rollout = a if rollout is None else a @ rollout
    return rollout

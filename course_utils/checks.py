"""Checks at the boundary: what the package says when a public function gets the wrong thing.

Every public function that takes tensors checks them here, and every config checks its
sizes here, so that a typo meets one kind of sentence: the argument's name, what was
expected and what was given ("src_lengths must have shape (batch,) with batch = 4 (from
src), got (3,)"). The checks read shapes and dtypes only, never tensor values: they
cost nothing on a GPU (no waiting for the device) and may sit on every forward pass.

Used by every module of the package; taught nowhere (read it if an error puzzles you).
"""

from __future__ import annotations

import torch

# dtype kinds a check may ask for; a torch.dtype asks for exactly that dtype
_KINDS = {
    "int": (lambda dt: not dt.is_floating_point and not dt.is_complex and dt != torch.bool,
            "an integer dtype (token ids: torch.long)"),
    "float": (lambda dt: dt.is_floating_point, "a floating-point dtype (torch.float32)"),
    "bool": (lambda dt: dt == torch.bool, "torch.bool (True = keep)"),
}


def _shape_text(shape) -> str:
    parts = ["..." if s is Ellipsis else "*" if s is None else str(s) for s in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def check_tensor(name: str, value, *, dims=None, dtype=None, shape=None, sizes=None) -> torch.Tensor:
    """Raise a TypeError or ValueError naming ``name`` unless ``value`` is a tensor with
    ``dims`` dimensions (an int, or a tuple of the counts allowed), of ``dtype`` ('int',
    'float', 'bool' or a torch.dtype), and with sizes matching ``shape``.

    ``shape`` is a tuple whose entries are an int (that size), None (any size) or a name
    ("batch"); a leading ``...`` allows any dimensions before the rest. A name is a size
    that must agree between arguments: pass the same ``sizes`` dict to each check, and the
    first argument that has the name fixes its value. Returns ``value``."""
    if not torch.is_tensor(value):
        raise TypeError(f"{name} must be a torch tensor, got {type(value).__name__}"
                        + (" (make one with torch.tensor(...))" if isinstance(value, (list, tuple)) else ""))
    if dims is not None:
        allowed = (dims,) if isinstance(dims, int) else tuple(dims)
        if value.dim() not in allowed:
            wanted = " or ".join(str(d) for d in allowed)
            raise ValueError(f"{name} must have {wanted} dimension{'' if allowed == (1,) else 's'}, got shape {tuple(value.shape)}")
    if dtype is not None:
        ok, wanted = (_KINDS[dtype] if isinstance(dtype, str)
                      else ((lambda dt: dt == dtype), str(dtype)))
        if not ok(value.dtype):
            raise TypeError(f"{name} must have {wanted}, got {value.dtype}")
    if shape is not None:
        _check_shape(name, value, tuple(shape), {} if sizes is None else sizes)
    return value


def _check_shape(name, value, shape, sizes) -> None:
    open_front = bool(shape) and shape[0] is Ellipsis
    spec = shape[1:] if open_front else shape
    got = tuple(value.shape)
    if (len(got) < len(spec)) if open_front else (len(got) != len(spec)):
        raise ValueError(f"{name} must have shape {_shape_text(shape)}, got {got}")
    for want, size in zip(spec, got[len(got) - len(spec):]):
        if want is None:
            continue
        if isinstance(want, str):
            if want not in sizes:
                sizes[want] = (size, name)
                continue
            fixed, source = sizes[want]
            if size != fixed:
                raise ValueError(f"{name} must have shape {_shape_text(shape)} with {want} = {fixed} "
                                 f"(from {source}), got {got}")
        elif size != want:
            raise ValueError(f"{name} must have shape {_shape_text(shape)}, got {got}")


def check_positive(name: str, value, *, integer: bool = True):
    """Raise unless ``value`` is a positive int (``integer=False``: a positive number)."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{name} must be a positive {'int' if integer else 'number'}, "
                        f"got {type(value).__name__} {value!r}")
    if not value > 0:
        raise ValueError(f"{name} must be a positive {'int' if integer else 'number'}, got {value!r}")
    return value


def check_list(name: str, value, what: str = "items"):
    """Raise unless ``value`` is a list-like of ``what`` (a str or a tensor is not one: a
    loop over it would walk its characters or rows). Returns it as a list."""
    if isinstance(value, (str, bytes)) or torch.is_tensor(value) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a list of {what}, got a {type(value).__name__}"
                        + (f" (wrap one in a list: [{value!r}])" if isinstance(value, str) else ""))
    return list(value)


def check_config(config, *, positive=(), divides=(), fractions=()) -> None:
    """A config's own check (called from its ``__post_init__``): every field in ``positive``
    a positive int, each ``(width, parts)`` in ``divides`` with ``parts`` dividing ``width``,
    each field in ``fractions`` in [0, 1). Messages name the class and the field."""
    owner = type(config).__name__
    for field in positive:
        check_positive(f"{owner}.{field}", getattr(config, field))
    for width, parts in divides:
        w, p = getattr(config, width), getattr(config, parts)
        if w % p:
            raise ValueError(f"{owner}.{width}={w} must be divisible by {parts}={p}")
    for field in fractions:
        value = getattr(config, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ValueError(f"{owner}.{field} must be a number in [0, 1), got {value!r}")



def check_ids(name: str, ids, vocab_size: int | None = None, *, shape=None, sizes=None) -> torch.Tensor:
    """``check_tensor`` for token ids (an integer dtype), and, on the CPU only, every id in
    0..vocab_size - 1. (On a GPU, reading the ids would make the host wait for the device at
    every step; there an id out of range stops at the embedding.)"""
    check_tensor(name, ids, dtype="int", shape=shape, sizes=sizes)
    if vocab_size is not None and ids.device.type == "cpu" and ids.numel():
        low, high = ids.min().item(), ids.max().item()
        if low < 0 or high >= vocab_size:
            raise ValueError(f"{name}: token id {low if low < 0 else high} is outside the vocabulary "
                             f"0..{vocab_size - 1} (a model and a vocabulary that do not belong together?)")
    return ids

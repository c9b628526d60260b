"""Learning-rate schedules: one module for every model's ``fit`` and every notebook.

Each schedule is a ``torch.optim.lr_scheduler.LambdaLR`` whose factor multiplies the
optimiser's learning rate (so the peak is the rate the optimiser was built with), stepped
once per optimiser step by ``training.train``.

- ``warmup_scheduler``: a linear warm-up, then the inverse square root of the step (the
  Transformer's schedule, ``noam_lr``, with its peak set to the optimiser's rate), with an
  optional linear cool-down to 0 (04 and its assignment, 05's BERT and its fine-tuning);
- ``cosine_schedule``: a linear warm-up, then a cosine decay to 0 (GPT-2 and ViT: 07, 08);
- ``linear_schedule``: a linear warm-up, then a linear decay to a floor (ConvS2S: 03).

Taught in: 04_transformer (the warm-up and ``noam_lr``), 03_convs2s, 07_gpt,
08_vision_transformer.
"""

from __future__ import annotations

import math

import torch


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step >= 1
    (Vaswani et al., 2017, eq. 3). Taught in: 04_transformer."""
    if step < 1 or warmup < 1:
        raise ValueError(f"step and warmup must be >= 1, got step={step}, warmup={warmup}")
    if not d_model > 0:
        raise ValueError(f"d_model must be positive, got {d_model!r}")
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def warmup_scheduler(optimizer: torch.optim.Optimizer, warmup: int, decay_after: int | None = None,
                     total_steps: int | None = None, cooldown: int = 0):
    """LambdaLR: linear warm-up to the optimiser's lr over ``warmup`` steps, then
    lr * sqrt(decay_after / step) once past ``decay_after`` (default: ``warmup``, which is
    the Noam schedule with its peak set to lr). ``warmup=0``: full lr from the first step.
    With ``cooldown`` > 0 the rate also falls linearly to 0 over the last ``cooldown`` of
    ``total_steps``. Taught in: 04_transformer."""
    _check_optimizer(optimizer)
    for name, value in (("warmup", warmup), ("cooldown", cooldown)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int >= 0 (steps), got {type(value).__name__} {value!r}")
        if value < 0:
            raise ValueError(f"{name} must be an int >= 0 (steps), got {value!r}")
    if cooldown and not total_steps:
        raise ValueError("a cooldown needs total_steps")
    if cooldown and cooldown > total_steps:
        raise ValueError(f"cooldown={cooldown} must be at most total_steps={total_steps}")
    decay_after = warmup if decay_after is None else decay_after

    def factor(i: int) -> float:  # i = steps done so far (0 before the first step)
        step = i + 1
        ramp = min(1.0, step / warmup) if warmup else 1.0
        decay = math.sqrt(decay_after / step) if decay_after and step > decay_after else 1.0
        cool = min(1.0, max(0.0, (total_steps - i) / cooldown)) if cooldown else 1.0  # 0 past the end
        return ramp * decay * cool

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def cosine_schedule(optimizer: torch.optim.Optimizer, warmup: int, steps: int):
    """LambdaLR: linear warm-up to the optimiser's lr over ``warmup`` steps, then a cosine
    decay to 0 at ``steps`` (the schedule of ViT and GPT-2). Taught in: 07_gpt, 08_vision_transformer."""
    _check_optimizer(optimizer)
    if not 0 <= warmup < steps:
        raise ValueError(f"need 0 <= warmup < steps, got warmup={warmup}, steps={steps}")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(steps - warmup, 1)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def linear_factor(step: int, warmup: int, steps: int, final: float) -> float:
    """The rate at optimiser step ``step`` (0-based) as a fraction of the peak: a linear
    warm-up over ``warmup`` steps (0: none), times a linear decay from 1 towards 0 over
    ``steps``, never below ``final`` (1.0: constant). Taught in: 03_convs2s."""
    if warmup < 0 or steps < 1 or not 0 < final <= 1:
        raise ValueError(f"need warmup >= 0, steps >= 1 and 0 < final <= 1, got warmup={warmup}, "
                         f"steps={steps}, final={final}")
    warm = min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
    return warm * max(final, 1.0 - step / steps)


def linear_schedule(optimizer: torch.optim.Optimizer, warmup: int, steps: int, final: float):
    """LambdaLR of ``linear_factor`` (ConvS2S's schedule). Taught in: 03_convs2s."""
    _check_optimizer(optimizer)
    linear_factor(0, warmup, steps, final)   # the arguments checked once, here
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: linear_factor(step, warmup, steps, final))

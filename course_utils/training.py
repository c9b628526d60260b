"""One training loop for every notebook, and checkpoints that refuse the wrong model.

Taught in: 01_seq2seq_bottleneck (used by every later notebook).
Leaves out: distributed training, gradient accumulation, early stopping (a
``valid_fn`` plus ``max_steps`` covers what the notebooks need).

The loop is model-agnostic: a notebook passes ``loss_fn(model, batch, teacher_forcing)``
that returns the mean loss of one batch (a scalar tensor). The loop does the rest:
device moves, ``zero_grad``/``backward``/clipping/``step``, the learning-rate
schedule, a tqdm progress bar (notebook-aware), loss history, periodic validation, a
teacher-forcing ratio that may change with the step, and an optional time budget.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import torch
from torch import nn
from course_utils.files import write_atomic

TeacherForcing = float | Callable[[int, int], float]


@dataclass
class History:
    """What happened during training: one entry per optimiser step, plus validation rows."""
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)  # after each step's scheduler update: the next step's rate
    grad_norms: list[float] = field(default_factory=list)
    teacher_forcing: list[float] = field(default_factory=list)
    valid: list[dict] = field(default_factory=list)  # {"step": int, **valid_fn(model)}
    tokens: int = 0  # target tokens seen (batches with a ``num_tokens`` attribute)
    seconds: float = 0.0  # wall time inside train()
    valid_seconds: float = 0.0  # of which spent in valid_fn
    stopped_by: str = ""  # "steps", "epochs" or "time budget"

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def smoothed(self, window: int = 50) -> list[float]:
        """Running mean of the loss over the last ``window`` steps."""
        out, total = [], 0.0
        for i, loss in enumerate(self.losses):
            total += loss
            if i >= window:
                total -= self.losses[i - window]
            out.append(total / min(i + 1, window))
        return out

    @property
    def train_seconds(self) -> float:
        """Wall time spent training, validation excluded."""
        return self.seconds - self.valid_seconds

    @property
    def tokens_per_second(self) -> float:
        """Training throughput in target tokens per second (validation excluded)."""
        return self.tokens / self.train_seconds if self.train_seconds > 0 else float("nan")

    def extend(self, other: "History") -> "History":
        """Append a later run (steps continue from this one)."""
        offset = self.steps[-1] if self.steps else 0
        self.steps += [offset + s for s in other.steps]
        self.losses += other.losses
        self.lrs += other.lrs
        self.grad_norms += other.grad_norms
        self.teacher_forcing += other.teacher_forcing
        self.valid += [{**row, "step": offset + row["step"]} for row in other.valid]
        self.tokens += other.tokens
        self.seconds += other.seconds
        self.valid_seconds += other.valid_seconds
        self.stopped_by = other.stopped_by
        return self


#: how often ``train`` reads the loss back from the device (and checks that it is finite)
LOG_EVERY = 25


def _progress(total: int | None, desc: str, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, disable=not enabled, leave=True,
                mininterval=0.5, dynamic_ncols=True)


def to_device(batch, device):
    """A batch (a tensor, a ``Batch``, or lists, tuples and dicts of them) moved to ``device``."""
    if hasattr(batch, "to"):
        return batch.to(device)
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, Mapping):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


@torch.no_grad()
def predictions(model: nn.Module, batches: Iterable, pick: Callable, what: str = "predict"):
    """``pick(model, batch) -> (predicted, true)`` over ``batches`` (each moved to the model's
    device), in eval mode, the model's mode restored afterwards; both concatenated on the CPU.
    The loop under every classifier's ``predict`` (``bert_training``, ``gpt_training``)."""
    from course_utils.runtime import check_device
    device = check_device(model, what=what)
    was_training = model.training
    model.eval()
    predicted, true = [], []
    try:
        for batch in batches:
            p, t = pick(model, to_device(batch, device))
            predicted.append(p.cpu())
            true.append(t.cpu())
    finally:
        model.train(was_training)
    if not predicted:
        raise ValueError(f"{what}: no batches to predict")
    return torch.cat(predicted), torch.cat(true)


def _check_train_arguments(model, batches, loss_fn, optimizer, clip_norm, num_epochs, only_epochs) -> None:
    """The mistakes that make ``train`` fail late, hang, or train nothing without a word."""
    import inspect
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a function (model, batch) -> scalar loss, got {type(loss_fn).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__} "
                        "(torch.optim.Adam(model.parameters(), lr=...))")
    # a stale optimizer (the model cell re-run, the optimizer cell not) steps other tensors
    own = {id(p) for p in model.parameters()}
    if not any(id(p) in own for group in optimizer.param_groups for p in group["params"]):
        raise ValueError("optimizer holds none of model's parameters: was it made for an earlier "
                         "model (a cell re-run)? Make it again: torch.optim.Adam(model.parameters(), ...)")
    if clip_norm is not None and (isinstance(clip_norm, bool) or not isinstance(clip_norm, (int, float))
                                  or not clip_norm > 0):
        raise ValueError(f"clip_norm must be a positive number or None (no clipping), got {clip_norm!r}")
    if isinstance(batches, (str, bytes, Mapping)) or torch.is_tensor(batches):
        raise TypeError(f"batches must be a list of batches or a function epoch -> batches, got a "
                        f"{type(batches).__name__}")
    if callable(batches):
        try:
            inspect.signature(batches).bind(0)
        except TypeError:
            raise TypeError("batches must be a function of one argument (the epoch) returning that "
                            "epoch's batches, or a list; the function given takes no epoch") from None
        except ValueError:  # a builtin without a signature: let it be
            pass
        if only_epochs and inspect.isgeneratorfunction(batches):
            raise ValueError("batches is a generator function and only num_epochs is given: train "
                             "cannot know that an epoch ends; give max_steps or time_budget too")
    elif not hasattr(batches, "__iter__"):
        raise TypeError(f"batches must be a list of batches or a function epoch -> batches, got "
                        f"{type(batches).__name__}")
    elif iter(batches) is batches and num_epochs is not None:
        raise TypeError(f"batches is a one-shot iterator ({type(batches).__name__}): the first epoch "
                        "uses it up; with num_epochs pass a list, or a function epoch -> batches")


def train(model: nn.Module, batches: Iterable | Callable[[int], Iterable],
          loss_fn: Callable[..., torch.Tensor], optimizer: torch.optim.Optimizer, *,
          num_epochs: int | None = None, max_steps: int | None = None,
          clip_norm: float | None = 1.0, scheduler=None,
          teacher_forcing: TeacherForcing | None = None,
          time_budget: float | None = None,
          valid_fn: Callable[[nn.Module], dict] | None = None, valid_every: int = 0,
          device: torch.device | str | None = None, progress: bool = True,
          desc: str = "training") -> History:
    """Train ``model`` and return its ``History``. Taught in: 01_seq2seq_bottleneck.

    ``batches``: a list of batches (reused every epoch) or ``epoch -> iterable`` (to
    reshuffle). ``loss_fn(model, batch)`` or, with ``teacher_forcing``,
    ``loss_fn(model, batch, ratio)`` returns a scalar loss. ``teacher_forcing``: a ratio,
    or ``(step, total_steps) -> ratio``. Stops after ``max_steps`` optimiser steps,
    ``num_epochs`` passes, or ``time_budget`` seconds, whichever comes first (at least one
    of them must be given). ``valid_fn(model) -> dict`` runs every ``valid_every`` steps
    and at the end, in eval mode under ``torch.no_grad()``.
    """
    if num_epochs is None and max_steps is None and time_budget is None:
        raise ValueError("give num_epochs, max_steps or time_budget, otherwise training never stops")
    for name, value in (("num_epochs", num_epochs), ("max_steps", max_steps)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive int or None, got {value!r}")
    if time_budget is not None and time_budget <= 0:
        raise ValueError(f"time_budget must be positive seconds or None, got {time_budget!r}")
    _check_train_arguments(model, batches, loss_fn, optimizer, clip_norm, num_epochs,
                           only_epochs=max_steps is None and time_budget is None)
    from course_utils.runtime import check_device  # a model left on the CPU beside a GPU stops here
    model_device = check_device(model, what="train")
    device = torch.device(device) if device is not None else model_device
    epoch_batches = batches if callable(batches) else (lambda epoch: batches)

    total = max_steps
    if total is None and num_epochs is not None and not callable(batches):
        total = num_epochs * len(batches)
    history = History()
    start = time.perf_counter()
    bar = _progress(total, desc, progress)

    def validate(step):
        if valid_fn is None:
            return
        was_training = model.training
        model.eval()
        started = time.perf_counter()
        with torch.no_grad():
            row = {"step": step, **valid_fn(model)}
        history.valid_seconds += time.perf_counter() - started
        model.train(was_training)
        history.valid.append(row)
        bar.set_postfix({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})

    # The loss and the gradient norm stay on the device until every LOG_EVERY steps (and
    # before validation and at the end): reading a number from a GPU waits for all its queued
    # work, so reading two per step would make every step wait for the host (a sync).
    pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def flush():
        if not pending:
            return
        first = len(history.losses)
        values = torch.stack([torch.stack((loss, norm)) for loss, norm in pending]).tolist()  # one sync
        pending.clear()
        for i, (loss_value, norm_value) in enumerate(values):
            if not math.isfinite(loss_value):
                raise FloatingPointError(f"loss became {loss_value} at step {first + i}; "
                                         "lower the learning rate or check the masks")
            history.losses.append(loss_value)
            history.grad_norms.append(norm_value)
        bar.set_postfix(loss=f"{history.smoothed(LOG_EVERY)[-1]:.3f}")

    step, epoch = 0, 0
    model.train()
    no_norm = None
    try:
        while True:
            if num_epochs is not None and epoch >= num_epochs:
                history.stopped_by = "epochs"
                break
            seen = 0
            for seen, batch in enumerate(epoch_batches(epoch), start=1):
                if max_steps is not None and step >= max_steps:
                    break
                if time_budget is not None and time.perf_counter() - start >= time_budget:
                    break
                history.tokens += int(getattr(batch, "num_tokens", 0))  # counted where the batch was made
                batch = to_device(batch, device)
                if teacher_forcing is None:
                    ratio, loss = float("nan"), loss_fn(model, batch)
                else:
                    ratio = teacher_forcing(step, total or 0) if callable(teacher_forcing) \
                        else float(teacher_forcing)
                    loss = loss_fn(model, batch, ratio)
                if not torch.is_tensor(loss) or loss.dim() != 0:
                    raise TypeError(f"loss_fn must return a scalar tensor, got "
                                    f"{type(loss).__name__} {getattr(loss, 'shape', '')}")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if clip_norm is not None:
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                else:
                    if no_norm is None:
                        no_norm = torch.tensor(float("nan"), device=loss.device)
                    grad_norm = no_norm
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                step += 1
                pending.append((loss.detach().float(), grad_norm.detach().float().to(loss.device)))
                history.steps.append(step)
                history.lrs.append(optimizer.param_groups[0]["lr"])
                history.teacher_forcing.append(ratio)
                bar.update(1)
                if step == 1 or step % LOG_EVERY == 0:  # the first step too: a bad loss shows at once
                    flush()
                if valid_every and step % valid_every == 0:
                    flush()
                    validate(step)
            else:
                if seen == 0:
                    raise ValueError(f"epoch {epoch} produced no batches")
                epoch += 1
                continue
            history.stopped_by = "steps" if max_steps is not None and step >= max_steps else "time budget"
            break
        flush()
    finally:
        bar.close()
    if valid_fn is not None and (not history.valid or history.valid[-1]["step"] != step):
        validate(step)
    history.seconds = time.perf_counter() - start
    return history


def linear_decay(start: float = 1.0, end: float = 0.0) -> Callable[[int, int], float]:
    """Teacher-forcing schedule going linearly from ``start`` to ``end`` over training."""
    def ratio(step: int, total: int) -> float:
        return start if total <= 1 else start + (end - start) * min(step / (total - 1), 1.0)
    return ratio


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------

class CheckpointMismatchError(ValueError):
    """A checkpoint was made for a different model configuration."""


def _config_dict(config) -> dict:
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dataclass instance or a dict, got {type(config).__name__}")
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in config.items()}


def _with_defaults(config, found: Mapping) -> dict:
    """A checkpoint's config with the fields it predates set to the config class's defaults:
    a field added to a dataclass later (with a default) does not invalidate older checkpoints."""
    if not (dataclasses.is_dataclass(config) and not isinstance(config, type)):
        return dict(found)
    defaults = {f.name: f.default for f in dataclasses.fields(config) if f.default is not dataclasses.MISSING}
    return _config_dict({**{k: v for k, v in defaults.items() if k not in found}, **found})


def save_checkpoint(path: str | Path, model: nn.Module, config, optimizer=None,
                    extra: Mapping[str, Any] | None = None, half: bool = False) -> Path:
    """Write model (and optimiser) state with its config, atomically: a crash never
    leaves half a file. ``extra`` holds plain data (vocabulary lists, metrics). ``half``:
    floating-point weights stored as float16 (half the file, for a shipped model;
    ``load_checkpoint`` copies them back into the model's own dtype).
    Taught in: 01_seq2seq_bottleneck."""
    weights = model.state_dict()
    if half:
        weights = {k: v.detach().to("cpu", torch.float16) if v.is_floating_point() else v for k, v in weights.items()}
    state = {"config": _config_dict(config), "model": weights,
             "optimizer": optimizer.state_dict() if optimizer is not None else None,
             "extra": dict(extra or {}), "torch_version": str(torch.__version__)}
    return write_atomic(path, lambda f: torch.save(state, f))


def _read_checkpoint(path: Path, map_location) -> dict:
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}; train the model first "
                                "(or set skip_training = False)")
    return torch.load(path, map_location=map_location, weights_only=True)


def load_checkpoint(path: str | Path, model: nn.Module, config, optimizer=None,
                    map_location="cpu") -> dict:
    """Load a checkpoint into ``model`` (and ``optimizer``) with ``weights_only=True``
    after checking it was made with the same ``config``; returns its ``extra``."""
    path = Path(path)
    state = _read_checkpoint(path, map_location)
    expected, found = _config_dict(config), _with_defaults(config, state.get("config", {}))
    if expected != found:
        keys = sorted(set(expected) | set(found))
        missing = object()
        diff = [f"  {k}: checkpoint has {found.get(k, '<missing>')!r}, model has "
                f"{expected.get(k, '<missing>')!r}" for k in keys if expected.get(k, missing) != found.get(k, missing)]
        raise CheckpointMismatchError(f"{path} was saved with another configuration:\n"
                                      + "\n".join(diff)
                                      + "\nretrain, or build the model with the checkpoint's config")
    model.load_state_dict(state["model"])
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    return state.get("extra", {})


def load_model(path: str | Path, build: Callable[[dict], nn.Module]) -> tuple[nn.Module, dict]:
    """The model a checkpoint of ``save_checkpoint`` holds, rebuilt from the config saved
    with it: ``build(config)`` (the config as a dict) makes the model, on the CPU, and the
    weights are loaded into it (``weights_only=True``; float16 weights come back in the
    model's own dtype). Returns ``(model, extra)``: how a shipped model, whose config comes
    with it, is loaded (``bert_training.load_pretrained``, ``gpt_training.load_pretrained``)."""
    path = Path(path)
    state = _read_checkpoint(path, "cpu")
    model = build(dict(state["config"]))
    model.load_state_dict(state["model"])
    return model, state.get("extra", {})


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def perplexity(loss: float) -> float:
    """exp(loss), capped so that a diverged loss prints as inf rather than overflowing."""
    return math.exp(loss) if loss < 700 else float("inf")

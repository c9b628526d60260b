"""Handed-in checkpoints: read without running code in them (``weights_only``), and told
apart from the reference one. A copy of the reference weights (the same bytes, a re-saved
copy, noise added: ``same_weights``) or a model that computes the reference model's function
(units or heads permuted, a temperature: ``output_distance``) scores 0 on the questions that
grade the student's own trained model.
"""
from __future__ import annotations

import hashlib
import threading
from pathlib import Path

NEAR_REFERENCE = 1e-3  # relative distance of weights below which a checkpoint is the reference one


def same_weights(theirs: Path, ref: Path) -> bool:
    """Whether a handed-in checkpoint is the reference one: the same bytes, or weights under
    the same names within ``NEAR_REFERENCE`` of it (relative L2 distance over all of them:
    a re-saved copy, or a copy with noise added). Read with ``weights_only``: no code runs."""
    if (theirs.stat().st_size == ref.stat().st_size
            and hashlib.sha256(theirs.read_bytes()).digest() == hashlib.sha256(ref.read_bytes()).digest()):
        return True
    import torch
    try:
        a = torch.load(theirs, map_location="cpu", weights_only=True)
        b = torch.load(ref, map_location="cpu", weights_only=True)
        ta, tb = (x.get("model") if isinstance(x, dict) else None for x in (a, b))
        if not isinstance(ta, dict) or not isinstance(tb, dict):
            return False
        names = [k for k, v in tb.items() if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() > 1]
        if not names or not all(isinstance(ta.get(k), torch.Tensor) and ta[k].shape == tb[k].shape for k in names):
            return False
        diff = sum(float((ta[k].double() - tb[k].double()).pow(2).sum()) for k in names) ** 0.5
        size = sum(float(tb[k].double().pow(2).sum()) for k in names) ** 0.5
        return diff <= NEAR_REFERENCE * size
    except Exception:  # noqa: BLE001  (not a checkpoint at all: its question says so)
        return False


NEAR_REFERENCE_OUTPUTS = 0.035  # output distance (see output_distance) below which a model is the reference one


def _floats(value) -> list:
    """The floating-point tensors in an output (a tensor, or tuples, lists and dicts of them), in
    order, each centred over its last dimension (logits: a softmax ignores a constant added to a
    row, and a1's rows share an offset of about -15 that would hide every difference)."""
    import torch
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            return []
        x = value.double()
        if x.dim() >= 1 and x.shape[-1] > 1:
            x = x - x.mean(-1, keepdim=True)
        return [x.reshape(-1)]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _floats(v)]
    return []


def output_distance(theirs, ref) -> float:
    """mean |s * theirs - ref| / mean |ref| over the floating-point tensors of two outputs of
    the same calls, centred per row, with ``s`` the least-squares scale (a copy whose logits
    are only multiplied, a temperature, is as near as the copy itself); inf when they do not
    line up."""
    import torch
    a, b = _floats(theirs), _floats(ref)
    if not b or len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return float("inf")
    a, b = torch.cat(a), torch.cat(b)
    size = b.abs().mean().item()
    if not size > 0 or not torch.isfinite(a).all():
        return float("inf")
    s = float((a * b).sum() / (a * a).sum()) if float((a * a).sum()) > 0 else 0.0
    return (s * a - b).abs().mean().item() / size


MODEL_SAMPLE = 20_000  # numbers kept per trained-model question to compare two students' models by


def output_sample(value, size: int = MODEL_SAMPLE):
    """The floats of an output as ``output_distance`` compares them (centred per row), at most
    ``size`` of them taken at a fixed stride, as float32 (what is kept of each student's trained
    model to compare it with the classmates'); None without any."""
    import torch
    parts = _floats(value)
    if not parts:
        return None
    x = torch.cat(parts)
    if x.numel() > size:
        x = x[torch.linspace(0, x.numel() - 1, size, dtype=torch.float64).long()]
    return x.float()


def models_distance(a, b) -> float:
    """``output_distance`` of two students' ``output_sample``s, the larger of both directions
    (each model near the other); inf when they do not line up."""
    if a is None or b is None or a.shape != b.shape:
        return float("inf")
    return max(output_distance(a, b), output_distance(b, a))


_reference_outputs: dict = {}
_reference_outputs_lock = threading.Lock()


def reference_outputs(question, reference: Path) -> list:
    """What the reference class holding the reference weights (``reference``, a checkpoint)
    gives on the trained-model question's calls: computed once per class."""
    import torch
    key = (str(Path(reference).resolve()), id(question))
    with _reference_outputs_lock:
        if key not in _reference_outputs:
            state = torch.load(reference, map_location="cpu", weights_only=True)
            _reference_outputs[key] = question.expected_for(question.calls(state))
        return _reference_outputs[key]


MAX_CHECKPOINT_BYTES = 64 * 2**20   # a submitted checkpoint (the file, and its tensors in all)


def _tensors(value, prefix: str = "", depth: int = 0):
    """(name, tensor) of every tensor in a loaded checkpoint (dicts, lists, tuples walked)."""
    import torch
    if depth > 20:
        raise ValueError("nested too deep")
    if isinstance(value, torch.Tensor):
        yield prefix, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _tensors(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensors(v, f"{prefix}[{i}]", depth + 1)


def fits_reference(theirs: Path, ref: Path) -> tuple[dict | None, str]:
    """The handed-in checkpoint, loaded with ``weights_only`` and memory-mapped (no code in it
    runs, no storage is read yet), if its model's weights have exactly the reference state
    dict's names, shapes and dtypes (any floating-point dtype for a floating-point weight), each a contiguous tensor whose storage holds just its own
    numbers (a view of one number spread over millions, ``expand``, is refused), at most
    ``MAX_CHECKPOINT_BYTES`` in all; else (None, why). Checked before anything else reads it."""
    import torch
    size = theirs.stat().st_size
    if size > MAX_CHECKPOINT_BYTES:
        return None, f"{theirs.name} is {size / 2**20:.0f} MiB (at most {MAX_CHECKPOINT_BYTES // 2**20} MiB)"
    try:
        state = torch.load(theirs, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # noqa: BLE001  (whatever the file holds)
        return None, f"{theirs.name} is not a readable checkpoint ({type(err).__name__})"
    reference = torch.load(ref, map_location="cpu", weights_only=True, mmap=True)
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        return None, f"{theirs.name} is not a checkpoint of the course (save_checkpoint)"
    want = {k: v for k, v in reference["model"].items() if isinstance(v, torch.Tensor)}
    got = state["model"]
    if set(got) != set(want) or not all(isinstance(got[k], torch.Tensor) for k in got):
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        return None, (f"{theirs.name} does not hold the assignment's model: "
                      + (f"missing {missing[:3]}" if missing else "") + (" " if missing and extra else "")
                      + (f"unexpected {extra[:3]}" if extra else "") + ("" if missing or extra else "not tensors"))
    total = 0
    try:
        for name, t in _tensors(state):
            if type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
                return None, f"{theirs.name}: {name} is a {type(t).__name__}, not a plain tensor"
            nbytes = t.untyped_storage().nbytes()
            if not t.is_contiguous() or t.storage_offset() != 0 or nbytes != t.numel() * t.element_size():
                return None, f"{theirs.name}: {name} is not a contiguous tensor of its own (save plain tensors)"
            total += nbytes
            if total > MAX_CHECKPOINT_BYTES:
                return None, f"{theirs.name} holds more than {MAX_CHECKPOINT_BYTES // 2**20} MiB of tensors"
    except ValueError as err:
        return None, f"{theirs.name}: {err}"
    for k, v in want.items():
        # a floating-point weight may be saved in another floating-point dtype (the reference is
        # stored in float16 to stay small; a student's own run saves float32): load_state_dict casts
        same_kind = got[k].dtype == v.dtype or (got[k].dtype.is_floating_point and v.dtype.is_floating_point)
        if got[k].shape != v.shape or not same_kind:
            return None, (f"{theirs.name}: {k} is {got[k].dtype} {tuple(got[k].shape)}, the assignment's model has "
                          f"{v.dtype} {tuple(v.shape)}")
    return state, ""


def student_checkpoint(path: Path, question, ref: Path | None = None) -> tuple[dict | None, str]:
    """The handed-in checkpoint (``fits_reference`` against ``ref`` first, when given), or why
    it cannot be graded."""
    import torch
    if not path.is_file():
        return None, f"no checkpoint {path.name} handed in"
    if ref is not None:
        state, why = fits_reference(path, ref)
        if why:
            return None, why
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001  (whatever the file holds)
            return None, f"{path.name} is not a readable checkpoint ({type(err).__name__})"
    try:
        return state, question.problem(state)
    except Exception as err:  # noqa: BLE001  (a checkpoint made to break the check)
        return None, f"{path.name} is not a checkpoint of this assignment ({type(err).__name__})"

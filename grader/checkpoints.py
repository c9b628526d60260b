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


def student_checkpoint(path: Path, question) -> tuple[dict | None, str]:
    """The handed-in checkpoint, read here with ``weights_only`` (no code in it runs), or
    why it cannot be graded."""
    import torch
    if not path.is_file():
        return None, f"no checkpoint {path.name} handed in"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001  (whatever the file holds)
        return None, f"{path.name} is not a readable checkpoint ({type(err).__name__})"
    try:
        return state, question.problem(state)
    except Exception as err:  # noqa: BLE001  (a checkpoint made to break the check)
        return None, f"{path.name} is not a checkpoint of this assignment ({type(err).__name__})"

"""Train, validation and test splits (``Splits``), what every loader of ``course_utils.data``
returns, and the one place a smoke test cuts a test split (``smoke_capped``).

Taught in: 00_welcome (the data at a glance). Leaves out: how a split is drawn (each loader
draws its own, fixed by its seed).
"""

from __future__ import annotations

from typing import NamedTuple


class Splits(NamedTuple):
    """Train, validation and test pairs."""
    train: list
    valid: list
    test: list


def smoke_capped(splits: Splits) -> Splits:
    """In a smoke test (``runtime.smoke_eval_size``), only the first test pairs; otherwise
    ``splits`` as they are. (Plumbing of ``load_synthetic`` and ``es_en_splits``.)"""
    from course_utils.runtime import smoke_eval_size
    size = smoke_eval_size()
    return splits if size is None else Splits(splits.train, splits.valid, splits.test[:size])

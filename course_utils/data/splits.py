"""Train, validation and test splits (``Splits``), what every loader of ``course_utils.data``
returns.

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

"""Results that later notebooks compare against: each model's scores by source length.

Taught in: 01_seq2seq_bottleneck (written), read by 02-04 for the common comparison plot;
05_bert saves its pre-trained small BERT the same way for 05b_bert_finetuning (``saved_file``).
Leaves out: experiment tracking (runs, hyperparameter search).

A notebook saves its model's numbers with ``save_results`` into
``<results>/<profile>/<name>.json``; a later notebook plots every saved model next to its
own with ``load_results``. Numbers are rounded to 4 decimals so that a re-run on another
machine rarely changes the file. Where ``<results>`` is:

- ``$COURSE_RESULTS_DIR`` when it is set (``make notebooks`` sets it to the committed
  ``results/``, the tests to a copy of it, ``make full`` to its build folder);
- otherwise ``build/results/``, which git ignores: a student running a notebook never
  changes a tracked file (no conflict at the next ``git pull``), and ``load_results`` reads
  a model from there if this machine trained it, else the committed ``results/``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Sequence

from course_utils.runtime import profile as active_profile
from course_utils.files import write_atomic


#: the committed results (refreshed by ``make notebooks``) and where a notebook run saves
#: by default (ignored by git)
_ROOT = Path(__file__).resolve().parent.parent
SHIPPED = _ROOT / "results"
LOCAL = _ROOT / "build" / "results"


def results_dir(profile: str | None = None) -> Path:
    """Folder that ``save_results`` writes for a profile: ``$COURSE_RESULTS_DIR/<profile>``
    if set, else ``build/results/<profile>`` (never the committed ``results/``)."""
    root = os.environ.get("COURSE_RESULTS_DIR")
    return (Path(root) if root else LOCAL) / (profile or active_profile())


def _search_dirs(profile: str | None) -> list[Path]:
    """Where ``load_results`` looks, first match wins: the folder ``save_results`` writes,
    then, without ``$COURSE_RESULTS_DIR``, the committed results."""
    first = results_dir(profile)
    if os.environ.get("COURSE_RESULTS_DIR"):
        return [first]
    return [first, SHIPPED / (profile or active_profile())]


def _rounded(value):
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def save_results(name: str, by_length: Sequence[dict], profile: str | None = None, **info) -> Path:
    """Save a model's ``scores_by_length`` rows plus any plain ``info`` (bleu, exact_match,
    parameters, steps, ...) as ``results/<profile>/<name>.json``."""
    if not name or any(c in name for c in "/\\ "):
        raise ValueError(f"name must be a short file name without spaces or slashes, got {name!r}")
    for row in by_length:
        missing = {"bucket", "count", "bleu", "exact_match"} - set(row)
        if missing:
            raise ValueError(f"each by_length row needs {sorted(missing)}; got keys {sorted(row)}")
    record = {"name": name, "profile": profile or active_profile(), **_rounded(info),
              "by_length": _rounded(list(by_length))}
    return write_atomic(results_dir(profile) / f"{name}.json",
                        (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))


def saved_file(name: str, profile: str | None = None) -> Path | None:
    """A file a notebook saved with a name of its own (05_bert's pre-trained small BERT, a
    checkpoint): where ``save_results`` writes (``results_dir(profile) / name``), then,
    without ``$COURSE_RESULTS_DIR``, the committed ``results/``; ``None`` if neither has it.
    Taught in: 05_bert (written), read by 05b_bert_finetuning."""
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise ValueError(f"name must be a file name without slashes, got {name!r}")
    return _first(name, profile)


def _first(name: str, profile: str | None) -> Path | None:
    """``name`` in the first of ``_search_dirs`` that has it as a file, else ``None``."""
    return next((f / name for f in _search_dirs(profile) if (f / name).is_file()), None)


def load_results(names: Sequence[str] | None = None, profile: str | None = None) -> dict[str, dict]:
    """Saved records by name (all of the profile's, or just ``names``, in that order); a
    model saved on this machine comes before the committed one of the same name."""
    folders = _search_dirs(profile)
    if names is None:
        found: dict[str, Path] = {}
        for folder in reversed(folders):          # the first folder overrides
            found.update({p.stem: p for p in folder.glob("*.json")})
        paths = [found[n] for n in sorted(found)]
    else:
        paths, missing = [], []
        for n in names:
            path = _first(f"{n}.json", profile)
            if path is None:
                missing.append(f"{n}.json")
            paths.append(path)
        if missing:
            where = " or ".join(str(f) for f in folders)
            raise FileNotFoundError(f"no saved results {missing} in {where}; run the notebook "
                                    "that trains those models first")
    records = {}
    for path in paths:
        record = json.loads(path.read_text())
        if "by_length" not in record:   # another kind of record (07b's LoRA comparison): not a translation model's
            if names is None:
                continue
            raise ValueError(f"{path} holds no translation model's scores by length (no 'by_length')")
        for row in record["by_length"]:
            for key in ("bleu", "exact_match"):
                row[key] = float("nan") if row[key] is None else row[key]
        records[record["name"]] = record
    return records

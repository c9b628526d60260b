"""Files written whole or not at all (the one place the course writes a file atomically:
checkpoints, cached data, recorded results, the grader's releases, feedback and CSV), and the
course's notebooks in taught order (``chapters``: the one list every script, test and
benchmark reads)."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def write_atomic(path: str | Path, content: bytes | Callable[[BinaryIO], object], mode: int = 0o644) -> Path:
    """Write ``path`` whole or not at all: into a temporary file beside it, flushed to disk,
    then renamed over it, so a crash, a full disk or a notebook reading it in parallel never
    sees half a file. ``content``: the bytes, or a function that writes them to the open
    (binary) file; ``mode``: the file's permissions (a temporary file is private). The
    folder is made if missing. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(content, (bytes, bytearray)):
                f.write(content)
            else:
                content(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CHAPTER = re.compile(r"\d\d[a-z]?")   # a chapter's number: 07, or 07b for the one after 07


def chapters(folder: str | Path = NOTEBOOKS) -> list[Path]:
    """The course's notebooks in ``folder`` (``notebooks/`` by default) in the order they are
    taught: ``NN<letter>_<name>.ipynb``, by number, then a chapter before its follow-ups
    (``05_bert`` before ``05b_bert_finetuning``, ``07_gpt`` before ``07b_small_llm``). The one
    definition: the full profile's runner, the device check, the book, the slides, bench and the browser, slide,
    exercise, notebook and smoke tests all read it, so a new notebook named so is in every check
    as soon as it exists."""
    found = [p for p in Path(folder).glob("[0-9][0-9]*_*.ipynb") if CHAPTER.fullmatch(p.stem.split("_")[0])]
    return sorted(found, key=lambda p: (p.stem.split("_")[0], p.stem))

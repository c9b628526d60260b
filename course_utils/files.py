"""Files written whole or not at all (the one place the course writes a file atomically:
checkpoints, cached data, recorded results, the grader's releases, feedback and CSV)."""

from __future__ import annotations

import os
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

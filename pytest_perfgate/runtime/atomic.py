"""Atomic file writes: a reader sees the old file or the complete new one, never a torn write."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .links import check


def atomic_write_text(path: Path, text: str, root: Path | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically: temp file in the same directory, fsync, replace.

    A reader sees either the old file or the complete new one, never a partial write. A link at
    ``path`` is replaced, never written through; ``root``: the results folder ``path`` is in, whose
    folders below it must not be links (:func:`.links.check`).
    """
    return atomic_write_bytes(path, text.encode("utf-8"), root)


def atomic_write_bytes(path: Path, data: bytes, root: Path | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (as :func:`atomic_write_text`)."""
    path = Path(path)
    if root is not None:
        check(path.parent, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path

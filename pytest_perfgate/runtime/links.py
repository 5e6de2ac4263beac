"""Nothing is written through a symbolic link inside the results folder (docs/security.md).

A link planted in ``--perfgate-out`` (``samples/`` or ``engines/`` pointing at a folder elsewhere,
``history.sqlite`` at a database elsewhere) would make a session write outside the results folder.
:func:`check` is the one test every writer and store runs on the path it writes (the path and each
parent below the results root; the root itself is the user's choice and may be a link), and
:func:`open_nofollow` opens a file with ``O_NOFOLLOW``. :func:`planted` is the start-up check
(pytest's session start and ``perfgate gate``: exit 4): the links the session would write through.
Files that are replaced, never written into (gates.xml, report.html, summary.md, decisions.json),
replace a link there by a file of their own and need no refusal.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

# what a session writes into (or through) in the results folder, besides the replaced files
WRITTEN_INTO = ("samples", "engines", "history.sqlite", "history.sqlite-wal", "history.sqlite-shm",
                "history.sqlite-journal", "decisions.json.lock")
ENGINE_LOGS = "engines"


class LinkInResults(OSError):
    """A symbolic link where perfgate would write in its results folder; ``filename`` is the link."""

    def __init__(self, link: Path, root: Path) -> None:
        try:
            target = os.readlink(link)
        except OSError:
            target = "?"
        try:
            name = link.relative_to(root).as_posix()
        except ValueError:
            name = str(link)
        from .redaction import printable

        super().__init__(errno.ELOOP, f"{printable(name)} is a symbolic link (to {printable(target)}): perfgate "
                         "writes nothing through a link in its results folder; remove it", str(link))

    def __str__(self) -> str:
        return str(self.strerror)


def check(path: Path, root: Path) -> Path:
    """``path`` itself, once neither it nor any parent of it below ``root`` is a symbolic link
    (:class:`LinkInResults` otherwise); parts that do not exist yet are fine. A path outside
    ``root`` has only itself checked."""
    path, root = Path(path), Path(root)
    try:
        parts = path.relative_to(root).parts
        at = root
    except ValueError:
        parts, at = (path.name,), path.parent
    for part in parts:
        at = at / part
        if os.path.islink(at):
            raise LinkInResults(at, root)
        if not os.path.exists(at):
            break
    return path


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a link at ``path`` itself (``O_NOFOLLOW``: ELOOP)."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def planted(root: Path) -> str | None:
    """The first link in ``root`` this session would write through, as a one-line reason; None when
    there is none. Checked at start: the fixed names and each engine log in ``engines/``."""
    root = Path(root)
    names = [root / n for n in WRITTEN_INTO]
    try:
        logs = sorted(os.scandir(root / ENGINE_LOGS), key=lambda e: e.name) if (root / ENGINE_LOGS).is_dir() else []
        names += [Path(e.path) for e in logs]
    except OSError:
        pass
    for p in names:
        try:
            check(p, root)
        except LinkInResults as e:
            return str(e)
    return None

"""Where the run history lives, and one connection to it: a SQLite file (the default,
``history.sqlite`` in the results directory) or a PostgreSQL database (a ``postgresql://`` URL).

The location comes from ``--perfgate-history`` (or ``perfgate history --history``), else the
``PERFGATE_HISTORY`` environment variable, else ``[perfgate] history`` in thresholds.toml, else the
results directory's ``history.sqlite`` (:func:`choose`). Both kinds hold the same tables
(:mod:`.migrations`); :class:`Connection` hides the two drivers' differences (placeholders, rows,
transactions) from :mod:`.history`. psycopg (v3) is imported only for a URL
(``pip install 'pytest-perfgate[postgres]'``).

Every message names the location with the password of a URL masked (:func:`label`).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .connection import Connection, HistoryError

__all__ = ["Connection", "HistoryError", "Location", "check_location", "choose", "errors", "history_of", "is_url",
           "label", "open_history", "use"]

ENV = "PERFGATE_HISTORY"
FILENAME = "history.sqlite"
URL_SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT_S = 10  # an unreachable server is named after this long (a URL's connect_timeout wins)
BUSY_TIMEOUT_S = 60.0  # SQLite: how long a writer waits for another

Location = Path | str  # a history file, or a postgresql:// URL


def is_url(loc: object) -> bool:
    """``loc`` is a database URL (``scheme://...``), not a file path."""
    return isinstance(loc, str) and "://" in loc


def label(loc: Location) -> str:
    """``loc`` fit for a message: a path as it is, a URL with its password (and any ``password=``
    query parameter) replaced by ``***``."""
    if not is_url(loc):
        return str(loc)
    text = str(loc)
    try:
        u = urlsplit(text)
        netloc = u.netloc
        if "@" in netloc:
            creds, _, host = netloc.rpartition("@")
            user, sep, _pw = creds.partition(":")
            netloc = f"{user}{':***' if sep else ''}@{host}"
        query = "&".join(("password=***" if part.lower().startswith("password=") else part)
                         for part in u.query.split("&")) if u.query else ""
        return urlunsplit((u.scheme, netloc, u.path, query, u.fragment))
    except ValueError:
        return text.split("://", 1)[0] + "://***"


def check_location(loc: Location, where: str) -> Location:
    """A history setting checked: a ``postgresql://`` URL with a host or socket and a database, or a
    path; anything else (another scheme, a URL without a database) is a HistoryError naming ``where``."""
    if not is_url(loc):
        return Path(loc)
    text = str(loc)
    scheme = text.split("://", 1)[0].lower()
    if scheme not in URL_SCHEMES:
        raise HistoryError(f"{where} {label(text)}: not a history location (a postgresql:// URL or a SQLite file path)")
    try:
        u = urlsplit(text)
        u.port  # noqa: B018 - a bad port raises here
    except ValueError as e:
        raise HistoryError(f"{where} {label(text)}: not a valid URL ({e})") from None
    if not u.path.strip("/") and "dbname=" not in u.query:
        raise HistoryError(f"{where} {label(text)}: no database name (postgresql://USER@HOST/DATABASE)")
    return text


def choose(option: str | None, setting: str | None, out_dir: Path, base: Path | None = None,
           env: Mapping[str, str] | None = None, option_name: str = "--perfgate-history") -> Location:
    """The history of a session: ``option`` (--perfgate-history), else ``$PERFGATE_HISTORY``, else
    ``setting`` ([perfgate] history, a relative path taken from ``base``: the thresholds file's
    folder), else ``out_dir/history.sqlite``."""
    env = os.environ if env is None else env
    for value, where, root in ((option, option_name, Path.cwd()), (env.get(ENV), ENV, Path.cwd()),
                               (setting, "[perfgate] history", base or Path.cwd())):
        if value:
            loc = check_location(value.strip(), where)
            if isinstance(loc, Path) and not loc.is_absolute():
                loc = root / loc
            return loc
    return Path(out_dir) / FILENAME


_IN_USE: dict[Path, Location] = {}  # results directory -> the history this process writes for it


def use(out_dir: Path, loc: Location) -> None:
    """Say that this process's session writes the history of ``out_dir`` at ``loc`` (the plotted
    report reads its trend there: :func:`history_of`)."""
    _IN_USE[Path(out_dir).resolve()] = loc


def history_of(out_dir: Path) -> Location:
    """The history of a results directory: the one :func:`use` named in this process, else its
    history.sqlite."""
    return _IN_USE.get(Path(out_dir).resolve(), Path(out_dir) / FILENAME)


SIDECARS = ("-wal", "-shm", "-journal")  # SQLite's files beside a history file


def open_history(loc: Location, *, create: bool = True) -> Connection:
    """A connection to the history at ``loc``, its tables created or migrated to the current schema
    when ``create`` (:mod:`.migrations`). A history that cannot be opened is a HistoryError naming it."""
    from .migrations import check_readable, migrate

    con = _open_postgres(str(loc)) if is_url(loc) else _open_sqlite(Path(loc), create)
    try:
        if create:
            migrate(con)
        else:
            check_readable(con)
    except BaseException:
        con.close()
        raise
    return con


def _open_sqlite(path: Path, create: bool) -> Connection:
    if not create and not path.exists():
        raise HistoryError(f"{path}: no run history (no perfgate run has written this results directory)")
    if create:  # never a database elsewhere through a link (SQLite follows them, its journals too)
        from ..runtime.links import check

        for p in (path, *(path.with_name(path.name + s) for s in SIDECARS)):
            check(p, path.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
    # Switching a new file to WAL while another process opens it can answer "database is locked" at
    # once, past the busy handler (SQLite returns BUSY rather than risk a deadlock): try again, for
    # as long as the busy timeout would have waited (a CI run on a busy machine hit it once)
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return Connection(_sqlite(path, create), "sqlite", str(path))
        except sqlite3.OperationalError as e:
            if not _busy(e) or time.monotonic() >= deadline:
                raise HistoryError(f"{path}: not a usable SQLite history ({e})") from None
            time.sleep(0.05)
        except sqlite3.DatabaseError as e:
            raise HistoryError(f"{path}: not a usable SQLite history ({e})") from None


def _busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _sqlite(path: Path, create: bool) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        con.row_factory = sqlite3.Row
        con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if create:
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = NORMAL")
        else:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # not a database: raises here
    except BaseException:
        con.close()
        raise
    return con


def _open_postgres(url: str) -> Connection:
    where = label(url)
    check_location(url, "history")
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError:
        raise HistoryError(f"{where}: a PostgreSQL history needs psycopg (pip install 'pytest-perfgate[postgres]')") from None
    from ..runtime.redaction import add_secret, clean

    pw = urlsplit(url).password
    if pw:
        add_secret(pw)  # never echoed by a server's message either
    kw: dict[str, Any] = {} if "connect_timeout=" in url else {"connect_timeout": CONNECT_TIMEOUT_S}
    try:
        raw = psycopg.connect(url, autocommit=True, row_factory=dict_row, application_name="perfgate", **kw)
    except psycopg.Error as e:
        cause = clean(" ".join(str(e).split()), limit=300)
        raise HistoryError(f"{where}: cannot open the PostgreSQL history ({cause})") from None
    return Connection(raw, "postgresql", where)


def errors() -> tuple[type[Exception], ...]:
    """Every error a history operation may raise: HistoryError (a ValueError), OSError, and the
    drivers' (psycopg's only when it is installed)."""
    out: list[type[Exception]] = [ValueError, OSError, sqlite3.Error]
    try:
        import psycopg

        out.append(psycopg.Error)
    except ImportError:
        pass
    return tuple(out)

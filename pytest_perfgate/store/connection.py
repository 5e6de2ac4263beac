"""One open connection to a run history, SQLite or PostgreSQL (opened by :mod:`.backend`), and the
error every history operation raises."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class HistoryError(ValueError):
    """A history that cannot be opened, or a run/baseline reference that names nothing."""


class Connection:
    """One open connection to a history, SQLite or PostgreSQL. Statements are written with ``?``
    placeholders; rows come back as dicts."""

    def __init__(self, raw: Any, dialect: str, where: str) -> None:
        self.raw = raw
        self.dialect = dialect  # "sqlite" | "postgresql"
        self.label = where

    @property
    def postgres(self) -> bool:
        return self.dialect == "postgresql"

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        cur = self.raw.execute(self._sql(sql), tuple(args))
        return int(cur.rowcount)

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self.raw.execute(self._sql(sql), tuple(args))
        rows = cur.fetchall()
        if self.postgres:
            return [dict(r) for r in rows]
        return [{k: r[k] for k in r.keys()} for r in rows]

    def table_exists(self, name: str) -> bool:
        if self.postgres:
            q = "SELECT 1 AS x FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
        else:
            q = "SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = ?"
        return bool(self.query(q, (name,)))

    @contextmanager
    def transaction(self, lock: bool = True) -> Iterator[Connection]:
        """One transaction; ``lock``: SQLite takes the write lock at once (``BEGIN IMMEDIATE``), so two
        writers wait for each other rather than fail on upgrade."""
        if self.postgres:
            with self.raw.transaction():
                yield self
            return
        self.raw.execute("BEGIN IMMEDIATE" if lock else "BEGIN")
        try:
            yield self
        except BaseException:
            self.raw.execute("ROLLBACK")
            raise
        self.raw.execute("COMMIT")

    def blob(self, data: Any) -> bytes:
        return bytes(data) if data is not None else b""

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

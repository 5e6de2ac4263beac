"""``history.sqlite``: every session's verdicts, appended to one SQLite file in the results directory.

WAL journal, a 60 s busy timeout and one ``BEGIN IMMEDIATE`` transaction per write, so two runs
(two CI jobs, two xdist controllers) can append at the same time without losing a row. Schema
(also in ``docs/reports.md``):

* ``runs``: run_id (key), started, updated, git_commit, host, python, thresholds_file,
  thresholds_sha256, engines (JSON list of engine info), results_dir;
* ``verdicts``: id, run_id, seq (per run), time, phase, gate, test, outcome, metric, statistic,
  observed/lower/upper/threshold/baseline (base units), n, unit, direction, method, confidence,
  samples (data file, relative to the results directory), verdict (the full verdict as JSON).
"""

from __future__ import annotations

import json
import math
import platform
import socket
import sqlite3
import sys
import time
from collections.abc import Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runtime.links import check
from ..verdicts.record import VerdictRecord

FILENAME = "history.sqlite"
SIDECARS = ("-wal", "-shm", "-journal")  # SQLite's files beside it
VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY,
  started TEXT NOT NULL,
  updated TEXT NOT NULL,
  git_commit TEXT,
  host TEXT,
  python TEXT,
  thresholds_file TEXT,
  thresholds_sha256 TEXT,
  engines TEXT NOT NULL DEFAULT '[]',
  results_dir TEXT
);
CREATE TABLE IF NOT EXISTS verdicts (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  seq INTEGER NOT NULL,
  time TEXT NOT NULL,
  phase TEXT NOT NULL,
  gate TEXT NOT NULL,
  test TEXT,
  outcome TEXT NOT NULL,
  metric TEXT,
  statistic TEXT,
  observed REAL,
  lower REAL,
  upper REAL,
  n INTEGER,
  unit TEXT,
  direction TEXT,
  threshold REAL,
  baseline REAL,
  method TEXT,
  confidence REAL,
  samples TEXT,
  verdict TEXT NOT NULL,
  UNIQUE (run_id, seq)
);
CREATE INDEX IF NOT EXISTS verdicts_gate ON verdicts (gate, id);
"""


class HistoryError(ValueError):
    """A history file that cannot be opened, or a run/baseline reference that names nothing."""


@dataclass(frozen=True)
class Run:
    run_id: str
    started: str
    updated: str
    git_commit: str | None
    host: str | None
    thresholds_file: str | None
    thresholds_sha256: str | None
    engines: list[dict[str, Any]]
    results_dir: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def path_of(results: Path) -> Path:
    """The history file of a results directory (or ``results`` itself when it is a file)."""
    results = Path(results)
    return results if results.suffix in (".sqlite", ".db") else results / FILENAME


def connect(path: Path, *, create: bool = True) -> sqlite3.Connection:
    path = Path(path)
    if not create and not path.exists():
        raise HistoryError(f"{path}: no run history (no perfgate run has written this results directory)")
    if create:  # never a database elsewhere through a link (SQLite follows them, its journals too)
        for p in (path, *(path.with_name(path.name + s) for s in SIDECARS)):
            check(p, path.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
    # Switching a new file to WAL while another process opens it can answer "database is locked" at
    # once, past the busy handler (SQLite returns BUSY rather than risk a deadlock): try again, for
    # as long as the busy timeout would have waited (a CI run on a busy machine hit it once)
    deadline = time.monotonic() + 60.0
    while True:
        try:
            return _open(path, create)
        except sqlite3.OperationalError as e:
            if not _busy(e) or time.monotonic() >= deadline:
                raise HistoryError(f"{path}: not a usable SQLite history ({e})") from None
            time.sleep(0.05)
        except sqlite3.DatabaseError as e:
            raise HistoryError(f"{path}: not a usable SQLite history ({e})") from None


def _busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _open(path: Path, create: bool) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=60.0, isolation_level=None)
    try:
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA busy_timeout = 60000")
        if create:
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = NORMAL")
            con.execute("BEGIN IMMEDIATE")
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    con.execute(stmt)
            con.execute(f"PRAGMA user_version = {VERSION}")
            con.execute("COMMIT")
    except BaseException:
        con.close()
        raise
    return con


def host_info() -> str:
    return f"{socket.gethostname()} ({platform.system()} {platform.machine()})"


def _real(x: object) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _finite(x: Any) -> Any:
    """JSON-able: non-finite floats become null (the verdict's own convention)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def record(
    path: Path,
    *,
    run_id: str,
    started: str,
    git_commit: str | None,
    thresholds_file: str | None,
    thresholds_sha256: str | None,
    engines: Iterable[Mapping[str, Any]],
    verdicts: Iterable[tuple[int, Mapping[str, Any]]],
    results_dir: str | None = None,
) -> int:
    """Insert or update the run and append the verdicts ``(seq, verdict)`` not stored yet (one
    transaction). Returns the number of verdict rows added."""
    from .decisions import now_iso

    now = now_iso()
    with closing(connect(path)) as con:
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute(
                "INSERT INTO runs (run_id, started, updated, git_commit, host, python, thresholds_file, "
                "thresholds_sha256, engines, results_dir) VALUES (?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(run_id) DO UPDATE SET updated=excluded.updated, engines=excluded.engines",
                (run_id, started, now, git_commit, host_info(), sys.version.split()[0], thresholds_file,
                 thresholds_sha256, json.dumps(list(map(dict, engines)), default=str), results_dir),
            )
            added = 0
            for seq, v in verdicts:
                r = VerdictRecord.read(v)
                cur = con.execute(
                    "INSERT OR IGNORE INTO verdicts (run_id, seq, time, phase, gate, test, outcome, metric, statistic, "
                    "observed, lower, upper, n, unit, direction, threshold, baseline, method, confidence, samples, "
                    "verdict) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run_id, seq, now, r.phase, r.gate, r.test or None, r.outcome, r.metric or None,
                     r.statistic or None, r.observed, r.lower, r.upper, r.n, r.unit or None, r.direction,
                     r.threshold, r.baseline, r.method or None, r.confidence, r.samples or None,
                     json.dumps(_finite(dict(v)), default=str, allow_nan=False)),
                )
                added += cur.rowcount
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return added


def _run(row: sqlite3.Row) -> Run:
    return Run(row["run_id"], row["started"], row["updated"], row["git_commit"], row["host"], row["thresholds_file"],
               row["thresholds_sha256"], json.loads(row["engines"] or "[]"), row["results_dir"])


def runs(path: Path, limit: int | None = None) -> list[Run]:
    """Stored runs, newest first."""
    with closing(connect(path, create=False)) as con:
        q = "SELECT * FROM runs ORDER BY started DESC, rowid DESC" + (f" LIMIT {int(limit)}" if limit else "")
        return [_run(r) for r in con.execute(q)]


def run(path: Path, run_id: str) -> Run:
    with closing(connect(path, create=False)) as con:
        row = con.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            # a unique prefix is enough
            rows = con.execute("SELECT * FROM runs WHERE run_id LIKE ? ESCAPE '\\'",
                               (run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",)).fetchall()
            if len(rows) != 1:
                raise HistoryError(f"{path}: no run {run_id!r}" + (f" ({len(rows)} runs start with it)" if rows else ""))
            row = rows[0]
        return _run(row)


def verdicts(path: Path, *, run_id: str | None = None, gate: str | None = None,
             commit: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Stored verdict rows (``verdict`` decoded), oldest first; filtered by run, gate, git commit."""
    where, args = [], []
    if run_id is not None:
        where.append("v.run_id = ?")
        args.append(run_id)
    if gate is not None:
        where.append("v.gate = ?")
        args.append(gate)
    if commit is not None:
        where.append("r.git_commit = ?")
        args.append(commit)
    q = ("SELECT v.*, r.git_commit AS git_commit, r.started AS started FROM verdicts v JOIN runs r USING (run_id)"
         + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY v.id DESC")
    if limit:
        q += f" LIMIT {int(limit)}"
    with closing(connect(path, create=False)) as con:
        rows = con.execute(q, args).fetchall()
    out = []
    for r in reversed(rows):
        d = {k: r[k] for k in r.keys()}
        d["verdict"] = json.loads(d["verdict"])
        out.append(d)
    return out

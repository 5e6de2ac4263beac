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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..verdicts.record import VerdictRecord
from . import backend, migrations

FILENAME = backend.FILENAME
VERSION = migrations.VERSION
Location = backend.Location  # a history file (Path) or a postgresql:// URL (str)
HistoryError = backend.HistoryError
SIDECARS = backend.SIDECARS


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
    """The SQLite connection of a history file (created or migrated to the current schema when
    ``create``); :func:`backend.open_history` opens either kind."""
    return cast(sqlite3.Connection, backend.open_history(Path(path), create=create).raw)


def exists(path: Location) -> bool:
    """A history is there to read: the file exists, or the location is a database URL."""
    return backend.is_url(path) or Path(path).exists()


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
    path: Location,
    *,
    run_id: str,
    started: str,
    git_commit: str | None,
    thresholds_file: str | None,
    thresholds_sha256: str | None,
    engines: Iterable[Mapping[str, Any]],
    verdicts: Iterable[tuple[int, Mapping[str, Any]]],
    results_dir: str | None = None,
    files: Iterable[tuple[str, bytes]] = (),
) -> int:
    """Insert or update the run and append the verdicts ``(seq, verdict)`` not stored yet, and the
    run's data ``files`` ``(path relative to the results directory, gzip bytes)`` not stored yet (one
    transaction). Returns the number of verdict rows added."""
    from .decisions import now_iso

    now = now_iso()
    with backend.open_history(path) as con, con.transaction():
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
            added += con.execute(
                f"INSERT INTO verdicts ({_VERDICT_COLUMNS}) VALUES ({_marks(_VERDICT_COLUMNS)}) "
                "ON CONFLICT DO NOTHING",
                (run_id, seq, now, r.phase, r.gate, r.test or None, r.outcome, r.metric or None,
                 r.statistic or None, r.observed, r.lower, r.upper, r.n, r.unit or None, r.direction,
                 r.threshold, r.baseline, r.method or None, r.confidence, r.samples or None,
                 json.dumps(_finite(dict(v)), default=str, allow_nan=False)),
            )
        for rel, data in files:
            _put_file(con, run_id, rel, data)
    return added


_VERDICT_COLUMNS = ("run_id, seq, time, phase, gate, test, outcome, metric, statistic, observed, lower, upper, n, "
                    "unit, direction, threshold, baseline, method, confidence, samples, verdict")
_RUN_COLUMNS = "run_id, started, updated, git_commit, host, python, thresholds_file, thresholds_sha256, engines, results_dir"


def _marks(columns: str) -> str:
    return ",".join("?" * len(columns.split(",")))


def _put_file(con: backend.Connection, run_id: str, rel: str, data: bytes) -> int:
    import hashlib

    return con.execute("INSERT INTO files (run_id, path, size, sha256, data) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
                       (run_id, rel, len(data), hashlib.sha256(data).hexdigest(), data))


def _run(row: Mapping[str, Any]) -> Run:
    return Run(row["run_id"], row["started"], row["updated"], row["git_commit"], row["host"], row["thresholds_file"],
               row["thresholds_sha256"], json.loads(row["engines"] or "[]"), row["results_dir"])


def _newest(con: backend.Connection) -> str:
    # SQLite: the insertion order breaks ties of the start time (as before); PostgreSQL: the run id
    return "started DESC, run_id DESC" if con.postgres else "started DESC, rowid DESC"


def runs(path: Location, limit: int | None = None) -> list[Run]:
    """Stored runs, newest first."""
    with backend.open_history(path, create=False) as con:
        q = f"SELECT * FROM runs ORDER BY {_newest(con)}" + (f" LIMIT {int(limit)}" if limit else "")
        return [_run(r) for r in con.query(q)]


def run(path: Location, run_id: str) -> Run:
    with backend.open_history(path, create=False) as con:
        rows = con.query("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            # a unique prefix is enough
            rows = con.query("SELECT * FROM runs WHERE run_id LIKE ? ESCAPE '\\'",
                             (run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",))
            if len(rows) != 1:
                raise HistoryError(f"{con.label}: no run {run_id!r}" + (f" ({len(rows)} runs start with it)" if rows else ""))
        return _run(rows[0])


def verdicts(path: Location, *, run_id: str | None = None, gate: str | None = None,
             commit: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Stored verdict rows (``verdict`` decoded), oldest first (by the run's start, then its
    verdicts in order: the same order after an export and import); filtered by run, gate, git commit."""
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
         + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.started DESC, v.run_id DESC, v.seq DESC")
    if limit:
        q += f" LIMIT {int(limit)}"
    with backend.open_history(path, create=False) as con:
        rows = con.query(q, args)
    out = []
    for d in reversed(rows):
        d["verdict"] = json.loads(d["verdict"])
        out.append(d)
    return out


def files(path: Location, run_id: str) -> dict[str, bytes]:
    """The data files stored with run ``run_id`` (path relative to the results directory -> gzip
    bytes); {} for a history without them (the default history.sqlite: they stay beside it)."""
    with backend.open_history(path, create=False) as con:
        if not con.table_exists("files"):
            return {}
        return {r["path"]: con.blob(r["data"]) for r in con.query("SELECT path, data FROM files WHERE run_id = ?", (run_id,))}


def materialize(path: Location, run_id: str, results_dir: Path) -> int:
    """Write the stored data files of run ``run_id`` that ``results_dir`` lacks (atomically);
    returns how many were written. A path that would leave ``results_dir`` is refused."""
    from ..runtime.atomic import atomic_write_bytes

    root = Path(results_dir).resolve()
    n = 0
    for rel, data in files(path, run_id).items():
        dest = (root / rel).resolve()
        if root not in dest.parents:
            raise HistoryError(f"{backend.label(path)}: run {run_id}: stored file {rel[:80]!r} is outside the results directory")
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(dest, data)
            n += 1
    return n

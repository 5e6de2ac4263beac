"""Move history between locations (``perfgate history --export DEST`` / ``--import SRC``): SQLite
file to PostgreSQL, back, or between files.

Every run is copied with its verdicts and data files, one transaction per run, keeping what the
destination already has (a run, a verdict ``(run_id, seq)``, a file ``(run_id, path)``): copying
twice adds nothing, and a run that reached both places in parts (a session that fell back to its
local history.sqlite half way) ends up whole. A SQLite history's data files that live beside it in
its results directory (``samples/<run>/...``, not in its ``files`` table) are copied from there, so a
runner's results directory moves to a database whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import backend, history, records

_SAMPLES = "samples"


@dataclass
class Copied:
    runs: int = 0  # runs new at the destination
    verdicts: int = 0  # verdict rows added
    files: int = 0  # data files added
    bytes: int = 0  # their size
    seen_runs: int = 0  # runs read from the source

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def copy(src: backend.Location, dst: backend.Location) -> Copied:
    """Copy every run of ``src`` into ``dst`` (created or migrated as needed)."""
    if backend.label(src) == backend.label(dst) or (not backend.is_url(src) and not backend.is_url(dst)
                                                      and Path(src).resolve() == Path(dst).resolve()):
        raise backend.HistoryError(f"{backend.label(src)}: source and destination are the same history")
    out = Copied()
    with backend.open_history(src, create=False) as s, backend.open_history(dst) as d:
        has_files = s.table_exists("files")
        beside = Path(src).parent if not backend.is_url(src) else None
        for run in s.query("SELECT * FROM runs ORDER BY started, run_id"):
            out.seen_runs += 1
            rid = run["run_id"]
            rows = s.query(f"SELECT {history._VERDICT_COLUMNS} FROM verdicts WHERE run_id = ? ORDER BY seq", (rid,))
            stored = ({r["path"]: s.blob(r["data"]) for r in s.query("SELECT path, data FROM files WHERE run_id = ?", (rid,))}
                      if has_files else {})
            if beside is not None:
                stored.update({k: v for k, v in _files_beside(beside, rid, rows).items() if k not in stored})
            with d.transaction():
                out.runs += d.execute(
                    f"INSERT INTO runs ({history._RUN_COLUMNS}) VALUES ({history._marks(history._RUN_COLUMNS)}) "
                    "ON CONFLICT DO NOTHING", [run[c.strip()] for c in history._RUN_COLUMNS.split(",")])
                for r in rows:
                    out.verdicts += d.execute(
                        f"INSERT INTO verdicts ({history._VERDICT_COLUMNS}) "
                        f"VALUES ({history._marks(history._VERDICT_COLUMNS)}) ON CONFLICT DO NOTHING",
                        [r[c.strip()] for c in history._VERDICT_COLUMNS.split(",")])
                for rel, data in sorted(stored.items()):
                    if history._put_file(d, rid, rel, data):
                        out.files += 1
                        out.bytes += len(data)
    return out


def _files_beside(results_dir: Path, run_id: str, rows: list[dict[str, Any]]) -> dict[str, bytes]:
    """The data files of run ``run_id`` in a results directory: the folders its verdicts' ``samples``
    name (``samples/<run>/``), with the run files under them."""
    folders = {Path(row["samples"]).parent for row in rows if row.get("samples")}
    out: dict[str, bytes] = {}
    root = results_dir.resolve()
    for folder in sorted(folders):
        base = (root / folder).resolve()
        if root not in base.parents or not base.is_dir():
            continue
        for f in records.data_files(base):
            if f.is_file():
                out[f.relative_to(root).as_posix()] = f.read_bytes()
    return out


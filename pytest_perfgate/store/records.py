"""Per-verdict data files: the data a verdict was computed from, and the per-request records of the
runs behind it, as gzip-compressed JSON Lines (schema in ``docs/reports.md``).

One file per evaluated verdict, ``samples/<run_id>/<seq>-<gate>.jsonl.gz`` under the results
directory. Every line is one JSON object with a ``kind``:

* ``header`` (first line): schema, gate, phase, test, run id, the confidence the verdict used and
  its outcome/observed/lower/upper/n;
* ``run_file``: load run ``run`` is stored once per results directory, in ``path`` (relative to this
  file's folder, ``runs/<name>.parquet``: one row per request, zstd, the run in its metadata;
  store/runfiles.py), shared by every verdict evaluated on it. Read too: ``runs/<name>.jsonl.gz``
  run files written before (a ``pytest-perfgate/run/1`` header, then that run's ``run`` and
  ``request`` lines), and schema 1 files that kept the ``run`` and ``request`` lines in each
  verdict's file;
* ``run``: one load run (engine info, load config, counters before/after, gauges, SLOs, times);
* ``request``: one request record of run ``run`` (send, chunk times and tokens, counts, tag, error);
* ``data``: what the gate evaluated, part 0 (and 1 for comparisons of two runs): ``samples``
  (values in base units, optional denominators), ``proportion`` (successes, trials) or ``run``
  (the run with that index, evaluated the way the live test did).

Floats are written with Python's shortest round-trip repr, so re-evaluating a stored file gives the
bit-identical verdict (:func:`reevaluate`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
import math
import os
import re
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..runtime.links import check, open_nofollow
from . import runfiles

if TYPE_CHECKING:
    from ..config import Gate, Thresholds
    from ..load.result import RunResult
    from ..verdicts.record import VerdictRecord
    from ..verdicts.verdict import Verdict

SCHEMA = "pytest-perfgate/samples/1"
RUN_SCHEMA = "pytest-perfgate/run/1"
DIRNAME = "samples"
RUNS = "runs"
# run files already written in this process: id(run) -> (a weak reference to it, its file's path)
_WRITTEN: dict[int, tuple[weakref.ref[Any], Path]] = {}
# and by file: a reader in the process that wrote the run (the report after the gates) takes the run
# itself rather than a second copy read back (a 100k-request run: 5 s and ~250 MB)
_LIVE: dict[Path, weakref.ref[Any]] = {}


class StoreError(ValueError):
    """A stored data file that is missing, unreadable or not a perfgate samples file."""


@dataclass
class Stored:
    """A loaded data file: its header, the runs it kept and the evaluated parts."""

    path: Path
    header: dict[str, Any]
    runs: list[RunResult] = field(default_factory=list)
    parts: list[Any] = field(default_factory=list)  # Samples | Proportion | RunResult

    @property
    def data(self) -> Any:
        """What to pass to ``evaluate``: the single part, or the (treatment, reference) pair."""
        return self.parts[0] if len(self.parts) == 1 else tuple(self.parts)

    @property
    def confidence(self) -> float | None:
        c = self.header.get("confidence")
        return float(c) if isinstance(c, (int, float)) else None

    @property
    def verdict(self) -> VerdictRecord:
        """The live verdict the header kept (outcome, observed, bounds, n, method), typed."""
        from ..verdicts.record import VerdictRecord

        v = self.header.get("verdict")
        return VerdictRecord.read(v if isinstance(v, Mapping) else {})


def _record_fields() -> frozenset[str]:
    from ..contract import RequestRecord

    return frozenset(f.name for f in dataclasses.fields(RequestRecord))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:80] or "gate"


def _is_run(x: Any) -> bool:
    from ..load.result import RunResult

    return isinstance(x, RunResult)


def _run_line(i: int, r: RunResult) -> dict[str, Any]:
    """Every field of the run result but its records (those go on ``request`` lines); a counter
    reading that is no finite number is dropped with a note (valid JSON: the run is kept)."""
    from ..load.counters import BadCounters, kept

    line: dict[str, Any] = {"kind": "run", "run": i}
    bad = BadCounters()
    for f in dataclasses.fields(r):
        if f.name in ("records", "columns"):  # columns: the records again (the run file's rows)
            continue
        value = getattr(r, f.name)
        if f.name in ("counters_before", "counters_after"):
            value = bad.keep(value)
        elif f.name in ("gauges", "request_counters"):
            value = kept(value, bad)
        elif f.name == "config":
            value = value.to_dict() if value is not None else None
        elif f.name == "health":  # the client's health (load/health.py): validity is re-evaluable
            value = value.to_dict() if value is not None else None
        elif f.name == "worker_health":
            value = [h.to_dict() for h in value]
        line[f.name] = value
    line["counter_notes"] = [*r.counter_notes, *bad.notes()]
    return line


def _sweep_runs(x: Any) -> list[Any]:
    """A load sweep's level runs (a capacity gate's data), in level order; [] for other data."""
    from ..load.sweep import Sweep

    return [x.results[level] for level in sorted(x.results)] if isinstance(x, Sweep) else []


def _part_line(part: int, d: Any, run_index: dict[int, int], metric: str) -> dict[str, Any]:
    from ..load.sweep import Sweep
    from ..verdicts.samples import Proportion, Samples, as_data

    if id(d) in run_index:
        return {"kind": "data", "part": part, "type": "run", "run": run_index[id(d)]}
    if isinstance(d, (list, tuple)):  # several runs of one side (the A B A B design), each its own part
        return {"kind": "data", "part": part, "type": "runs",
                "items": [_part_line(part, x, run_index, metric) for x in d]}
    if isinstance(d, Sweep):  # every level's run is kept: re-evaluation reruns the capacity search on them
        return {"kind": "data", "part": part, "type": "sweep", "sweep_kind": d.kind,
                "levels": [[float(level), run_index[id(d.results[level])]] for level in sorted(d.results)]}
    if not isinstance(d, (Samples, Proportion)):
        d = as_data(d, metric)
    if isinstance(d, Proportion):
        return {"kind": "data", "part": part, "type": "proportion", **dataclasses.asdict(d)}
    return {
        "kind": "data", "part": part, "type": "samples", "unit": d.unit.name, "label": d.label,
        "values": [float(x) for x in d.values.tolist()],
        "denominators": None if d.denominators is None else [float(x) for x in d.denominators.tolist()],
        "notes": list(d.notes),
        "sent": None if d.sent is None else [float(x) for x in d.sent.tolist()],  # arrival order: dependence
        "requests": None if d.requests is None else dataclasses.asdict(d.requests),  # failed: censored, budget
    }


def parts_of(gate: Gate, data: Any) -> list[Any]:
    """The evaluated parts of ``data``: one, or two for a comparison gate given a pair."""
    if gate.compare and isinstance(data, (tuple, list)) and len(data) == 2:
        return list(data)
    return [data]


def write(
    out_dir: Path,
    *,
    gate: Gate,
    verdict: Verdict,
    data: Any,
    confidence: float,
    run_id: str,
    test: str = "",
    seq: int = 0,
    extra_runs: Sequence[Any] = (),
) -> Path:
    """Store ``data`` (and the runs behind it) for ``verdict``; return the path relative to ``out_dir``.

    ``extra_runs``: further run results that produced the data without being evaluated themselves
    (the draws of ``sample_until_decided``); their records are kept for the report's plots.
    """
    from .decisions import now_iso

    parts = parts_of(gate, data)
    runs: list[Any] = []
    run_index: dict[int, int] = {}
    nested = [x for p in parts if isinstance(p, (list, tuple)) for x in p]  # the A B A B runs of a side
    for x in [*parts, *nested, *(r for p in parts for r in _sweep_runs(p)), *extra_runs]:
        if _is_run(x) and id(x) not in run_index:
            run_index[id(x)] = len(runs)
            runs.append(x)
    rel = Path(DIRNAME) / _slug(run_id) / f"{seq:04d}-{_slug(gate.name)}.jsonl.gz"
    path = check(Path(out_dir) / rel, Path(out_dir))  # never through a link in the results folder
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "kind": "header", "schema": SCHEMA, "gate": gate.name, "phase": gate.phase, "metric": gate.metric,
        "statistic": gate.statistic.text, "test": test, "run_id": run_id, "created": now_iso(),
        "confidence": confidence,
        "verdict": _header_verdict(verdict),
    }
    tmp = path.with_name(path.name + ".tmp")
    try:
        with _gzip_out(tmp) as raw, io.TextIOWrapper(raw, encoding="utf-8") as f:  # 6 -> 1: 3x faster on a big run

            def put(line: dict[str, Any]) -> None:  # written as made: a 100k-request run is never held twice
                f.write(json.dumps(line, allow_nan=False, default=str, separators=(",", ":")) + "\n")

            put(header)
            for i, r in enumerate(runs):  # each run once per results directory, shared by its verdicts
                put({"kind": "run_file", "run": i, "path": _run_file(path.parent, r, Path(out_dir)).relative_to(path.parent).as_posix()})
            for p, d in enumerate(parts):
                put(_part_line(p, d, run_index, gate.metric))
    except BaseException:  # nothing half-written is left behind
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
    return rel


@contextlib.contextmanager
def _gzip_out(tmp: Path) -> Iterator[gzip.GzipFile]:
    """A new gzip file at ``tmp``, opened ``O_NOFOLLOW`` (never a link's target), level 1 (6 -> 1: 3x
    faster on a big run)."""
    with os.fdopen(open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", compresslevel=1, fileobj=raw) as gz:
        yield gz


def _run_file(folder: Path, r: RunResult, root: Path) -> Path:
    """The file that keeps run ``r`` under ``folder/runs/``: written on the first verdict that needs it."""
    known = _WRITTEN.get(id(r))
    if known is not None and known[0]() is r and known[1].parent.parent == folder and known[1].exists():
        return known[1]
    path = folder / RUNS / f"{_slug(str(r.engine_info.get('name', '')) or 'run')[:40]}-{uuid.uuid4().hex[:12]}{runfiles.SUFFIX}"
    check(path, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        cols = r.columnar()  # a run held as columns is written from them, not made into records
        runfiles.write(tmp, _finite_json(_run_line(0, r)), cols if cols is not None else r.records)
    except BaseException:  # nothing half-written is left behind
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
    key, where = id(r), path.resolve()

    def gone(_: Any) -> None:
        _WRITTEN.pop(key, None)
        _LIVE.pop(where, None)

    ref = weakref.ref(r, gone)
    _WRITTEN[key] = (ref, path)
    _LIVE[where] = ref
    return path


def _dumps(line: dict[str, Any]) -> bytes:
    try:
        return json.dumps(line, allow_nan=False, default=str, separators=(",", ":")).encode()
    except ValueError:  # a NaN or infinity left anywhere else (an engine's info): null, the rest kept
        return json.dumps(_finite_json(line), allow_nan=False, default=str, separators=(",", ":")).encode()


def _finite_json(x: Any) -> Any:
    """``x`` with every non-finite float (at any depth) replaced by None."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {k: _finite_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite_json(v) for v in x]
    return x


def _header_verdict(v: Verdict) -> dict[str, Any]:
    """What the header keeps of the live verdict: the part re-evaluation must reproduce."""
    d = v.to_dict()
    return {k: d[k] for k in ("outcome", "observed", "lower", "upper", "n", "method", "nonfinite")}


def read_lines(path: Path) -> Iterable[dict[str, Any]]:
    import orjson

    try:
        with gzip.open(path, "rb") as f:
            for i, raw in enumerate(f, 1):
                try:
                    obj = orjson.loads(raw)
                except ValueError as e:
                    raise StoreError(f"{path}: line {i}: not JSON ({e})") from None
                if not isinstance(obj, dict):
                    raise StoreError(f"{path}: line {i}: not a JSON object")
                yield obj
    except FileNotFoundError:
        raise StoreError(f"{path}: stored data file not found") from None
    except (OSError, EOFError) as e:
        raise StoreError(f"{path}: unreadable ({e})") from None


def load(path: Path, runs_cache: dict[Path, RunResult] | None = None) -> Stored:
    """Read a data file back into run results and evaluable data. ``runs_cache``: run files already
    read (by path), shared by the verdicts of one run (a reader of many verdicts passes one dict);
    with it, a run this process wrote and still holds is taken as it is, not read back."""
    header: dict[str, Any] | None = None
    runs: dict[int, RunResult] = {}
    parts: dict[int, Any] = {}
    lines = read_lines(path)
    for obj in lines:
        kind = obj.get("kind")
        if header is None:
            if kind != "header" or obj.get("schema") != SCHEMA:
                raise StoreError(f"{path}: not a perfgate samples file (first line is not a {SCHEMA} header)")
            header = obj
        elif kind == "run_file":
            runs[int(obj["run"])] = _load_run_file(path, obj.get("path"), runs_cache)
        elif kind in ("run", "request"):  # the runs inside the verdict's file (written before run files)
            _run_lines(path, obj, runs)
        elif kind == "data":
            parts[int(obj["part"])] = _read_part(path, obj, runs)
    if header is None:
        raise StoreError(f"{path}: empty file")
    if not parts:
        raise StoreError(f"{path}: no data part (file truncated?)")
    return Stored(path, header, [runs[i] for i in sorted(runs)], [parts[i] for i in sorted(parts)])


def _run_lines(path: Path, obj: dict[str, Any], runs: dict[int, RunResult]) -> None:
    """One ``run`` or ``request`` line into ``runs``."""
    from ..contract import RequestRecord
    from ..load.result import RunResult

    if obj.get("kind") == "run":
        runs[int(obj["run"])] = RunResult(records=[], **_run_kw(obj))
        return
    run = runs.get(int(obj["run"]))
    if run is None:
        raise StoreError(f"{path}: a request line of run {obj['run']} before its run line")
    del obj["kind"], obj["run"]
    run.records.append(RequestRecord(**obj) if obj.keys() <= _RECORD_FIELDS else
                       RequestRecord(**{k: v for k, v in obj.items() if k in _RECORD_FIELDS}))


def _run_kw(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a ``run`` line, typed, as ``RunResult``'s keyword arguments (its records apart)."""
    from ..load.result import RunResult
    from ..load.schedule import LoadConfig

    known = {f.name for f in dataclasses.fields(RunResult)} - {"records", "columns"}
    kw = {k: v for k, v in obj.items() if k in known}
    cfg = kw.get("config")
    kw["config"] = LoadConfig(**cfg) if cfg else None
    kw.update(_health(kw))
    return kw


def _load_run_file(path: Path, rel: Any, cache: dict[Path, RunResult] | None) -> RunResult:
    """The run kept in ``rel`` (a ``runs/`` file next to the verdict's data file ``path``)."""
    folder = path.parent.resolve()
    if not isinstance(rel, str) or not rel:
        raise StoreError(f"{path}: a run_file line without a path")
    f = (folder / rel).resolve()
    if f.parent.parent != folder:
        raise StoreError(f"{path}: run file {rel[:80]!r} is not in its runs/ folder")
    if cache is not None and f in cache:
        return cache[f]
    live = _LIVE.get(f) if cache is not None else None  # without a cache: always the file (round trips)
    held = live() if live is not None else None
    if held is not None:
        return cast("RunResult", held)
    if f.suffix == runfiles.SUFFIX:
        run = _parquet_run(f)
        if cache is not None:
            cache[f] = run
        return run
    runs: dict[int, RunResult] = {}
    first = True
    for obj in read_lines(f):
        if first:
            if obj.get("kind") != "header" or obj.get("schema") != RUN_SCHEMA:
                raise StoreError(f"{f}: not a perfgate run file (first line is not a {RUN_SCHEMA} header)")
            first = False
            continue
        _run_lines(f, obj, runs)
    if 0 not in runs:
        raise StoreError(f"{f}: no run line (file truncated?)")
    if cache is not None:
        cache[f] = runs[0]
    return runs[0]


def _parquet_run(f: Path) -> RunResult:
    """The run kept in Parquet run file ``f`` (store/runfiles.py)."""
    from ..load.parquet import run_of

    try:
        line, table = runfiles.read(f)
    except FileNotFoundError:
        raise StoreError(f"{f}: stored run file not found") from None
    except (OSError, ValueError) as e:
        raise StoreError(f"{f}: {e}") from None
    return run_of(table, **_run_kw(line))


def data_files(folder: Path) -> list[Path]:
    """The data files under ``folder`` (verdicts' files and their run files, old and new), by path."""
    return sorted(f for pattern in ("*.jsonl.gz", f"*{runfiles.SUFFIX}") for f in folder.rglob(pattern))


def _health(kw: Mapping[str, Any]) -> dict[str, Any]:
    """A stored run's client health, typed again (load/health.py)."""
    from ..load.health import ClientHealth

    h, ws = kw.get("health"), kw.get("worker_health")
    return {"health": ClientHealth.from_dict(h) if isinstance(h, Mapping) else None,
            "worker_health": [ClientHealth.from_dict(w) for w in ws if isinstance(w, Mapping)] if isinstance(ws, list) else []}


def _read_part(path: Path, obj: Mapping[str, Any], runs: Mapping[int, RunResult]) -> Any:
    """One stored data part back as what ``evaluate`` takes (a run, sweep, proportion, samples or a
    list of them: the runs of one side of an A B A B comparison)."""
    from ..config.units import unit
    from ..verdicts.samples import Proportion, Samples

    t = obj.get("type")
    if t == "run":
        return runs[int(obj["run"])]
    if t == "runs":
        return [_read_part(path, x, runs) for x in obj.get("items") or ()]
    if t == "sweep":
        from ..load.sweep import Sweep

        return Sweep(str(obj["sweep_kind"]), {float(lv): runs[int(i)] for lv, i in obj["levels"]})
    if t == "proportion":
        known = {f.name for f in dataclasses.fields(Proportion)}
        kw: dict[str, Any] = {k: (tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v)
              for k, v in obj.items() if k in known}
        return Proportion(**kw)
    if t == "samples":
        import numpy as np

        dens = obj.get("denominators")
        sent = obj.get("sent")
        return Samples(np.asarray(obj["values"], dtype=np.float64), unit(str(obj.get("unit", ""))),
                       str(obj.get("label", "")), None if dens is None else np.asarray(dens, dtype=np.float64),
                       tuple(obj.get("notes") or ()), obj.get("requests"),
                       None if sent is None else np.asarray(sent, dtype=np.float64))
    raise StoreError(f"{path}: data part of unknown type {t!r}")


_RECORD_FIELDS = _record_fields()


def reevaluate(stored: Stored, gate: Gate, thresholds: Thresholds | None = None,
               confidence: float | None = None) -> Verdict:
    """Evaluate ``gate`` on stored data at the confidence the live verdict used (or ``confidence``);
    invalid when the stored run's client did not keep up (load/validity.py), as live."""
    from ..load.validity import apply
    from ..verdicts.verdict import evaluate

    v = evaluate(gate, stored.data, confidence=confidence or stored.confidence, thresholds=thresholds)
    return apply(v, gate, stored.data, on=thresholds.settings.validity if thresholds is not None else True)


def same_verdict(a: Mapping[str, Any] | Verdict | VerdictRecord, b: Mapping[str, Any] | Verdict | VerdictRecord) -> bool:
    """Two verdicts (dicts, records or verdicts) agree on outcome, observed value, bounds and n."""
    from ..verdicts.record import VerdictRecord
    from ..verdicts.verdict import Verdict

    def rec(x: Mapping[str, Any] | Verdict | VerdictRecord) -> VerdictRecord:
        return x.record if isinstance(x, Verdict) else VerdictRecord.read(x)

    return rec(a).same(rec(b))

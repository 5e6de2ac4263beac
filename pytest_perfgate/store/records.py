"""Per-verdict data files: the data a verdict was computed from, and the per-request records of the
runs behind it, as gzip-compressed JSON Lines (schema in ``docs/reports.md``).

One file per evaluated verdict, ``samples/<run_id>/<seq>-<gate>.jsonl.gz`` under the results
directory. Every line is one JSON object with a ``kind``:

* ``header`` (first line): schema, gate, phase, test, run id, the confidence the verdict used and
  its outcome/observed/lower/upper/n;
* ``run``: one load run (engine info, load config, counters before/after, gauges, SLOs, times);
* ``request``: one request record of run ``run`` (send, chunk times and tokens, counts, tag, error);
* ``data``: what the gate evaluated, part 0 (and 1 for comparisons of two runs): ``samples``
  (values in base units, optional denominators), ``proportion`` (successes, trials) or ``run``
  (the run with that index, evaluated the way the live test did).

Floats are written with Python's shortest round-trip repr, so re-evaluating a stored file gives the
bit-identical verdict (:func:`reevaluate`).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Gate, Thresholds
    from ..load.result import RunResult
    from ..verdicts.record import VerdictRecord
    from ..verdicts.verdict import Verdict

SCHEMA = "pytest-perfgate/samples/1"
DIRNAME = "samples"


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


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:80] or "gate"


def _is_run(x: Any) -> bool:
    from ..load.result import RunResult

    return isinstance(x, RunResult)


def _run_line(i: int, r: RunResult) -> dict[str, Any]:
    """Every field of the run result but its records (those go on ``request`` lines)."""
    line: dict[str, Any] = {"kind": "run", "run": i}
    for f in dataclasses.fields(r):
        if f.name == "records":
            continue
        value = getattr(r, f.name)
        if f.name == "config":
            value = value.to_dict() if value is not None else None
        elif f.name == "health":  # the client's health (load/health.py): validity is re-evaluable
            value = value.to_dict() if value is not None else None
        elif f.name == "worker_health":
            value = [h.to_dict() for h in value]
        line[f.name] = value
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
    path = Path(out_dir) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, Any]] = [{
        "kind": "header", "schema": SCHEMA, "gate": gate.name, "phase": gate.phase, "metric": gate.metric,
        "statistic": gate.statistic.text, "test": test, "run_id": run_id, "created": now_iso(),
        "confidence": confidence,
        "verdict": _header_verdict(verdict),
    }]
    for i, r in enumerate(runs):
        lines.append(_run_line(i, r))
        for rec in r.records:
            lines.append({"kind": "request", "run": i, **dataclasses.asdict(rec)})
    for p, d in enumerate(parts):
        lines.append(_part_line(p, d, run_index, gate.metric))
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
        for line in lines:
            f.write(json.dumps(line, allow_nan=False, default=str, separators=(",", ":")) + "\n")
    tmp.replace(path)
    return rel


def _header_verdict(v: Verdict) -> dict[str, Any]:
    """What the header keeps of the live verdict: the part re-evaluation must reproduce."""
    d = v.to_dict()
    return {k: d[k] for k in ("outcome", "observed", "lower", "upper", "n", "method", "nonfinite")}


def read_lines(path: Path) -> Iterable[dict[str, Any]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for i, raw in enumerate(f, 1):
                try:
                    obj = json.loads(raw)
                except ValueError as e:
                    raise StoreError(f"{path}: line {i}: not JSON ({e})") from None
                if not isinstance(obj, dict):
                    raise StoreError(f"{path}: line {i}: not a JSON object")
                yield obj
    except FileNotFoundError:
        raise StoreError(f"{path}: stored data file not found") from None
    except (OSError, EOFError) as e:
        raise StoreError(f"{path}: unreadable ({e})") from None


def load(path: Path) -> Stored:
    """Read a data file back into run results and evaluable data."""
    from ..contract import RequestRecord
    from ..load.result import RunResult
    from ..load.schedule import LoadConfig

    header: dict[str, Any] | None = None
    runs: dict[int, RunResult] = {}
    parts: dict[int, Any] = {}
    fields = {f.name for f in dataclasses.fields(RequestRecord)}
    for obj in read_lines(path):
        kind = obj.get("kind")
        if header is None:
            if kind != "header" or obj.get("schema") != SCHEMA:
                raise StoreError(f"{path}: not a perfgate samples file (first line is not a {SCHEMA} header)")
            header = obj
        elif kind == "run":
            known = {f.name for f in dataclasses.fields(RunResult)} - {"records"}
            kw = {k: v for k, v in obj.items() if k in known}
            cfg = kw.get("config")
            kw["config"] = LoadConfig(**cfg) if cfg else None
            kw.update(_health(kw))
            runs[int(obj["run"])] = RunResult(records=[], **kw)
        elif kind == "request":
            runs[int(obj["run"])].records.append(RequestRecord(**{k: v for k, v in obj.items() if k in fields}))
        elif kind == "data":
            parts[int(obj["part"])] = _read_part(path, obj, runs)
    if header is None:
        raise StoreError(f"{path}: empty file")
    if not parts:
        raise StoreError(f"{path}: no data part (file truncated?)")
    return Stored(path, header, [runs[i] for i in sorted(runs)], [parts[i] for i in sorted(parts)])


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
        return Samples(np.asarray(obj["values"], dtype=np.float64), unit(str(obj.get("unit", ""))),
                       str(obj.get("label", "")), None if dens is None else np.asarray(dens, dtype=np.float64),
                       tuple(obj.get("notes") or ()), obj.get("requests"))
    raise StoreError(f"{path}: data part of unknown type {t!r}")


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

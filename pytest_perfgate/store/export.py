"""Verdicts in the formats continuous-benchmarking dashboards read.

* Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format/):
  ``{"<benchmark>": {"<measure>": {"value": x, "lower_value": l, "upper_value": u}}}``; the benchmark is
  the gate, the measure the metric and statistic (``ttft-p99``), values in the gate's display unit.
* github-action-benchmark ``customSmallerIsBetter`` / ``customBiggerIsBetter``
  (https://github.com/benchmark-action/github-action-benchmark#examples): a JSON list of
  ``{"name", "unit", "value", "range", "extra"}``; one file per direction, because the action takes
  one tool per file. Which file a gate goes to follows :func:`store.baseline.smaller_is_better`.

A capacity gate's verdict (a load sweep: ``curve`` in its dict) adds its sustained level and knee
as measures of its own benchmark, and one benchmark per level, ``<gate>@<level>``, with the achieved
request rate and goodput (req/s, bigger is better) and P99 TTFT/TPOT (ms, smaller is better); a
bounded goodput gate exports as any gate (req/s, with its bounds).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..config.units import UnitError, unit
from ..verdicts.record import VerdictRecord

Stored = Mapping[str, Any] | VerdictRecord  # a stored verdict dict, or its record

FORMATS = ("bencher", "github-smaller", "github-bigger")


def _scaled(v: VerdictRecord, x: float | None) -> float | None:
    """``x`` (a number of ``v``, base units) in ``v``'s display unit; None when it is not finite."""
    if x is None:
        return None
    try:
        u = unit(v.unit)
    except UnitError:
        return x
    return x / u.factor


def _measure(v: VerdictRecord) -> str:
    compare = f"{v.compare}-of-" if v.compare else ""
    text = f"{compare}{v.metric or 'value'}-{v.statistic}"
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "value"


# per level of a sweep: (curve key, measure, factor to the shown unit, unit, smaller is better)
SWEEP_MEASURES = (("achieved_req_s", "achieved-req-s", 1.0, "req/s", False),
                  ("goodput_req_s", "goodput-req-s", 1.0, "req/s", False),
                  ("ttft_p99_s", "ttft-p99-ms", 1e3, "ms", True),
                  ("tpot_p99_s", "tpot-p99-ms", 1e3, "ms", True))


def _finite(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def sweep_rows(d: Stored) -> list[tuple[str, str, float, str, bool]]:
    """(benchmark, measure, value, unit, smaller is better) of a capacity verdict's sweep: its
    sustained level and knee, then every level's measures; [] for other verdicts."""
    v = VerdictRecord.read(d)
    if not v.curve:
        return []
    gate, unit_name = v.gate, v.unit or "concurrent requests"
    rows = [(gate, k, x, unit_name, False) for k in ("sustained", "knee")
            if (x := _finite(v.details.get(k))) is not None]
    for p in v.curve:
        level = _finite(p.get("level"))
        if level is None:
            continue
        for key, measure, factor, u, smaller in SWEEP_MEASURES:
            x = _finite(p.get(key))
            if x is not None:
                rows.append((f"{gate}@{level:g}", measure, x * factor, u, smaller))
    return rows


def bencher(verdicts: Iterable[Stored]) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format for verdict dicts (the last verdict of a gate wins)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for v in map(VerdictRecord.read, verdicts):
        for bench, measure, x, _u, _s in sweep_rows(v):
            out.setdefault(bench, {})[measure] = {"value": x}
        value = _scaled(v, v.observed)
        if value is None or v.outcome in ("error", "invalid"):  # invalid: the client did not keep up
            continue
        m: dict[str, float] = {"value": value}
        lo, hi = _scaled(v, v.lower), _scaled(v, v.upper)
        if lo is not None:
            m["lower_value"] = lo
        if hi is not None:
            m["upper_value"] = hi
        out.setdefault(v.gate, {})[_measure(v)] = m
    return out


def _smaller(v: VerdictRecord) -> bool:
    if v.direction in ("max", "min"):
        return v.direction == "max"
    from ..config.metrics import lookup
    from .baseline import SMALLER_IS_BETTER_DIMENSIONS, SMALLER_IS_BETTER_METRICS

    m = lookup(v.metric)
    return v.metric in SMALLER_IS_BETTER_METRICS or (m is not None and m.dimension in SMALLER_IS_BETTER_DIMENSIONS)


def github_benchmark(verdicts: Iterable[Stored], *, smaller_is_better: bool) -> list[dict[str, Any]]:
    """github-action-benchmark custom JSON (``customSmallerIsBetter`` or ``customBiggerIsBetter``)."""
    out: list[dict[str, Any]] = []
    for v in map(VerdictRecord.read, verdicts):
        out.extend({"name": f"{bench} {measure}", "unit": u, "value": x, "extra": f"{v.outcome}; load sweep"}
                   for bench, measure, x, u, smaller in sweep_rows(v) if smaller == smaller_is_better)
        value = _scaled(v, v.observed)
        if value is None or v.outcome in ("error", "invalid") or _smaller(v) != smaller_is_better:
            continue
        item: dict[str, Any] = {"name": f"{v.gate} ({v.metric} {v.statistic})", "unit": v.unit, "value": value}
        lo, hi = _scaled(v, v.lower), _scaled(v, v.upper)
        if lo is not None and hi is not None:
            item["range"] = f"{lo:.6g} - {hi:.6g}"
        item["extra"] = f"{v.outcome}; n={v.n}; run {v.run_id}".strip()
        out.append(item)
    return out


def export(fmt: str, verdicts: Iterable[Mapping[str, Any]]) -> Any:
    vs = list(verdicts)
    if fmt == "bencher":
        return bencher(vs)
    if fmt == "github-smaller":
        return github_benchmark(vs, smaller_is_better=True)
    if fmt == "github-bigger":
        return github_benchmark(vs, smaller_is_better=False)
    raise ValueError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})")

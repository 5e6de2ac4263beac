"""One ``[gates.NAME]`` table -> :class:`Gate`: what it measures, its bound, how it is reported."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import metrics as metric_names
from . import model, statistics
from .checker import Checker
from .model import EngineSpec, Fallback, Gate, Phase, Settings
from .statistics import Statistic
from .units import Quantity

GATE_KEYS = {
    "phase", "metric", "statistic", "max", "min", "baseline", "fallback", "compare", "runs",
    "confidence", "description", "title", "unit", "bands", "max_samples", "max_seconds", "engine",
    "params", "record_only", "max_error_rate", "regression", "single", "requests", "slo",
}  # fmt: skip


@dataclass(frozen=True)
class _Dims:
    """The dimensions a gate's numbers may have: its metric's, or a comparison's (a ratio is a number)."""

    c: Checker
    tn: str
    metric: str
    compare: str | None
    want: tuple[str, ...]

    def read(self, t: Mapping[str, Any], key: str, label: str | None = None) -> Quantity:
        q = self.c.quantity(t[key], self.tn, label or key)
        self.check(label or key, t[key], q)
        return q

    def check(self, key: str, raw: Any, q: Quantity) -> None:
        if q.dimension in self.want:
            return
        # a plain number for a time/rate metric is ambiguous: demand a unit
        what = f"a {self.compare} of {self.metric}" if self.compare else self.metric
        got = f"{q.unit.name!r} ({q.dimension})" if q.unit.name else "a plain number"
        raise self.c.err(self.tn, f"{key} = {raw!r}", f"unit mismatch: {what} is {' or '.join(self.want)}, got {got}")


def parse_gate(
    c: Checker,
    name: str,
    t: Mapping[str, Any],
    phases: Mapping[str, Phase],
    fallbacks: Mapping[str, Fallback],
    engines: Mapping[str, EngineSpec],
    settings: Settings | None = None,
) -> Gate:
    tn = f"gates.{name}"
    c.keys(t, GATE_KEYS, tn)
    phase = _phase(c, tn, t, phases)
    metric = _metric(c, tn, t)
    statistic = _statistic(c, tn, t, metric.dimension)
    compare, runs = _comparison(c, tn, t)
    direction = _direction(c, tn, t)
    cmp_kind = statistics.comparison_kind(compare) if compare else None
    want = (cmp_kind.dims if cmp_kind is not None else None) or (metric.dimension,)
    if metric.dimension == "fraction" and compare is None:
        want = ("fraction", "number")  # 0.7 or "70%"
    dims = _Dims(c, tn, metric.name, compare, want)
    threshold = dims.read(t, direction) if direction is not None else None
    baseline = dims.read(t, "baseline") if "baseline" in t else None
    fb = _fallbacks(c, tn, t, fallbacks)
    conf = c.confidence(t["confidence"], tn, "confidence") if t.get("confidence") is not None else None
    unit_name = t.get("unit")
    if unit_name is not None:
        dims.check("unit", unit_name, c.quantity(f"1 {unit_name}", tn, "unit"))
    bands = _bands(c, tn, t, dims)
    eng = _engine(c, tn, t, engines)
    params = t.get("params", {})
    if not isinstance(params, dict):
        raise c.err(tn, "params", "must be a table")
    single = c.flag(t, "single", tn)
    if single and not _stat_kind(statistic).single_ok:
        raise c.err(tn, "single", f"only a statistic = \"value\" gate takes one measured number, not {statistic.text!r}")
    if direction is not None and compare is None:
        _check_reachable(c, tn, name, statistic, direction, conf, t, settings or Settings())
    if direction is not None and "requests" in t:
        _check_decidable(c, tn, name, statistic, direction, compare, conf, t, settings or Settings())
    return Gate(
        name, phase, metric.name, statistic, direction, threshold, baseline, fb, compare, runs, conf,
        description=c.string(t, "description", tn) or c.string(t, "title", tn),
        unit=unit_name,
        bands=bands,
        max_samples=c.positive(t["max_samples"], tn, "max_samples") if "max_samples" in t else None,
        max_seconds=c.positive(t["max_seconds"], tn, "max_seconds", float) if "max_seconds" in t else None,
        engine=eng,
        params=params,
        max_error_rate=c.fraction(t["max_error_rate"], tn, "max_error_rate") if "max_error_rate" in t else None,
        regression=_regression(c, t, tn)[0],
        regression_vs=_regression(c, t, tn)[1],
        single=single,
        slo=_slo(c, tn, t, statistic, metric.name),
    )


def _regression(c: Checker, t: Mapping[str, Any], tn: str) -> tuple[float | None, str | None]:
    """``regression = "5%"`` (vs ``--perfgate-baseline``) or ``regression = { vs = "main", tolerance =
    "5%" }``: (tolerance, the git branch whose recent runs, run effects included, are the baseline)."""
    if "regression" not in t:
        return None, None
    v = t["regression"]
    if not isinstance(v, dict):
        return c.fraction(v, tn, "regression"), None
    where = f"{tn}.regression"
    c.keys(v, {"vs", "tolerance"}, where)
    if "tolerance" not in v:
        raise c.err(where, "tolerance", 'is required, e.g. regression = { vs = "main", tolerance = "5%" }')
    vs = c.string(v, "vs", where).strip()
    if "vs" in v and not vs:
        raise c.err(where, "vs", "must name a git branch, e.g. \"main\"")
    return c.fraction(v["tolerance"], where, "tolerance"), vs or None


_SLO_KEY = re.compile(r"^(ttft|tpot|e2e)(?:_p(\d{1,2}(?:\.\d+)?))?$")


def _slo(c: Checker, tn: str, t: Mapping[str, Any], st: Statistic, metric: str) -> tuple[tuple[str, float | None, float], ...]:
    """``slo = { ttft_p99 = "2 s", tpot_p99 = "100 ms" }``: a capacity gate's (statistic =
    "sustained") quantile terms; ``slo = { ttft = "2 s", tpot = "50 ms" }``: a goodput gate's
    per-request limits. (metric, quantile or None, limit in seconds), in the table's order."""
    raw = t.get("slo")
    if raw is None:
        if st.kind == "sustained":
            raise c.err(tn, "slo", "missing: a capacity gate (statistic = \"sustained\") names its SLO terms, "
                        "e.g. slo = { ttft_p99 = \"2 s\", tpot_p99 = \"100 ms\" }")
        return ()
    if not isinstance(raw, dict) or not raw:
        raise c.err(tn, "slo", "must be a non-empty table, e.g. { ttft_p99 = \"2 s\", tpot_p99 = \"100 ms\" }")
    if st.kind == "sustained" and metric not in ("request_throughput", "concurrency"):
        raise c.err(tn, "metric", f"a capacity gate sustains a request rate (metric = \"request_throughput\", "
                    f"min in req/s) or concurrent users (metric = \"concurrency\"), not {metric!r}")
    if st.kind == "sustained" and "max" in t:
        raise c.err(tn, "max", "a capacity gate sustains at least a level: use min (e.g. min = \"4 req/s\")")
    if st.kind != "sustained" and metric != "goodput":
        raise c.err(tn, "slo", f"only a capacity gate (statistic = \"sustained\") or a goodput gate takes slo, "
                    f"not a {metric} gate")
    out: list[tuple[str, float | None, float]] = []
    for key, value in raw.items():
        m = _SLO_KEY.match(str(key).lower())
        q = float(m.group(2)) / 100 if m and m.group(2) else None
        if m is None or (st.kind == "sustained") != (q is not None) or (q is not None and not 0 < q < 1):
            want = "METRIC_pNN (ttft_p99, tpot_p99, e2e_p90)" if st.kind == "sustained" else "ttft, tpot or e2e"
            raise c.err(tn, f"slo.{key}", f"unknown SLO term: this gate's terms are {want}")
        lim = c.quantity(value, tn, f"slo.{key}")
        if lim.dimension != "time" or not lim.base > 0:
            raise c.err(tn, f"slo.{key} = {value!r}", "must be a time > 0 with its unit, e.g. \"200 ms\"")
        out.append((m.group(1), q, lim.base))
    return tuple(out)


def _phase(c: Checker, tn: str, t: Mapping[str, Any], phases: Mapping[str, Phase]) -> str:
    phase = c.string(t, "phase", tn)
    if not phase:
        raise c.err(tn, "phase", "missing: every gate belongs to a phase")
    if phase not in phases:
        raise c.err(tn, "phase", f"unknown phase {phase!r} (phases: {', '.join(phases) or '(none defined)'})")
    return phase


def _metric(c: Checker, tn: str, t: Mapping[str, Any]) -> metric_names.Metric:
    mname = c.string(t, "metric", tn)
    if not mname:
        raise c.err(tn, "metric", "missing")
    metric = metric_names.lookup(mname)
    if metric is None:
        raise c.err(tn, "metric", f"unknown metric {mname!r} (known: {', '.join(metric_names.known_names())})")
    return metric


def _statistic(c: Checker, tn: str, t: Mapping[str, Any], dimension: str) -> Statistic:
    stext = c.string(t, "statistic", tn, "rate" if dimension == "fraction" else "")
    if not stext:
        raise c.err(tn, "statistic", f"missing (use {statistics.statistics_help()})")
    try:
        return Statistic.parse(stext)
    except ValueError as e:
        raise c.err(tn, "statistic", str(e)) from None


def _stat_kind(st: Statistic) -> statistics.StatisticKind:
    k = statistics.kind(st.kind)
    assert k is not None, st  # Statistic.parse only returns registered kinds
    return k


def _comparison(c: Checker, tn: str, t: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    compare = t.get("compare")
    if compare is not None and (not isinstance(compare, str) or statistics.comparison_kind(compare) is None):
        raise c.err(tn, "compare", f"must be one of {', '.join(statistics.compare_kinds())}, got {compare!r}")
    runs = c.names(t, "runs", tn)
    if compare and runs and len(runs) != 2:
        raise c.err(tn, "runs", f"a {compare} gate compares exactly two runs (treatment, reference), got {list(runs)}")
    return compare, runs


def _direction(c: Checker, tn: str, t: Mapping[str, Any]) -> str | None:
    """"max", "min", or None for a record_only gate."""
    record_only = c.flag(t, "record_only", tn)
    has_max, has_min = "max" in t, "min" in t
    if has_max and has_min:
        raise c.err(tn, "max", "both min and max given: a gate has one direction")
    if not has_max and not has_min and not record_only:
        raise c.err(tn, "max", "neither min nor max given (set record_only = true for a reported-only metric)")
    if record_only and (has_max or has_min):
        raise c.err(tn, "record_only", "a record_only gate has no min or max")
    return "max" if has_max else "min" if has_min else None


def _fallbacks(c: Checker, tn: str, t: Mapping[str, Any], fallbacks: Mapping[str, Fallback]) -> tuple[str, ...]:
    fb = c.names(t, "fallback", tn)
    for f in fb:
        if f not in fallbacks:
            raise c.err(tn, "fallback", f"unknown fallback {f!r} (fallbacks: {', '.join(fallbacks) or '(none defined)'})")
    return fb


def _bands(c: Checker, tn: str, t: Mapping[str, Any], dims: _Dims) -> tuple[tuple[str, Quantity], ...]:
    """(label, lower edge) for reporting, highest edge first."""
    braw = t.get("bands", {})
    if not isinstance(braw, dict):
        raise c.err(tn, "bands", "must be a table of label = lower edge, e.g. { \"large gain\" = \"80%\" }")
    bands = [(label, dims.read(braw, label, f"bands.{label}")) for label in braw]
    return tuple(sorted(bands, key=lambda b: -b[1].base))


def _engine(c: Checker, tn: str, t: Mapping[str, Any], engines: Mapping[str, EngineSpec]) -> str | None:
    eng = t.get("engine")
    if eng is not None and (not isinstance(eng, str) or (eng not in engines and eng not in model.BUILTIN_ENGINES)):
        known = ", ".join([*engines, *(b for b in model.BUILTIN_ENGINES if b not in engines)])
        raise c.err(tn, "engine", f"unknown engine {eng!r} (engines: {known})")
    return eng


def _check_decidable(
    c: Checker, tn: str, name: str, st: Statistic, direction: str, compare: str | None, conf: float | None,
    t: Mapping[str, Any], settings: Settings,
) -> None:
    """``requests``: the planned requests a run of this gate. Runs that can never decide it (a P99
    pass on 100 requests, a P99 comparison below 368 a run) are a usage error naming the size needed."""
    from .looks import decidable_size

    n = c.positive(t["requests"], tn, "requests")
    level = conf if conf is not None else settings.confidence
    need = decidable_size(st.kind, st.q, direction, level, compare)
    if need is not None and n < need:
        what = f"a {st.text} {compare}" if compare else f"a {st.text} pass"
        raise c.err(tn, "requests", f"gate {name}: its planned runs of {n} requests can never decide it: {what} at "
                    f"{level:g} needs >= {need} requests a run even if they were independent, and a loaded server's "
                    "are not (at utilisation 0.5 about 5 requests carry one request's information: "
                    "docs/statistics.md, Dependence) (raise requests and the runs, gate a lower percentile, "
                    "or lower the confidence)")


def _check_reachable(
    c: Checker, tn: str, name: str, st: Statistic, direction: str, conf: float | None,
    t: Mapping[str, Any], settings: Settings,
) -> None:
    """A sequential gate whose budget can never give a pass is a usage error, named here."""
    from .looks import pass_plan, unreachable_message

    if not _stat_kind(st).checks_budget:
        return
    budget = t.get("max_samples", settings.max_samples)
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        return  # reported by the max_samples check
    level = conf if conf is not None else settings.confidence
    if pass_plan(st.kind, st.q, direction, level, budget) is None:
        key = "max_samples" if "max_samples" in t else None
        raise c.err(tn, key, unreachable_message(name, st.kind, st.q, direction, level, budget))

"""The rules every gate evaluation shares: the confidence a gate is evaluated at, the decision of
bounds against a threshold, the dimension a gate's data must have and the unit its numbers are
shown in. Plain Python: :mod:`verdict` (one run) and :mod:`comparison` (two runs) use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..config import statistics
from ..config.metrics import lookup, slo_names
from ..config.units import DIMENSION_DEFAULT_UNIT
from . import bounds as stats
from .acceptance import accepted_prefix_bounds
from .samples import Data, Proportion, SampleError, Samples

if TYPE_CHECKING:
    from ..config import Gate, Thresholds

DEFAULT_CONFIDENCE = 0.95


def resolve_confidence(gate: Gate, thresholds: Thresholds | None = None, override: float | None = None) -> float:
    """The confidence ``gate`` is evaluated at: ``override`` (``--perfgate-confidence``), else the
    gate's ``confidence``, else ``[perfgate] confidence``, else 0.95. An override never weakens a
    gate's own ``confidence`` (a gate asking 0.99 stays at 0.99 under ``--perfgate-confidence 0.95``)."""
    if override:
        return max(override, gate.confidence or 0.0)
    if gate.confidence:
        return gate.confidence
    return thresholds.settings.confidence if thresholds else DEFAULT_CONFIDENCE


def decide(gate: Gate, b: stats.Bounds) -> str:
    """``pass`` when the bound on the good side clears the threshold, ``fail`` when the bound on the
    bad side is beyond it, else ``inconclusive``; ``recorded`` without a threshold."""
    if gate.direction is None or gate.threshold is None:
        return "recorded"
    thr = gate.threshold.base
    if gate.direction == "max":
        return "pass" if b.upper < thr else "fail" if b.lower > thr else "inconclusive"
    return "pass" if b.lower > thr else "fail" if b.upper < thr else "inconclusive"


def check_dimension(gate: Gate, d: Data) -> None:
    """Raise :class:`SampleError` when ``d`` is not in the dimension of the gate's metric (plain
    numbers are accepted for a fraction)."""
    m = lookup(gate.metric)
    dim = d.unit.dimension
    want = m.dimension if m else dim
    if dim != want and not (want == "fraction" and dim == "number"):
        raise SampleError(
            f"gate {gate.name}: {gate.metric} is measured in {want} but the samples are "
            f"{d.unit.name or 'plain numbers'!r} ({dim})"
        )


def data_dimension(gate: Gate, d: Data) -> str:
    """The dimension a gate's numbers are shown in: a proportion or a fraction metric (metric
    table) is a fraction, whatever unit the samples came in; else the samples' own."""
    m = lookup(gate.metric)
    if isinstance(d, Proportion) or (m is not None and m.dimension == "fraction"):
        return "fraction"
    return d.unit.dimension


def display_unit(gate: Gate, data: Data | None, dimension: str) -> str:
    """The unit shown: the gate's ``unit``, else the unit its threshold (or baseline) was written in
    when of ``dimension``, else the dimension's usual unit, else the samples' own."""
    if gate.unit is not None:
        return gate.unit
    for q in (gate.threshold, gate.baseline):
        if q is not None and q.dimension == dimension:
            return q.unit.name
    if dimension in DIMENSION_DEFAULT_UNIT:
        return DIMENSION_DEFAULT_UNIT[dimension]
    return data.unit.name if isinstance(data, Samples) else ""


def unmeasured_unit(gate: Gate) -> str:
    """The unit a gate's numbers are shown in when nothing was measured: the gate's ``unit``, else
    the unit its threshold (or baseline) was written in, else its metric's usual unit."""
    if gate.unit:
        return str(gate.unit)
    for q in (gate.threshold, gate.baseline):
        if q is not None and (q.unit.name or gate.compare):
            return str(q.unit.name)
    m = lookup(gate.metric)
    return DIMENSION_DEFAULT_UNIT.get(m.dimension, "") if m is not None and not gate.compare else ""


def metric_unit(metric: str) -> str:
    """The usual display unit of ``metric`` (metric table; plain numbers when unknown)."""
    m = lookup(metric)
    return DIMENSION_DEFAULT_UNIT.get(m.dimension if m else "number", "")


CENSORED_METRICS = slo_names()  # a failed or timed-out request never got (or finished) its output


def censored(gate: Gate, d: Data) -> int:
    """Failed requests of ``d`` that a ``max`` latency quantile gate counts as over its limit (their
    value is unknown but no better than the limit: censored), 0 for every other gate. Dropping them
    would bias the percentile low exactly when the slowest requests time out."""
    m = lookup(gate.metric)
    k = statistics.kind(gate.statistic.kind)
    if (not isinstance(d, Samples) or d.requests is None or gate.compare or gate.direction != "max"
            or k is None or not k.censors_failures or m is None or m.name not in CENSORED_METRICS):
        return 0
    return d.requests.failed


ACCEPTED_PREFIX_METRICS = ("acceptance_rate",)  # vLLM's counting: accepted up to the first rejection


def uncensored_note(gate: Gate, d: Data) -> str:
    """The rule for failed requests a latency gate cannot count as over its limit (a mean, or a
    ``min`` gate): they are not in the statistic (their values are unknown) and count against the
    error budget only; the note says how many, never dropping them unmentioned. "" when none failed
    or the gate censors them (:func:`censored`)."""
    m = lookup(gate.metric)
    if (not isinstance(d, Samples) or d.requests is None or not d.requests.failed or gate.compare
            or m is None or m.name not in CENSORED_METRICS or censored(gate, d)):
        return ""
    k = d.requests.failed
    return (f"{k} failed request(s) not in the {gate.statistic.text} (their {gate.metric} is unknown; "
            "they count against the error budget, max_error_rate; a max pNN gate counts them as over its limit)")


def proportion_bounds(d: Proportion, c: float, metric: str = "") -> tuple[stats.Bounds, str]:
    """Bounds of a proportion and the note saying what they assume; ``metric`` an accepted-prefix
    count (draft acceptance) with per-request clusters: :mod:`acceptance`'s test-inverted bound."""
    if d.clustered and metric in ACCEPTED_PREFIX_METRICS and d.cluster_unit == "request":
        cs, ct = d.clusters()
        g = int(np.count_nonzero(ct))
        b = accepted_prefix_bounds(cs, ct, c)
        note = f"{d.successes}/{d.trials} in {g} request clusters (requests independent; {b.method})"
        return b, note + (f"; {b.warning}" if b.warning else "")
    if d.clustered:
        cs, ct = d.clusters()
        g = int(np.count_nonzero(ct))
        b = stats.cluster_proportion_bounds(cs, ct, c)
        return b, f"{d.successes}/{d.trials} in {g} {d.cluster_unit} clusters (cluster-robust)"
    b = stats.clopper_pearson(d.successes, d.trials, c)
    return b, f"{d.successes}/{d.trials}; assumes independent trials"

"""One :class:`Method` per statistic kind and one :class:`Comparison` per comparison kind: the
registry every evaluation goes through (single runs in :mod:`verdict`, two runs in :mod:`comparison`,
sequential looks in :mod:`sequential` through :mod:`pytest_perfgate.config.looks`).

A Method carries everything a statistic needs: how a thresholds file writes it (``parse``, from
:class:`~pytest_perfgate.config.statistics.StatisticKind`), its point estimate (``point``), its
confidence bounds (``bounds``; ``side_bounds`` for one side of a comparison), the projected samples to
decide (``needed``), the fewest samples at which a pass is possible (``min_pass_samples``: what the
sequential looks need, and ``decidable_size``: the requests a run needs), its wording (``note``) and
its evaluation of one run (``evaluate`` -> :class:`Estimate`, the measured part of a verdict). A
Comparison carries the combine of two points (``combine``) and of two bounds (``combine_bounds``).

**Adding a statistic kind takes one file** (a plugin module, a test, a feature package)::

    from pytest_perfgate.verdicts.methods import Method, register

    class TrimmedMean(Method):
        kind = "trimmed_mean"
        help = "trim10 (any trimNN: a trimmed mean)"
        def parse(self, text):  # the texts of ``statistic = ...`` this kind accepts
            ...return Statistic("trimmed_mean", 0.10, text) or None
        def point(self, st, d): ...
        def bounds(self, st, d, c, direction): ...   # -> bounds.Bounds

    register(TrimmedMean())

``register`` puts the Method in the one registry (config/statistics.py), so that a thresholds file
that names it loads (its ``parse``), the load-time checks ask it (``single_ok``, ``checks_budget``,
``min_pass_samples``, ``decidable_size``), ``evaluate``/``Perfgate.check`` evaluate with it and the
comparison gates compare it. Register before loading the thresholds file that names it. A kind no
Method is registered for is a :class:`~pytest_perfgate.config.ConfigError` naming the file, the gate
and ``statistic`` and listing the known kinds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..config import ConfigError, Gate, Statistic
from ..config import statistics as kinds
from ..config.statistics import ComparisonKind, StatisticKind
from . import blocked, projection
from . import bounds as stats
from .acceptance import METHOD as ACCEPTED_PREFIX
from .acceptance import requests_to_decide
from .claims import far_note, shift_note
from .dependence import Dependence
from .rules import censored, decide, display_unit, proportion_bounds
from .samples import Data, Proportion, SampleError, Samples


@dataclass(frozen=True)
class Estimate:
    """The measured part of a verdict, as a Method or a Comparison returns it (numbers in base units)."""

    outcome: str
    observed: float
    lower: float
    upper: float
    n: int
    confidence: float
    method: str
    unit: str  # display unit
    needed: int | None = None
    note: str = ""
    details: Mapping[str, float] = field(default_factory=dict)

    def noted(self, *extra: str) -> Estimate:
        """This estimate with ``extra`` notes appended ("; "-joined, empty ones dropped)."""
        return replace(self, note="; ".join(x for x in (self.note, *extra) if x))


class Method(StatisticKind):
    """A statistic kind's estimation. Subclasses set ``kind`` and implement at least :meth:`point`
    and :meth:`bounds` (and :meth:`parse` for a kind a thresholds file names); the defaults of the
    rest evaluate a run as "bounds against the threshold"."""

    accepts_proportion: ClassVar[bool] = True  # a Proportion is gated by its rate (the "proportion" Method)
    pooled_ratio: ClassVar[bool] = False  # a run with denominators compares as a ratio of sums (value)

    def point(self, st: Statistic, d: Samples) -> float:
        """The point estimate of one run."""
        raise NotImplementedError(f"{type(self).__name__}.point")

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> stats.Bounds:
        """One-sided bounds at confidence ``c`` of one run (``direction``: the side the gate tests)."""
        raise NotImplementedError(f"{type(self).__name__}.bounds")

    def side_bounds(self, st: Statistic, d: Samples, c: float) -> stats.Bounds:
        """One run's own bounds at ``c`` on both sides (one side of a comparison)."""
        return self.bounds(st, d, c, None)

    def needed(self, st: Statistic, d: Samples, c: float, direction: str, thr: float) -> int | None:
        """Projected samples for an inconclusive gate to decide; None when unknown."""
        return None

    def note(self, gate: Gate, d: Samples, b: stats.Bounds) -> str:
        """The verdict's note: what the bound assumed or withheld."""
        return b.warning

    def select(self, gate: Gate, d: Data) -> Method:
        """The Method that evaluates ``d`` for ``gate``: a proportion's rate, else this one."""
        if isinstance(d, Proportion):
            if not self.accepts_proportion:
                raise SampleError(f"gate {gate.name}: {gate.statistic.text} of a proportion makes no sense; "
                                  "use statistic = \"rate\"")
            return method_for("proportion")
        return self

    def select_side(self, d: Data) -> Method:
        """The Method of one side of a comparison: a proportion's rate, a ratio of sums, else this one."""
        if isinstance(d, Proportion):
            return method_for("proportion")
        if d.denominators is not None:
            return method_for("sums")
        return self

    def check_compare_side(self, gate: Gate, d: Data) -> None:
        """Raise :class:`SampleError` when ``d`` cannot be one side of a comparison of this kind."""

    def compare(self, gate: Gate, cmp: Comparison, a: Data, r: Data, c: float, unit: str) -> Estimate | None:
        """A two-sample estimator's evaluation of the pair ``(a, r)`` (one run a side), for a gate
        that names this Method in ``params = { estimator = KIND }`` (e.g. memory's Hodges-Lehmann
        ratio, which needs both sides' values, not each side's bounds); None: the per-side combine."""
        return None

    def evaluate(self, gate: Gate, d: Data, c: float, unit: str) -> Estimate:
        """One run's estimate: bounds decided against the threshold, ``needed`` when inconclusive."""
        if not isinstance(d, Samples):  # pragma: no cover - select() routes proportions
            raise SampleError(f"gate {gate.name}: {self.kind} takes samples, not a proportion")
        st = gate.statistic
        b = self.bounds(st, d, c, gate.direction)
        outcome = decide(gate, b)
        needed = None
        if outcome == "inconclusive" and gate.threshold is not None and gate.direction is not None:
            needed = self.needed(st, d, c, gate.direction, gate.threshold.base)
        return Estimate(outcome, b.observed, b.lower, b.upper, d.n, c, b.method, unit, needed, self.note(gate, d, b))


class Comparison(ComparisonKind):
    """A comparison kind's estimation: the combine of two points and of two runs' bounds."""

    on_sums: ClassVar[bool] = True  # two ratios of sums compare by the ratio-of-sums estimator

    def combine(self, a: float, b: float) -> float:
        raise NotImplementedError(f"{type(self).__name__}.combine")

    def combine_bounds(self, a: stats.Bounds, b: stats.Bounds, observed: float, method: str) -> stats.Bounds:
        """Bounds of the comparison from each run's own bounds (each at 1 - alpha/2)."""
        return stats.combine(self.kind, a, b, observed, method)

    def unit(self, gate: Gate, a: Data) -> str:
        """The display unit of the compared number: a plain number (the threshold's dimension)."""
        dim = gate.threshold.dimension if gate.threshold is not None else "number"
        return display_unit(gate, None, dim)


def register(m: Method | Comparison) -> None:
    """Register a Method (statistic kind) or a Comparison (comparison kind) under its ``kind``; a
    built-in may be replaced only by a subclass of it (ValueError otherwise)."""
    if not isinstance(m, (Method, Comparison)):
        raise TypeError(f"register() takes a Method or a Comparison, not {type(m).__name__}")
    kinds.register_kind(m)


def method_for(kind: str, *, gate: str | None = None, path: str | Path | None = None) -> Method:
    """The Method of statistic ``kind``; a :class:`ConfigError` naming the thresholds file, the gate
    and ``statistic`` (and listing the known kinds) when none is registered."""
    m = kinds.kind(kind)
    if isinstance(m, Method):
        return m
    known = ", ".join(k for k in kinds.known_kinds() if isinstance(kinds.kind(k), Method))
    why = "has no Method registered" if m is not None else "is unknown"
    raise ConfigError(path or "thresholds.toml", f"gates.{gate}" if gate else "", "statistic",
                      f"statistic kind {kind!r} {why} (known: {known}; add one with "
                      "pytest_perfgate.verdicts.methods.register)")


def comparison_for(kind: str, *, gate: str | None = None, path: str | Path | None = None) -> Comparison:
    """The Comparison of ``compare = kind``; a :class:`ConfigError` naming file, gate and ``compare``."""
    m = kinds.comparison_kind(kind)
    if isinstance(m, Comparison):
        return m
    raise ConfigError(path or "thresholds.toml", f"gates.{gate}" if gate else "", "compare",
                      f"comparison kind {kind!r} is unknown (known: {', '.join(kinds.compare_kinds())})")


def _none(v: float) -> stats.Bounds:
    return stats.Bounds(v, -math.inf, math.inf, "none")


class QuantileMethod(kinds.QuantileKind, Method):
    """An order statistic: distribution-free binomial bounds, MLPerf-style early stopping."""

    accepts_proportion = False

    def point(self, st: Statistic, d: Samples) -> float:
        assert st.q is not None
        return stats.empirical_quantile(d.values, st.q)

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> stats.Bounds:
        assert st.q is not None
        return stats.quantile_bounds(d.values, st.q, c)

    def side_bounds(self, st: Statistic, d: Samples, c: float) -> stats.Bounds:
        """One run's own bounds of a comparison, from its own dependence (its blocks in arrival order)."""
        assert st.q is not None
        x = d.ordered()
        return blocked.quantile_bounds(x, st.q, c, blocked.for_quantile(x, st.q, d.dependence(x), d.label != "itl"))

    def evaluate(self, gate: Gate, d: Data, c: float, unit: str) -> Estimate:
        """Decided on the run's blocks in arrival order (:mod:`.blocked`; block 1: independent)."""
        assert isinstance(d, Samples) and gate.statistic.q is not None
        q, x = gate.statistic.q, d.ordered()
        dep = run = d.dependence(x)
        over = censored(gate, d)
        note = ""
        if over:  # failed requests within the error budget: over the limit, never dropped
            x = blocked.censor(x, over)
            dep = blocked.censor_dependence(dep, over)
            note = f"{over} failed request(s) counted as over the limit (censored: {d.requests.listed(3) if d.requests else ''})"
        dep = blocked.for_quantile(x, q, dep, d.label != "itl")  # chunk gaps: no heavy-tail raise
        b = blocked.quantile_bounds(x, q, c, dep)
        if gate.direction is None or gate.threshold is None:
            outcome, needed = "recorded", None
        else:
            outcome, needed = blocked.decision(x, q, c, gate.direction, gate.threshold.base, dep)
        details = dep.details() if dep.dependent else {}
        floor = ""
        if needed and dep.dependent and gate.direction is not None and gate.threshold is not None:  # issue 39
            floor, more = projection.floor_note(x, q, c, gate.direction, gate.threshold.base, dep, needed,
                                                "chunk gaps" if d.label == "itl" else "requests")
            details.update(more)
        elif needed and gate.direction is not None and gate.threshold is not None:
            chance = blocked.decide_chance(x, q, c, gate.direction, gate.threshold.base, dep, needed)
            if math.isfinite(chance):
                details["needed_chance"] = round(chance, 3)
        cost, what = "", (("chunk gaps", "gap") if d.label == "itl" else ("requests", "request"))  # ITL: one sample a gap
        far = outcome == "pass" and gate.direction is not None and gate.threshold is not None \
            and blocked.far_limit(x, gate.threshold.base, gate.direction, dep)
        if dep.dependent and gate.direction is not None:  # what dependence costs: the fewest requests to pass
            fewest = stats.early_stopping_min_samples(q if gate.direction == "max" else 1 - q, c, 0)
            near = f" at a limit under {blocked.far_ratio(dep.far_span):.3g}x the largest value" if far else ""
            cost = f"a {gate.statistic.text} pass{near} needs >= ~{dep.scale(fewest):,} {what[0]} at this dependence"
        if far and gate.threshold is not None:
            details["far_limit_tau"] = float(dep.far)
            note = "; ".join(v for v in (note, far_note(dep, what, gate.threshold.base / float(np.max(x)))) if v)
        if floor:
            note = "; ".join(v for v in (note, floor) if v)
        if dep.shifted:
            details.update(level_shifts=float(len(dep.shifts)), dependence_tau_run=float(run.tau))
            if dep.drift:
                details["level_drift"] = 1.0
            note = "; ".join(v for v in (note, shift_note(x, dep, what)) if v)
        return Estimate(outcome, b.observed, b.lower, b.upper, int(x.size), c, b.method, unit, needed,
                        dependence_note(note, dep, cost, what), details)


def dependence_note(note: str, dep: Dependence, cost: str = "", what: tuple[str, str] = ("requests", "request")) -> str:
    """``note`` with what the run's dependence costs ("n = 3,000, about 410 independent: about 7.3
    requests carry one independent request's information; a p99 pass needs >= ~2,200 requests ...")."""
    if not dep.dependent:
        return note
    return "; ".join(x for x in (note, f"{dep.describe()}: {dep.cost(what)}", cost) if x)


def _mean_side(d: Samples, c: float) -> stats.Bounds:
    """One run's own bounds of a mean in a comparison: batch means over its own dependence."""
    return _none(float(d.values[0])) if d.n < 2 else blocked.mean_bounds(x := d.ordered(), c, None, d.dependence(x))


class MeanMethod(kinds.MeanKind, Method):
    """The mean: t bounds with a skewness (Hall) check that withholds a bound on a heavy tail."""

    def point(self, st: Statistic, d: Samples) -> float:
        return float(np.mean(d.values))

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> stats.Bounds:
        return blocked.mean_bounds(x := d.ordered(), c, direction, d.dependence(x))

    def side_bounds(self, st: Statistic, d: Samples, c: float) -> stats.Bounds:
        return _mean_side(d, c)

    def needed(self, st: Statistic, d: Samples, c: float, direction: str, thr: float) -> int | None:
        return blocked.mean_needed(x := d.ordered(), c, thr, d.dependence(x))

    def note(self, gate: Gate, d: Samples, b: stats.Bounds) -> str:
        return dependence_note(b.warning, d.dependence())

    def evaluate(self, gate: Gate, d: Data, c: float, unit: str) -> Estimate:
        e = super().evaluate(gate, d, c, unit)
        dep = d.dependence() if isinstance(d, Samples) else None
        return replace(e, details={**e.details, **dep.details()}) if dep is not None and dep.dependent else e

    def select(self, gate: Gate, d: Data) -> Method:
        m = super().select(gate, d)
        return method_for("paired") if m is self and gate.params.get("paired") == "discordant" else m


class ValueMethod(kinds.ValueKind, Method):
    """One run-level number (``single = true``), repeated runs gated by their mean, a proportion's
    rate or a ratio of sums (the ``proportion`` and ``sums`` Methods)."""

    pooled_ratio = True

    point = MeanMethod.point
    needed = MeanMethod.needed
    side_bounds = MeanMethod.side_bounds

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> stats.Bounds:
        return stats.mean_bounds(d.values, c, direction)

    def note(self, gate: Gate, d: Samples, b: stats.Bounds) -> str:
        return "; ".join(x for x in ("mean of repeated runs", b.warning) if x)

    def select(self, gate: Gate, d: Data) -> Method:
        m = super().select(gate, d)
        return method_for("sums") if m is self and isinstance(d, Samples) and d.denominators is not None else m

    def check_compare_side(self, gate: Gate, d: Data) -> None:
        if isinstance(d, Samples) and d.n > 1 and d.denominators is None:
            raise SampleError(f"gate {gate.name}: statistic 'value' needs one value per run, got {d.n} samples "
                              "(several runs per side: pass two lists of runs)")

    def evaluate(self, gate: Gate, d: Data, c: float, unit: str) -> Estimate:
        assert isinstance(d, Samples)
        if d.n != 1:
            return super().evaluate(gate, d, c, unit)
        obs = float(d.values[0])
        if gate.single or gate.direction is None:
            b = stats.Bounds(obs, obs, obs, "single")
            return Estimate(decide(gate, b), obs, obs, obs, 1, c, "single", unit, None,
                            "single measurement: no confidence interval (the gate sets single = true)"
                            if gate.single else "single measurement: no confidence interval")
        return Estimate("inconclusive", obs, -math.inf, math.inf, 1, c, "none", unit, None,
                        "one measured number has no confidence bound: repeat the run (the runs' values are "
                        "then gated by their mean) or set single = true on the gate to accept one measurement")


class SumsMethod(Method):
    """A ratio of sums (e.g. tokens over busy seconds, one pair per request): the ratio estimator with
    cluster-robust t bounds. Chosen by the data (``Samples.denominators``), not named in a file."""

    kind = "sums"

    def point(self, st: Statistic, d: Samples) -> float:
        assert d.denominators is not None
        return float(d.values.sum() / d.denominators.sum())

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> stats.Bounds:
        assert d.denominators is not None
        return stats.ratio_bounds(d.values, d.denominators, c, "ratio estimator, cluster-robust t")

    def side_bounds(self, st: Statistic, d: Samples, c: float) -> stats.Bounds:
        assert d.denominators is not None
        return stats.ratio_bounds(d.values, d.denominators, c)

    def note(self, gate: Gate, d: Samples, b: stats.Bounds) -> str:
        return "" if d.n >= 2 else "one request: a ratio's bound needs >= 2"

    def evaluate(self, gate: Gate, d: Data, c: float, unit: str) -> Estimate:
        e = super().evaluate(gate, d, c, unit)
        return replace(e, needed=2 if e.n < 2 and e.outcome == "inconclusive" else None)


class ProportionMethod(Method):
    """A rate of successes over trials: Clopper-Pearson, or cluster-robust (Korn-Graubard) bounds when
    the trials come in clusters (prompts, images); ``needed`` from the design effect."""

    kind = "proportion"

    def point(self, st: Statistic, d: Data) -> float:
        assert isinstance(d, Proportion)
        return d.successes / d.trials if d.trials else math.nan

    def bounds(self, st: Statistic, d: Data, c: float, direction: str | None) -> stats.Bounds:
        assert isinstance(d, Proportion)
        flat, dep = blocked.arrival_rate(d)
        return blocked.rate_bounds(flat, c, dep) if dep.dependent else proportion_bounds(flat, c)[0]

    def side_bounds(self, st: Statistic, d: Data, c: float) -> stats.Bounds:
        return self.bounds(st, d, c, None)

    def evaluate(self, gate: Gate, d: Data, c: float, unit: str) -> Estimate:
        assert isinstance(d, Proportion)
        if d.trials == 0:
            raise SampleError(f"gate {gate.name}: {d.label or gate.metric}: 0 trials, nothing was measured")
        d, dep = blocked.arrival_rate(d)
        b, note = proportion_bounds(d, c, gate.metric)
        if dep.dependent:
            b = blocked.rate_bounds(d, c, dep)
            note = dependence_note(f"{d.successes}/{d.trials} requests in arrival order", dep)
        outcome = decide(gate, b)
        needed = None
        details = dict(d.extra)
        if outcome == "inconclusive" and gate.threshold is not None and gate.direction is not None:
            if b.method == ACCEPTED_PREFIX:  # requests, as its bound counts them (wording.needed_units)
                cs, ct = d.clusters()
                needed = requests_to_decide(cs, ct, c, gate.threshold.base)
                details["requests"] = float(np.count_nonzero(ct))
            else:
                deff = stats.design_effect(*d.clusters()) if d.clustered else dep.per_independent
                needed = stats.proportion_needed(d.successes, d.trials, c, gate.direction, gate.threshold.base, deff)
        if dep.dependent:
            details.update(dep.details())
        return Estimate(outcome, b.observed, b.lower, b.upper, d.trials, c, b.method, unit, needed, note, details)


class PairedMethod(Method):
    """``params = { paired = "discordant" }`` on a mean gate: per-pair differences in {-1, 0, 1} (e.g. an
    image right with the reference only: +1), bounded exactly on the discordant pairs (an accuracy drop)."""

    kind = "paired"

    def _counts(self, gate: Gate, x: stats.Array) -> tuple[int, int]:
        if not np.all(np.isin(x, (-1.0, 0.0, 1.0))):
            raise SampleError(f"gate {gate.name}: params.paired = \"discordant\" takes one value per pair in "
                              "{-1, 0, 1} (first right only: 1, second right only: -1)")
        return int(np.count_nonzero(x == 1.0)), int(np.count_nonzero(x == -1.0))

    def point(self, st: Statistic, d: Samples) -> float:
        return float(np.mean(d.values))

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> stats.Bounds:
        b = int(np.count_nonzero(d.values == 1.0))
        dd = int(np.count_nonzero(d.values == -1.0))
        return stats.paired_difference_bounds(b, dd, d.n, c)

    def evaluate(self, gate: Gate, d: Data, c: float, unit: str) -> Estimate:
        assert isinstance(d, Samples)
        b, dd = self._counts(gate, d.values)
        e = super().evaluate(gate, d, c, unit)
        return replace(e, note=f"paired: {b} pairs right with the reference only, {dd} with the other only, of {d.n}")


class SustainedMethod(kinds.SustainedKind, Method):
    """A capacity gate (``statistic = "sustained"``): the largest level a load sweep sustains under the
    gate's ``slo`` terms. The sweep decides it (``perfgate_verdict``: load/gates.py, the capacity search
    of load/capacity.py), so there is no per-sample point or bound here."""

    accepts_proportion: ClassVar[bool] = False

    def point(self, st: Statistic, d: Samples) -> float:
        raise SampleError("a capacity gate (statistic = \"sustained\") is decided on a load sweep, not on samples")

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> stats.Bounds:
        raise SampleError("a capacity gate (statistic = \"sustained\") is decided on a load sweep, not on samples")


class Ratio(kinds.RatioKind, Comparison):
    def combine(self, a: float, b: float) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.float64(a) / np.float64(b))


class Difference(kinds.DifferenceKind, Comparison):
    on_sums = False

    def combine(self, a: float, b: float) -> float:
        return a - b

    def unit(self, gate: Gate, a: Data) -> str:
        """A difference is in the metric's own unit."""
        return display_unit(gate, a, a.unit.dimension if isinstance(a, Samples) else "number")


class Reduction(kinds.ReductionKind, Comparison):
    def combine(self, a: float, b: float) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(1 - np.float64(a) / np.float64(b))


for _m in (QuantileMethod(), MeanMethod(), ValueMethod(), SumsMethod(), ProportionMethod(), PairedMethod(), SustainedMethod(),
           Ratio(), Difference(), Reduction()):
    register(_m)

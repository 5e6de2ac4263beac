"""Sequential sampling: draw samples until a gate is decided or a budget runs out.

Looking at the data after every sample and stopping at the first "pass" would inflate the false-pass
rate (optional stopping). We look only at a fixed geometric schedule of sample counts and spend the
error budget ``1 - c`` per kind of error (see :mod:`looks`): a fail may be declared at every look
(``1 - c`` split over all of them), a pass only at the looks where a pass is possible at all
(``1 - c`` split over those), so a clear failure stops after a handful of samples and a pass stays
reachable within ``max_samples``. A budget in which no pass is possible is a usage error.

Proportion draws (acceptance of one round of requests) are pooled keeping their clusters (requests,
or the draw itself when a draw has no per-request data), with ``1 - c`` split over ``max_draws`` looks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import Gate, Thresholds
from ..config.looks import FIRST_LOOK, GROWTH, LookPlan, look_schedule, pass_plan, unreachable_message
from ..config.units import Unit
from ..config.units import unit as unit_of
from .rules import censored, metric_unit, resolve_confidence
from .samples import MetricSource, Proportion, RequestCounts, RequestRun, Samples, make_samples, pool
from .verdict import Verdict, counts_requests, error_verdict, evaluate
from .wording import needed_units


class SequentialUsageError(ValueError):
    """A sequential gate that cannot pass within its budget (names the gate)."""


def plan_for(gate: Gate, c: float, max_n: int, first_look: int = FIRST_LOOK) -> LookPlan:
    """The looks of ``gate`` within ``max_n`` samples; raises :class:`SequentialUsageError` if no pass is reachable."""
    st = gate.statistic
    plan = pass_plan(st.kind, st.q, gate.direction, c, max_n, first_look)
    if plan is None:
        raise SequentialUsageError(unreachable_message(gate.name, st.kind, st.q, gate.direction, c, max_n))
    return plan


@dataclass(frozen=True)
class SequentialResult:
    verdict: Verdict
    samples: Samples
    looks: int
    stopped_by: str  # "decided" | "max_samples" | "max_seconds" | "errors" (error budget exceeded)
    per_look_confidence: float  # of the pass decision (the fail side: ``plan.c_fail``)
    plan: LookPlan | None = None
    seconds: float = 0.0  # time the draws took (the measured rate of an inconclusive verdict's cost)
    # proportion draws: the pooled proportion with its clusters (what the bound used: a baseline
    # comparison and ``perfgate evaluate`` of the stored file need it, not the one pooled fraction)
    pooled: Proportion | None = None

    def cost_to_decide(self) -> str:
        """``projected cost to decide: 1,340 more samples, about 2,010 s at the measured 1.5 s a sample``
        for an inconclusive verdict that can say it, else ""."""
        v, n = self.verdict, self.samples.n
        if v.outcome != "inconclusive" or not v.needed or n <= 0:
            return ""
        what, have = needed_units(v.method, v.n, v.details)  # requests for the accepted-prefix bound
        more = max(0, v.needed - have)
        rate = self.seconds / max(have, 1)
        return (f"projected cost to decide: {v.needed:,} {what} in all ({more:,} more), about "
                f"{more * rate:,.0f} s at the measured {rate:.3g} s a {what.rstrip('s')} "
                "(max_samples / max_seconds to raise)")


def sample_until_decided(
    draw: Callable[[], Any],
    gate: Gate,
    *,
    max_samples: int | None = None,
    max_seconds: float | None = None,
    confidence: float | None = None,
    thresholds: Thresholds | None = None,
    unit: str | Unit = "",
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[int, int, float], None] | None = None,
    max_draws: int = 8,
    first_look: int = FIRST_LOOK,
) -> SequentialResult:
    """Call ``draw()`` (returning a number, a list of numbers, :class:`Samples` or a run result)
    until ``gate`` is decided at the planned looks, ``max_samples`` samples exist, ``max_seconds``
    elapse, or (for run results) the failed requests exceed the gate's error budget. The first look is
    at ``first_look`` samples, fixed before any data (e.g. the size of a run that is the first draw)."""
    settings = thresholds.settings if thresholds else None
    max_n = max_samples or gate.max_samples or (settings.max_samples if settings else 10_000)
    max_s = max_seconds or gate.max_seconds or (settings.max_seconds if settings else 600.0)
    c = resolve_confidence(gate, thresholds, confidence)
    plan = plan_for(gate, c, max_n, first_look) if gate.direction is not None else None
    looks = list(plan.looks) if plan else look_schedule(max_n, first_look)
    c_look = plan.c_pass if plan else c
    c_fail = plan.c_fail if plan else c
    pass_looks = set(plan.pass_looks) if plan else set()
    values: list[float] = []
    shown: Unit | None = None
    t0 = clock()
    next_look = looked = 0
    verdict: Verdict | None = None
    stopped = "max_samples"
    draw = _failed_fraction(draw, gate)  # an error_rate gate: each run's failed fraction
    requests = RequestCounts()  # of the runs drawn so far: failed requests count against the error budget
    over = 0  # failed requests a max latency quantile gate counts as over its limit (censored samples)
    timed = False  # the draws carry send times: the pooled values are decided in draw (arrival) order
    while len(values) + over < max_n:
        got = draw()
        if isinstance(got, Proportion):
            return _proportions(got, draw, gate, c, max_draws, max_s, thresholds, clock, t0, progress)
        counts = got.request_counts() if isinstance(got, RequestRun) else getattr(got, "requests", None)
        if isinstance(counts, RequestCounts):
            requests += counts
            err = error_verdict(gate, requests, thresholds, c)
            if err is not None:
                return SequentialResult(err, Samples(np.asarray(values), shown or unit_of(metric_unit(gate.metric)),
                                                     gate.name, requests=requests), looked, "errors", c_look)
            over += censored(gate, Samples(np.zeros(0), unit_of(""), requests=counts))
        shown = _add(None if isinstance(counts, RequestCounts) and not counts.succeeded else got, gate, unit,
                     shown, values)
        timed = timed or isinstance(got, RequestRun) or (isinstance(got, Samples) and got.sent is not None)
        n_now = len(values) + over
        if progress:
            progress(n_now, max_n, clock() - t0)
        out_of_time = clock() - t0 >= max_s
        if shown is None and out_of_time:
            stopped = "max_seconds"
            break
        if shown is not None and (n_now >= looks[next_look] or out_of_time or n_now >= max_n):  # failures alone: no look
            at = min(n_now, max_n)
            planned = looks[next_look] if looks[next_look] <= at else at
            while next_look < len(looks) - 1 and looks[next_look] <= n_now:
                next_look += 1
            looked += 1
            # a pass only at a planned pass look, or at the last look (time or budget) once a pass is possible
            last = out_of_time or at >= max_n
            may_pass = plan is not None and (planned in pass_looks or (last and at >= plan.first_pass))
            data = _pooled(values, max_n, over, shown, gate.name, requests, timed)
            verdict, decided = _look(gate, data, thresholds, c_fail, c_look if may_pass else None)
            if decided:
                stopped = "decided"
                break
            if out_of_time:
                stopped = "max_seconds"
                break
    if shown is None:
        raise ValueError(f"gate {gate.name}: no draw succeeded ({requests.listed(3) or 'nothing was measured'})")
    data = _pooled(values, max_n, over, shown, gate.name, requests, timed)
    if verdict is None or verdict.n != data.n + over:
        verdict = evaluate(gate, data, confidence=c_fail, thresholds=thresholds)
    return SequentialResult(verdict, data, looked, stopped, c_look, plan, clock() - t0)


def _add(got: Any, gate: Gate, unit: str | Unit, shown: Unit | None, values: list[float]) -> Unit | None:
    """Add the successful values of one draw (None: nothing succeeded) to ``values``; returns the
    unit they are shown in (None while nothing has succeeded)."""
    if got is None:
        return shown
    if isinstance(got, MetricSource) and not isinstance(got, Samples):
        got = got.perfgate_data(gate.metric)
    s = got if isinstance(got, Samples) else make_samples(_as_list(got), unit, label=gate.name)
    shown = shown or s.unit
    if shown.dimension != s.unit.dimension:
        raise ValueError(f"gate {gate.name}: draw() changed units from {shown.name!r} to {s.unit.name!r}")
    values.extend(s.ordered().tolist())  # arrival order when the draw carries send times
    return shown


def _pooled(values: list[float], max_n: int, over: int, shown: Unit, label: str, requests: RequestCounts,
            timed: bool = False) -> Samples:
    """The samples drawn so far; failed requests are carried in ``requests`` (a max latency quantile
    gate counts ``over`` of them as over its limit), successful values up to the budget's rest.
    ``timed``: the values are in arrival order (each draw's in its send order, draws in turn), so
    every look accounts for the dependence of the requests (:mod:`.dependence`)."""
    keep = np.asarray(values[:max(max_n - over, 0)])
    sent = np.arange(keep.size, dtype=np.float64) if timed else None
    return Samples(keep, shown, label, requests=requests if requests.measured else None, sent=sent)


def _look(gate: Gate, data: Samples, thresholds: Thresholds | None, c_fail: float,
          c_pass: float | None) -> tuple[Verdict, bool]:
    """(verdict, decided) at one look: a fail at the fail side's confidence, else (``c_pass``: a
    pass is allowed at this look) a pass at the pass side's, else the fail side's verdict, undecided."""
    verdict = evaluate(gate, data, confidence=c_fail, thresholds=thresholds)
    if verdict.outcome == "fail":
        return verdict, True
    if c_pass is not None:
        v_pass = evaluate(gate, data, confidence=c_pass, thresholds=thresholds)
        if v_pass.outcome == "pass":
            return v_pass, True
    return verdict, False


def _failed_fraction(draw: Callable[[], Any], gate: Gate) -> Callable[[], Any]:
    """``draw`` whose runs become their failed fraction (a Proportion) for an ``error_rate`` gate,
    else ``draw`` itself."""
    if not counts_requests(gate):
        return draw

    def wrapped() -> Any:
        got = draw()
        return got.perfgate_data(gate.metric) if isinstance(got, RequestRun) else got

    return wrapped


def _proportions(
    first: Proportion,
    draw: Callable[[], Any],
    gate: Gate,
    c: float,
    max_draws: int,
    max_s: float,
    thresholds: Thresholds | None,
    clock: Callable[[], float],
    t0: float,
    progress: Callable[[int, int, float], None] | None,
) -> SequentialResult:
    """Proportion draws (e.g. acceptance of one batch of requests): pool them keeping clusters (a
    draw with per-request data adds its requests, one without adds itself as one cluster), look after
    every draw, at most ``max_draws`` looks, each at confidence 1 - (1 - c) / max_draws."""
    c_look = 1 - (1 - c) / max_draws
    parts: list[Proportion] = []
    draws = 0
    got: Any = first
    verdict: Verdict | None = None
    stopped = "max_samples"
    pooled = Proportion(0, 0, gate.name)
    while True:
        if not isinstance(got, Proportion):
            raise TypeError(f"gate {gate.name}: draw() returned a Proportion before, now {type(got).__name__}")
        parts.append(got)
        draws += 1
        pooled = pool(parts, gate.name)
        succ, trials = pooled.successes, pooled.trials
        if progress:
            progress(draws, max_draws, clock() - t0)
        if trials:
            verdict = evaluate(gate, pooled, confidence=c_look, thresholds=thresholds)
            if verdict.outcome in ("pass", "fail", "error"):  # error: failed requests beyond the budget
                stopped = "decided" if verdict.outcome != "error" else "errors"
                break
        if draws >= max_draws:
            break
        if clock() - t0 >= max_s:
            stopped = "max_seconds"
            break
        got = draw()
    if verdict is None:
        verdict = evaluate(gate, pooled, confidence=c_look, thresholds=thresholds)
    return SequentialResult(verdict, Samples(np.asarray([succ / trials if trials else 0.0]), _pct(), gate.name),
                            draws, stopped, c_look, seconds=clock() - t0, pooled=pooled)


def _pct() -> Unit:
    from ..config.units import unit

    return unit("%")


def _as_list(got: Any) -> list[Any]:
    if isinstance(got, (int, float, str)) and not isinstance(got, bool):
        return [got]
    if isinstance(got, Iterable):
        return list(got)
    raise TypeError(f"draw() must return a number, a list of numbers or Samples, got {type(got).__name__}")


def confidence_note(result: SequentialResult, c: float) -> str:
    why = {"decided": "decided", "max_samples": "stopped at max_samples", "max_seconds": "stopped at max_seconds",
           "errors": "stopped: error budget exceeded"}.get(result.stopped_by, f"stopped by {result.stopped_by}")
    looks = "1 look" if result.looks == 1 else f"{result.looks} looks"
    cost = result.cost_to_decide()
    if result.plan is not None:
        return f"sequential: {why} after {looks}; planned {result.plan.describe(c)}" + (f"; {cost}" if cost else "")
    return (
        f"sequential: {why} after {looks}; each look at {result.per_look_confidence:.2%} confidence "
        f"(a {c:.0%} overall level split over the planned looks)"
    )


__all__ = ["SequentialResult", "SequentialUsageError", "sample_until_decided", "look_schedule", "confidence_note",
           "plan_for", "FIRST_LOOK", "GROWTH"]

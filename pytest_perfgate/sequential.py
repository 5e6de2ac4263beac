"""Sequential sampling: draw samples until a gate is decided or a budget runs out.

Looking at the data after every sample and stopping at the first "pass" would inflate the false-pass
rate (optional stopping). We look only at a fixed geometric schedule of sample counts and split the
error budget ``1 - c`` evenly over the planned looks (Bonferroni), so the whole procedure keeps its
false-pass (and false-fail) rate under ``1 - c``. A clear failure stops at the first look (a handful
of samples); a clear pass stops at the first look where the rule allows a pass.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import Gate, Thresholds
from .samples import MetricSource, Proportion, Samples, make_samples
from .units import Unit
from .verdict import Verdict, evaluate

FIRST_LOOK = 5
GROWTH = 1.5


def look_schedule(max_samples: int, first: int = FIRST_LOOK, growth: float = GROWTH) -> list[int]:
    """Sample counts at which the data are examined: first, first*g, ..., max_samples."""
    looks: list[int] = []
    n = float(min(first, max_samples))
    while int(n) < max_samples:
        if not looks or int(n) > looks[-1]:
            looks.append(int(n))
        n *= growth
    looks.append(max_samples)
    return looks


@dataclass(frozen=True)
class SequentialResult:
    verdict: Verdict
    samples: Samples
    looks: int
    stopped_by: str  # "decided" | "max_samples" | "max_seconds" | "errors" (error budget exceeded)
    per_look_confidence: float


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
) -> SequentialResult:
    """Call ``draw()`` (returning a number, a list of numbers, :class:`Samples` or a run result)
    until ``gate`` is decided at the planned looks, ``max_samples`` samples exist, ``max_seconds``
    elapse, or (for run results) the failed requests exceed the gate's error budget."""
    settings = thresholds.settings if thresholds else None
    max_n = max_samples or gate.max_samples or (settings.max_samples if settings else 10_000)
    max_s = max_seconds or gate.max_seconds or (settings.max_seconds if settings else 600.0)
    c = confidence or gate.confidence or (settings.confidence if settings else 0.95)
    looks = look_schedule(max_n)
    c_look = 1 - (1 - c) / len(looks)
    values: list[float] = []
    shown: Unit | None = None
    t0 = clock()
    next_look = 0
    verdict: Verdict | None = None
    stopped = "max_samples"
    looked = 0
    runs = _RunErrors()
    while len(values) < max_n:
        got = draw()
        if isinstance(got, Proportion):
            return _proportions(got, draw, gate, c, max_draws, max_s, thresholds, clock, t0, progress)
        if isinstance(got, MetricSource) and not isinstance(got, Samples):
            # a run result: its failed requests count against the gate's error budget
            runs.add(got)
            err = runs.verdict(gate, thresholds, c)
            if err is not None:
                return SequentialResult(err, Samples(np.asarray(values), shown or runs.unit(gate), gate.name),
                                        looked, "errors", c_look)
            if not getattr(got, "successful", True):
                continue
            got = got.perfgate_data(gate.metric)
        s = got if isinstance(got, Samples) else make_samples(_as_list(got), unit, label=gate.name)
        shown = shown or s.unit
        if shown.dimension != s.unit.dimension:
            raise ValueError(f"gate {gate.name}: draw() changed units from {shown.name!r} to {s.unit.name!r}")
        values.extend(s.values.tolist())
        if progress:
            progress(len(values), max_n, clock() - t0)
        out_of_time = clock() - t0 >= max_s
        if len(values) >= looks[next_look] or out_of_time or len(values) >= max_n:
            while next_look < len(looks) - 1 and looks[next_look] <= len(values):
                next_look += 1
            looked += 1
            data = Samples(np.asarray(values[:max_n]), shown, gate.name)
            verdict = evaluate(gate, data, confidence=c_look, thresholds=thresholds)
            if verdict.outcome in ("pass", "fail"):
                stopped = "decided"
                break
            if out_of_time:
                stopped = "max_seconds"
                break
    assert shown is not None
    data = Samples(np.asarray(values[:max_n]), shown, gate.name)
    if verdict is None or verdict.n != data.n:
        verdict = evaluate(gate, data, confidence=c_look, thresholds=thresholds)
    return SequentialResult(verdict, data, looked, stopped, c_look)


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
    """Proportion draws (e.g. acceptance of one batch of requests): pool successes and trials,
    look after every draw, at most ``max_draws`` looks, each at confidence 1 - (1 - c) / max_draws."""
    c_look = 1 - (1 - c) / max_draws
    succ, trials, draws = 0, 0, 0
    got: Any = first
    verdict: Verdict | None = None
    stopped = "max_samples"
    while True:
        if not isinstance(got, Proportion):
            raise TypeError(f"gate {gate.name}: draw() returned a Proportion before, now {type(got).__name__}")
        succ, trials, draws = succ + got.successes, trials + got.trials, draws + 1
        if progress:
            progress(draws, max_draws, clock() - t0)
        if trials:
            verdict = evaluate(gate, Proportion(succ, trials, gate.name), confidence=c_look, thresholds=thresholds)
            if verdict.outcome in ("pass", "fail"):
                stopped = "decided"
                break
        if draws >= max_draws:
            break
        if clock() - t0 >= max_s:
            stopped = "max_seconds"
            break
        got = draw()
    if verdict is None:
        verdict = evaluate(gate, Proportion(succ, trials, gate.name), confidence=c_look, thresholds=thresholds)
    return SequentialResult(verdict, Samples(np.asarray([succ / trials if trials else 0.0]), _pct(), gate.name),
                            draws, stopped, c_look)


def _pct() -> Unit:
    from .units import unit

    return unit("%")


class _RunErrors:
    """Failed requests pooled over the run results that ``draw()`` returned."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def add(self, run: Any) -> None:
        self.records.extend(getattr(run, "measured", []))

    @property
    def measured(self) -> list[Any]:
        return self.records

    def errors(self) -> Counter[str]:
        from .load.result import error_cause

        return Counter(error_cause(r.error) for r in self.records if r.error is not None)

    def verdict(self, gate: Gate, thresholds: Thresholds | None, c: float) -> Verdict | None:
        from .verdict import error_verdict

        return error_verdict(gate, self, thresholds, c)

    @staticmethod
    def unit(gate: Gate) -> Unit:
        from .metrics import lookup
        from .units import DIMENSION_DEFAULT_UNIT, unit

        m = lookup(gate.metric)
        return unit(DIMENSION_DEFAULT_UNIT.get(m.dimension if m else "number", ""))


def _as_list(got: Any) -> list[Any]:
    if isinstance(got, (int, float, str)) and not isinstance(got, bool):
        return [got]
    if isinstance(got, Iterable):
        return list(got)
    raise TypeError(f"draw() must return a number, a list of numbers or Samples, got {type(got).__name__}")


def confidence_note(result: SequentialResult, c: float) -> str:
    return (
        f"sequential: {result.looks} looks, each at {result.per_look_confidence:.4f} "
        f"(Bonferroni split of {1 - c:g}); stopped by {result.stopped_by}"
    )


__all__ = ["SequentialResult", "sample_until_decided", "look_schedule", "confidence_note"]

"""When a sequential gate looks at its data, and at what confidence (pure Python: no numpy, so that
``config`` can check budgets at load time).

The error budget ``alpha = 1 - c`` is spent separately on the two wrong decisions:

* a false **fail** may happen at any look: ``alpha`` is split evenly (Bonferroni) over all looks of the
  geometric schedule, so a clear failure stops at the first look (a handful of samples);
* a false **pass** can only happen at a look where a pass is possible at all. For a quantile gate that
  needs ``n >= log(alpha_k) / log(q')`` samples (every one of them on the good side of the threshold,
  MLPerf early stopping with 0 over), so the pass budget is split only over the ``K`` looks at or
  after that point, with ``K`` chosen as the smallest count for which those looks exist. Looks before
  it spend nothing on a pass. Each error stays under ``alpha`` (Bonferroni over the looks that can make it).

If no look within the budget can pass, the gate is unpassable: :func:`pass_plan` returns None and the
caller raises a usage error naming the gate.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import statistics
from .statistics import MEAN_MIN_N, Statistic, StatisticKind

FIRST_LOOK = 5
GROWTH = 1.5
__all__ = ["FIRST_LOOK", "GROWTH", "MEAN_MIN_N", "LookPlan", "decidable_size", "look_schedule", "min_pass_samples",
           "pass_plan", "plan_at", "unreachable_message"]


def look_schedule(max_samples: int, first: int = FIRST_LOOK, growth: float = GROWTH) -> list[int]:
    """Sample counts at which the data are examined: first, first*g, ..., max_samples. ``first`` is
    part of the design, fixed before any data (e.g. the size of a run that is the first draw)."""
    if first < 1:
        raise ValueError(f"the first look needs at least 1 sample, not {first}")
    looks: list[int] = []
    n = float(min(first, max_samples))
    while int(n) < max_samples:
        if not looks or int(n) > looks[-1]:
            looks.append(int(n))
        n *= growth
    looks.append(max_samples)
    return looks


def min_pass_samples(kind: str, q: float | None, direction: str | None, alpha: float) -> int:
    """Fewest samples at which a pass is possible at error ``alpha`` (every sample on the good side):
    the registered kind's own count (:meth:`StatisticKind.min_pass_samples`)."""
    return _kind(kind).min_pass_samples(q, direction, alpha)


def _kind(name: str) -> StatisticKind:
    k = statistics.kind(name)
    if k is None:
        raise ValueError(f"unknown statistic kind {name!r} (known: {', '.join(statistics.known_kinds())})")
    return k


@dataclass(frozen=True)
class LookPlan:
    looks: tuple[int, ...]  # every look (fail decisions)
    pass_looks: tuple[int, ...]  # the looks at which a pass may be declared
    c_fail: float  # confidence of the fail bound at each look
    c_pass: float  # confidence of the pass bound at each pass look
    first_pass: int  # fewest samples at which a pass is possible

    def describe(self, c: float) -> str:
        return (f"{len(self.looks)} looks (fail side: {1 - c:g} split over them, each at {self.c_fail:.4f}); "
                f"pass possible from n={self.first_pass}: {len(self.pass_looks)} pass look(s) at "
                f"{', '.join(map(str, self.pass_looks))}, each at {self.c_pass:.4f}")


def pass_plan(kind: str, q: float | None, direction: str | None, c: float, max_samples: int,
              first: int = FIRST_LOOK) -> LookPlan | None:
    """The looks of a sequential gate (the first at ``first`` samples), or None when no pass is
    reachable within ``max_samples``."""
    return plan_at(kind, q, direction, c, look_schedule(max_samples, first))


def plan_at(kind: str, q: float | None, direction: str | None, c: float, looks: list[int]) -> LookPlan | None:
    """The plan of a gate looked at after each of ``looks`` samples (or requests), increasing and fixed
    before any data (a sequential load run's request counts): None when no pass is reachable."""
    alpha = 1 - c
    for k in range(1, len(looks) + 1):
        n0 = min_pass_samples(kind, q, direction, alpha / k)
        passing = [n for n in looks if n >= n0]
        if passing and len(passing) <= k:
            kk = len(passing)
            return LookPlan(tuple(looks), tuple(passing), 1 - alpha / len(looks), 1 - alpha / kk,
                            min_pass_samples(kind, q, direction, alpha / kk))
        if not passing:
            return None
    return None  # pragma: no cover - k = len(looks) always admits the looks >= n0


def unreachable_message(gate: str, kind: str, q: float | None, direction: str | None, c: float, max_samples: int) -> str:
    k = _kind(kind)
    need = k.min_pass_samples(q, direction, 1 - c)
    return (f"gate {gate}: a pass is not reachable within max_samples = {max_samples}: even with every sample "
            f"under the threshold a {k.label(Statistic(kind, q))} pass at {c:g} needs >= {need} samples "
            f"(raise max_samples, lower the confidence, or gate a lower percentile)")


def decidable_size(kind: str, q: float | None, direction: str | None, c: float, compare: str | None) -> int | None:
    """Fewest requests a run needs before the gate can decide (a pass possible): the registered kind's
    own count (a quantile gate's early-stopping minimum, P99 at 95%: 299; a quantile comparison's
    per-run bounds at 1 - alpha/2, P99: 368); None for kinds with no fixed count."""
    return _kind(kind).decidable_size(q, direction, c, compare)

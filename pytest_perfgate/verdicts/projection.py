"""How many samples a run an inconclusive quantile comparison would need if each run's observed
distribution held: the bound it projects is the per-run order-statistic one (each side's bounds at
1 - alpha/2, combined; :func:`pytest_perfgate.verdicts.comparison.evaluate_compare`). At n samples a
run, a side's bounds are the order statistics of ranks :func:`~.bounds.quantile_ranks` gives; with
the run's empirical distribution (linearly interpolated) standing in for the truth they are its
quantiles at rank / n."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from . import bounds as stats

Array = npt.NDArray[np.float64]


def _projected_side(x: Array, q: float, c: float, n: int) -> stats.Bounds:
    lo, hi = stats.quantile_ranks(n, q, c)

    def at(k: int) -> float:
        return float(np.quantile(x, min(k / n, 1.0), method="linear"))

    return stats.Bounds(stats.empirical_quantile(x, q), at(lo) if lo is not None else -math.inf,
                        at(hi) if hi is not None else math.inf, "projected")


def quantile_runs_needed(a: Array, r: Array, q: float, c: float, combine: Callable[[stats.Bounds, stats.Bounds], stats.Bounds],
                         decided: Callable[[stats.Bounds], bool], limit: int = 10**7) -> int | None:
    """The smallest n a run (both runs of n, each side's bounds at ``c``) at which ``combine`` of the
    two projected side bounds is ``decided``; None when no n up to ``limit`` decides it (the two
    observed distributions put the point on the threshold) or a run is empty."""
    if a.size == 0 or r.size == 0:
        return None

    def ok(n: int) -> bool:
        return decided(combine(_projected_side(a, q, c, n), _projected_side(r, q, c, n)))

    n0 = int(min(a.size, r.size))
    return stats._search(n0, ok, limit)

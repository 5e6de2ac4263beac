"""How many interleaved runs (A B A B) a side an inconclusive comparison would need: the projection
behind its "projected cost to decide" (:func:`pytest_perfgate.verdicts.bounds.runs_compare` is the
bound it projects)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import scipy.special as spc

Array = npt.NDArray[np.float64]


def runs_needed(kind: str, a: Array, b: Array, c: float, threshold: float, cap: int = 1000) -> int | None:
    """Runs a side at which the A B A B bound (:func:`~.bounds.runs_compare`) would clear ``threshold`` if the
    observed means and run-to-run spread held: the smallest n with t(c, df_n) * sqrt((s_a^2 + s_b^2) / n)
    below the distance to the threshold (on the logs for a ratio or reduction). None when it cannot
    be projected (fewer than 2 runs a side, no spread, the point on the threshold, or above ``cap``)."""
    if a.size < 2 or b.size < 2:
        return None
    if kind == "difference":
        xa, xb, dist = a, b, abs(float(np.mean(a) - np.mean(b)) - threshold)
    else:
        if np.any(a <= 0) or np.any(b <= 0):
            return None
        ref = threshold if kind == "ratio" else 1 - threshold
        if ref <= 0:
            return None
        xa, xb = np.log(a), np.log(b)
        dist = abs(float(xa.mean() - xb.mean()) - math.log(ref))
    sa, sb = float(np.var(xa, ddof=1)), float(np.var(xb, ddof=1))
    if dist <= 0 or sa + sb <= 0:
        return None
    for n in range(2, cap + 1):
        df = (sa + sb) ** 2 / ((sa * sa + sb * sb) / (n - 1))
        if float(spc.stdtrit(df, c)) * math.sqrt((sa + sb) / n) < dist:
            return n
    return None


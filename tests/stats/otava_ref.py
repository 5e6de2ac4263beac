"""Apache Otava's change-point method (E-divisive means + Student's t-test, Fleming et al. 2023),
reimplemented after otava/analysis.py of apache-otava 0.8.0 as the comparison baseline of
tests/stats/test_change_points.py (the package pins numpy 2.2 / scipy < 1.17 and cannot be installed
beside ours).

Split step: windows of ``window_len`` points every ``window_len // 2``; in each, E-divisive means
(Matteson & James, alpha = 1) proposes the split that maximizes q-hat in every interval between the
change points found so far; a proposal is kept while the two-sided Student t-test (population
standard deviations, as Otava's ``ttest_ind_from_stats`` call) of its two sides has p below 10 x
``max_pvalue`` (the "weak" change points). Merge step: the weakest change point (largest p-value,
recomputed between its neighbours) is removed while its p-value is at least ``max_pvalue``.
Otava's defaults: window 50, max_pvalue 0.001, min_magnitude 0.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import ttest_ind_from_stats


def _pvalue(left: np.ndarray, right: np.ndarray) -> float:
    if len(left) + len(right) <= 2:
        return 1.0
    sl = float(np.std(left)) if len(left) >= 2 else 0.0
    sr = float(np.std(right)) if len(right) >= 2 else 0.0
    _, p = ttest_ind_from_stats(float(np.mean(left)), sl, len(left), float(np.mean(right)), sr, len(right))
    return 1.0 if np.isnan(p) else float(p)


def _qhat_best(x: np.ndarray, min_size: int = 2) -> tuple[int, float]:
    """The split (index of the first point after) maximizing the E-divisive q-hat of ``x``."""
    n = len(x)
    if n < 2 * min_size:
        return -1, 0.0
    d = np.abs(x[:, None] - x[None, :])
    c = d.cumsum(0).cumsum(1)  # 2-D prefix sums

    def block(r0: int, r1: int, c0: int, c1: int) -> float:  # sum of d[r0:r1, c0:c1]
        tot = c[r1 - 1, c1 - 1]
        if r0 > 0:
            tot -= c[r0 - 1, c1 - 1]
        if c0 > 0:
            tot -= c[r1 - 1, c0 - 1]
        if r0 > 0 and c0 > 0:
            tot += c[r0 - 1, c0 - 1]
        return float(tot)

    best, bq = -1, -np.inf
    for t in range(min_size, n - min_size + 1):
        m, k = t, n - t
        between = 2 * block(0, t, t, n) / (m * k)
        within_l = block(0, t, 0, t) / (m * (m - 1))
        within_r = block(t, n, t, n) / (k * (k - 1))
        q = m * k / (m + k) * (between - within_l - within_r)
        if q > bq:
            best, bq = t, q
    return best, bq


def _window_points(x: np.ndarray, start: int, end: int, max_p: float) -> list[int]:
    cps: list[int] = []
    while True:
        bounds = [start, *sorted(cps), end]
        cands = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            t, q = _qhat_best(x[a:b])
            if t > 0:
                cands.append((q, a + t, a, b))
        if not cands:
            return cps
        _, t, a, b = max(cands)
        if _pvalue(x[a:t], x[t:b]) >= max_p:
            return cps
        cps.append(t)


def change_points(series: np.ndarray, window_len: int = 50, max_pvalue: float = 0.001) -> list[int]:
    """Indices (first point after) of Otava's change points."""
    x = np.asarray(series, dtype=np.float64)
    first = max_pvalue * 10 if max_pvalue < 0.05 else max_pvalue * 2
    weak: set[int] = set()
    start, step = 0, window_len // 2
    while start < len(x):
        end = min(start + window_len, len(x))
        new = _window_points(x, start, end, first)
        weak.update(new)
        start = max(max(new) if new else 0, start + step)
    cps = sorted(weak)
    while cps:
        bounds = [0, *cps, len(x)]
        ps = [_pvalue(x[bounds[i]:bounds[i + 1]], x[bounds[i + 1]:bounds[i + 2]]) for i in range(len(cps))]
        worst = int(np.argmax(ps))
        if ps[worst] < max_pvalue:
            break
        del cps[worst]
    return cps

"""The few scipy.stats quantities a verdict needs, without importing scipy.stats (~1.3 s of a
``perfgate gate``'s start, issue 41): the binomial quantile and distribution function through the very
ufuncs ``scipy.stats.binom`` calls (``scipy.special._ufuncs``), the normal quantile through
``scipy.special.ndtri`` (``scipy.stats.norm``'s own ``_ppf``), with ``rv_discrete``'s handling of the
ends. The same numbers as scipy.stats' (tests/stats/test_scipy_free.py); a scipy that moved the ufuncs
falls back to scipy.stats itself.

API::

    binom_ppf(q, n, p)   # scipy.stats.binom.ppf
    binom_cdf(k, n, p)   # scipy.stats.binom.cdf
    norm_ppf(q)          # scipy.stats.norm.ppf
"""

from __future__ import annotations

import math

from scipy import special as spc

try:  # scipy.stats.binom's own ufuncs, without importing scipy.stats (~1.3 s of `perfgate gate`'s start)
    from scipy.special._ufuncs import _binom_cdf, _binom_ppf
except ImportError:  # pragma: no cover - a scipy that moved them: its public distribution
    def _binom_ppf(q: float, n: float, p: float) -> float:
        from scipy import stats as sps

        return float(sps.binom.ppf(q, n, p))

    def _binom_cdf(k: float, n: float, p: float) -> float:
        from scipy import stats as sps

        return float(sps.binom.cdf(k, n, p))


def _binom_ok(n: float, p: float) -> bool:
    return n >= 0 and float(n) == math.floor(n) and 0.0 <= p <= 1.0


def binom_ppf(q: float, n: float, p: float) -> float:
    """``scipy.stats.binom.ppf(q, n, p)`` number for number: the ufunc scipy's binom uses, with
    ``rv_discrete.ppf``'s ends (q = 0: -1, q = 1: n, bad arguments: NaN)."""
    if not _binom_ok(n, p) or not 0.0 <= q <= 1.0:
        return math.nan
    if q == 0.0:
        return -1.0
    if q == 1.0:
        return float(n)
    return float(_binom_ppf(q, n, p))


def binom_cdf(k: float, n: float, p: float) -> float:
    """``scipy.stats.binom.cdf(k, n, p)`` number for number (``k`` floored; below 0: 0, from n: 1)."""
    if not _binom_ok(n, p) or math.isnan(k):
        return math.nan
    k = math.floor(k)
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(_binom_cdf(k, n, p))


def norm_ppf(q: float) -> float:
    """``scipy.stats.norm.ppf(q)``: its ``_ppf`` is ``scipy.special.ndtri`` (loc 0, scale 1)."""
    return float(spc.ndtri(q))

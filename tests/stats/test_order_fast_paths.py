"""Issue 41's fast paths give the numbers of the general ones: the arrival order from the unstable
sort where no two send times tie, the values themselves when already in arrival order, and a
dependent quantile's bounds counted by binary search in the sorted values; the doubled int32 ranks
and the dependence estimate made from them give the float64 rankdata's numbers."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import special as spc
from scipy import stats as sps

from pytest_perfgate import make_samples
from pytest_perfgate.verdicts import blocked, dependence, ranks
from pytest_perfgate.verdicts import bounds as stats
from pytest_perfgate.verdicts import shifts as level_shifts
from pytest_perfgate.verdicts.dependence import ORDER_CHUNK, Dependence, arrival_order, in_order


def _times(kind: str, rng: np.random.Generator) -> np.ndarray:
    n = 3 * ORDER_CHUNK // 2 if kind == "long" else 500
    t = rng.random(n) * 100
    if kind == "ties":
        t = np.round(t, 1)  # many equal send times: the stable order decides
    elif kind == "late tie":
        t = np.sort(t)[::-1].copy()
        t[-1] = t[-2]  # one tie, in the last chunk
    elif kind == "nan":
        t[7] = math.nan
    elif kind == "sorted":
        t.sort()
    elif kind == "sorted ties":
        t = np.sort(np.round(t))
    elif kind == "long":
        t[ORDER_CHUNK + 3] = t[11]  # a tie whose sorted neighbours straddle a chunk's end, maybe
    return t


@pytest.mark.parametrize("kind", ["distinct", "ties", "late tie", "nan", "sorted", "sorted ties", "long"])
def test_arrival_order_is_the_stable_sort(kind: str) -> None:
    t = _times(kind, np.random.default_rng(5))
    assert np.array_equal(arrival_order(t), np.argsort(t, kind="stable"))
    assert in_order(t) == bool(np.array_equal(np.argsort(t, kind="stable"), np.arange(t.size)))
    v = np.random.default_rng(6).exponential(1.0, t.size)
    d = make_samples(v, "s", sent=np.nan_to_num(t, nan=1.0))
    want = v[np.argsort(np.nan_to_num(t, nan=1.0), kind="stable")]
    assert np.array_equal(d.ordered(), want)
    if kind.startswith("sorted"):
        assert d.ordered() is d.values  # no copy
    for few in ([], [3.0]):
        assert np.array_equal(arrival_order(few), np.argsort(np.asarray(few), kind="stable")) and in_order(few)


def _old_quantile_bounds(x: np.ndarray, q: float, c: float, dep: Dependence) -> stats.Bounds:
    """blocked.quantile_bounds as it was: each count a pass over ``x``."""
    n = int(x.size)
    observed = stats.empirical_quantile(x, q)
    s = np.sort(x[np.isfinite(x)])
    upper_ok = lambda i: blocked._passes(n, int(np.count_nonzero(x >= s[i])), q, c, dep)  # noqa: E731
    lower_fails = lambda i: not blocked._passes(n, int(np.count_nonzero(x <= s[i])), 1 - q, c, dep)  # noqa: E731
    upper = float(s[blocked._first(s.size, upper_ok)]) if s.size and upper_ok(s.size - 1) else math.inf
    if math.isinf(upper) and s.size and not np.isinf(x).any() and blocked._passes(n, 0, q, c, dep):
        upper = float(np.nextafter(s[-1], math.inf))
    far = blocked.far_ratio(dep.far_span) * float(s[-1]) if s.size else math.inf
    if math.isinf(upper) and math.isfinite(far) and blocked.far_limit(x, far, "max", dep) \
            and blocked._passes(n, 0, q, c, blocked._far(dep)):
        upper = far
    j = blocked._first(s.size, lower_fails)
    lower = float(s[j - 1]) if j > 0 else -math.inf
    if j == 0 and s.size and not np.isinf(x).any() and blocked._passes(n, 0, 1 - q, c, dep):
        lower = float(np.nextafter(s[0], -math.inf))
    return stats.Bounds(observed, lower, upper, "order-statistic, dependence-adjusted")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_quantile_bounds_by_binary_search_are_the_counted_ones(seed: int, q: float) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 4000))
    x = np.round(rng.lognormal(0, 1, n), int(rng.integers(0, 3)))  # ties
    if seed % 2:
        x = blocked.censor(x, int(rng.integers(1, 30)))  # failed requests: +inf
    if seed == 4:
        x[:3] = -math.inf
    dep = Dependence(int(x.size), block=int(rng.integers(2, 40)), method="blocks", tau=float(rng.uniform(1.2, 9.0)))
    for d in (dep, replace(dep, far=2.0, far_span=60.0), replace(dep, far=2.0, far_span=20.0)):
        assert blocked.quantile_bounds(x, q, 0.95, d) == _old_quantile_bounds(x, q, 0.95, d)


def _old_centred_tau(y: np.ndarray, top: int) -> float:
    """dependence.centred_tau as it was: batches of 64, 128, 256, ... lags."""
    n = int(y.size)
    c0 = dependence._dot(y, y) / n if n else 0.0  # the module's one-thread dot product
    if top < 1 or not c0 > 0:
        return 1.0
    acov, k, batch = [c0], 1, 64
    while k <= top:
        hi = min(top + 1, k + batch)
        if hi > dependence.DIRECT_LAGS + 1:
            return dependence.geyer_tau(dependence._acf(y, top))
        acov += dependence._direct(y, k, hi)
        k, batch = hi, batch * 2
        rho = np.asarray(acov) / c0
        pairs = rho[: 2 * (rho.size // 2)].reshape(-1, 2).sum(axis=1)
        if (pairs <= 0).any():
            break
    return dependence.geyer_tau(np.asarray(acov) / c0)


@pytest.mark.parametrize("phi", [0.0, 0.3, 0.8, 0.95, 0.99, 0.999])
@pytest.mark.parametrize("n", [50, 3000, 40_000])
def test_tau_from_short_first_batches_is_the_same(phi: float, n: int) -> None:
    rng = np.random.default_rng(int(phi * 1000) + n)
    e = rng.normal(size=n)
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):  # AR(1): tau from 1 to ~2000
        x[i] = phi * x[i - 1] + e[i]
    y = x - x.mean()
    for top in (5, 20, 100, 448, 512, n // 4, n - 1):
        top = min(top, n - 1)
        assert dependence.centred_tau(y, top) == _old_centred_tau(y, top)


def _tied(kind: str, rng: np.random.Generator) -> np.ndarray:
    n = 5000
    x = rng.lognormal(0, 1, n)
    if kind == "ties":
        x = np.round(x, 1)  # many ties
    elif kind == "one value":
        x = np.full(n, 2.5)
    elif kind == "inf":
        x = np.round(x, 2)
        x[rng.integers(0, n, 40)] = math.inf  # censored requests: one tie group at the top
        x[:3] = -math.inf
    elif kind == "two values":
        x = (x > 1.0).astype(np.float64)
    return x


@pytest.mark.parametrize("chunk", [7, 1000, ranks.RANK_CHUNK])
@pytest.mark.parametrize("kind", ["distinct", "ties", "one value", "inf", "two values"])
def test_doubled_ranks_are_rankdata(kind: str, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """2 x scipy's average ranks, integer for integer (tie groups across chunk ends included), and
    the normal scores made from them are ndtri(rankdata / (n + 1)), bit for bit."""
    monkeypatch.setattr(ranks, "RANK_CHUNK", chunk)
    x = _tied(kind, np.random.default_rng(len(kind) + chunk))
    d = ranks.doubled_ranks(x)
    assert d.dtype == np.int32
    want = sps.rankdata(x)
    assert np.array_equal(d, (want * 2).astype(np.int64))
    assert np.array_equal(ranks.average_ranks(x), want)
    old = spc.ndtri(want / (x.size + 1.0))
    assert np.array_equal(ranks.scores_of(d, int(x.size)), old)
    assert np.array_equal(ranks.normal_scores(x), old)
    assert ranks.doubled_ranks(np.zeros(0)).size == 0


def _old_estimate(x: np.ndarray) -> Dependence:
    """dependence.estimate as it was: float64 rankdata scores and their centred copy side by side."""
    n = int(x.size)
    if n < dependence.MIN_N or np.ptp(x) == 0:
        return Dependence(n)
    s = spc.ndtri(sps.rankdata(x) / (n + 1.0))
    y = s - s.mean()
    if not dependence.detected(dependence.centred_autocorrelations(y, min(n - 1, dependence.MAX_LAG)), n):
        return Dependence(n)
    top = min(n - 1, max(2 * dependence.MAX_LAG, n // 4))
    tau, window = dependence.centred_tau_window(y, top)
    b = max(int(math.ceil(dependence.MULTIPLE * tau)), int(math.ceil(n ** (1 / 3))), 2)
    found = level_shifts.find(s, tau, dependence.tau_of)
    if found is None:
        return Dependence(n, min(b, n), dependence.BLOCKS, tau, window=window)
    r = level_shifts.residual(s, found.cuts)
    _, inside = dependence.centred_tau_window(r - r.mean(), top)
    return Dependence(n, min(b, n), dependence.BLOCKS, tau, found.cuts, max(1.0, found.tau), window=window,
                      within_window=inside)


@pytest.mark.parametrize("seed", range(8))
def test_estimate_from_int32_ranks_is_the_old_one(seed: int) -> None:
    """The estimate's scores centred in place and remade from the doubled ranks for the level-shift
    search: every number of the old estimate (shifted runs, ties, censored +inf, send times)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 30_000))
    x = np.empty(n)
    x[0] = 0.0
    e = rng.exponential(1.0, n)
    for i in range(1, n):  # a queue-like memory
        x[i] = max(0.0, x[i - 1] + e[i] - 1.1)
    if seed % 2:  # level shifts: a CPU changing its clock
        x += np.repeat(rng.uniform(0, 20, 4), -(-n // 4))[:n]
    x = np.round(x, int(rng.integers(0, 3)))
    if seed % 3 == 0:
        x = blocked.censor(x, int(rng.integers(1, 30)))  # failed requests appended: +inf
        n = int(x.size)
    got, want = dependence.estimate(x), _old_estimate(x)
    assert got == want
    p = rng.permutation(n)
    assert dependence.estimate(x[p], send_times=p.astype(np.float64)) == want  # put back in arrival order
    t = np.round(rng.random(n) * n / 10)  # tied send times: the stable order
    assert dependence.estimate(x, send_times=t) == _old_estimate(x[np.argsort(t, kind="stable")])

"""Goodput attainment and capacity terms on dependent requests (issue 32 item 2): seeded queues
(tests/queue_runs.py), the truth exactly on the threshold; a share bound may pass at most 1 - c + 3 SE.

Before (Clopper-Pearson on the requests as if independent) the boundary passed 13-65% of these
runs; the blocks bound (verdicts/shares.py) holds, and independent requests keep their power.
Issue 39: the goodput gate with the request rate's own uncertainty (load/goodput.py), on short busy
runs and on independent requests at the true goodput, and its power."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from simhelp import assert_rate

from pytest_perfgate.load.capacity import Term, decide_term
from pytest_perfgate.load.goodput import goodput_bounds
from pytest_perfgate.verdicts.bounds import clopper_pearson
from pytest_perfgate.verdicts.shares import share_bounds

sys.path.insert(0, str(Path(__file__).parents[1]))
import queue_runs as queues  # noqa: E402

C = 0.95
P0 = 0.9  # the attainment on the threshold
IID_POWER, MM1_POWER = 0.55, 0.8  # measured 70% / 92% (test_goodput_gate_power)


def _attainment_passes(soj: np.ndarray, a: float) -> tuple[float, float]:
    """(new, before) pass rates of "attainment >= P0" over the trials' rows (latency in send order)."""
    new = old = 0
    for row in soj:
        good = row <= a
        new += share_bounds(good, C, memory=np.minimum(row / a, 10.0)).bounds.lower >= P0
        old += clopper_pearson(int(good.sum()), good.size, C).lower >= P0
    return new / soj.shape[0], old / soj.shape[0]


@pytest.mark.parametrize(("rho", "n", "stationary"), [(0.5, 500, False), (0.5, 500, True), (0.7, 2000, True),
                                                      (0.9, 5000, True)])
def test_goodput_at_the_boundary_on_mm1(rho: float, n: int, stationary: bool) -> None:
    trials = 400
    rng = np.random.default_rng(int(rho * 100) + n + stationary)
    _, _, soj = queues.mm1(rng, trials, n, rho, 1.0, stationary=stationary)
    new, old = _attainment_passes(soj, -math.log(1 - P0) / (1 - rho))  # P(sojourn <= a) = P0 exactly
    print(f"goodput boundary, M/M/1 rho {rho}, n {n}, {'stationary' if stationary else 'empty'} start: "
          f"before {old:.3f}, blocks {new:.3f}")
    assert old > 0.2
    assert_rate(f"goodput M/M/1 rho {rho} n {n}", new, trials)


def test_goodput_at_the_boundary_closed_loop() -> None:
    """8 users always in flight on one FCFS server: each latency is a sum of 8 services."""
    trials, n, users = 400, 2000, 8
    rng = np.random.default_rng(31)
    _, _, lat = queues.closed_loop(rng, trials, n, users, 1.0)
    new, old = _attainment_passes(lat[:, users:], float(sps.gamma.ppf(P0, users)))
    print(f"goodput boundary, closed loop of {users}, n {n}: before {old:.3f}, blocks {new:.3f}")
    assert_rate("goodput closed loop", new, trials)


def test_independent_requests_keep_their_power() -> None:
    """No dependence shows: exactly Clopper-Pearson (97% vs 90% at 500; 99% vs 80% at 80)."""
    rng = np.random.default_rng(32)
    for n, true, floor in ((500, 0.97, 0.9), (80, 0.99, 0.8)):
        x = rng.exponential(1.0, (300, n))
        a = -math.log(1 - true)
        got = np.mean([share_bounds(r <= a, C, memory=r / a).bounds.lower >= floor for r in x])
        iid = np.mean([clopper_pearson(int((r <= a).sum()), n, C).lower >= floor for r in x])
        print(f"independent, attainment {true} vs {floor}, n {n}: blocks {got:.3f}, Clopper-Pearson {iid:.3f}")
        assert got >= iid - 0.03


def test_a_share_says_what_dependence_costs() -> None:
    rng = np.random.default_rng(33)
    _, _, soj = queues.mm1(rng, 1, 3000, 0.8, 1.0, stationary=True)
    s = share_bounds(soj[0] <= 5.0, C, memory=soj[0])
    assert s.dependent and s.blocks == 30 and 1 < s.n_eff < 3000
    assert s.describe().startswith("n = 3,000, about ") and "(30 blocks of 100 requests in arrival order)" in s.describe()
    flat = share_bounds(np.ones(400, dtype=bool), C, memory=rng.exponential(1.0, 400))
    assert not flat.dependent and flat.describe() == "n = 400, no dependence shown"


def test_capacity_term_on_a_long_level_near_saturation() -> None:
    """The audit's long level: exactly at capacity, utilisation 0.954, 150,000 requests (the batch of
    sqrt(n) saw tau ~ 390 where the truth is 738-1,667, and passed 13.6-24.8%)."""
    trials, n, rate = 120, 150_000, 48.0
    mu = rate + math.log(100) / 2.0  # P99 sojourn = 2 s exactly
    rng = np.random.default_rng(34)
    passed, taus = 0, []
    for _ in range(trials // 10):
        _, _, soj = queues.mm1(rng, 10, n, rate, mu, stationary=True)
        for row in soj:
            r = decide_term(Term("ttft", 2.0), row, C)
            passed += r.decision == "pass"
            taus.append(r.tau)
    print(f"capacity term at utilisation {rate / mu:.3f}, {n} requests: passes {passed / trials:.3f}, "
          f"median tau {np.median(taus):.0f}")
    assert np.median(taus) > 500
    assert_rate("capacity long level rho 0.954", passed / trials, trials)


# -- issue 39, rows 3-4: the goodput gate itself (load/goodput.py), the request rate's uncertainty
# included and a run shorter than 50 x its memory refused
def _goodput_passes(sent: np.ndarray, done: np.ndarray, lat: np.ndarray, a: float,
                    gate: float) -> tuple[float, float, float]:
    """(after, goodput before, attainment before) pass rates of "goodput >= gate" (req/s) over the rows:
    after = goodput_bounds; before = the share bound times the measured rate, taken as known."""
    new = old = att = 0
    for s, d, x in zip(sent, done, lat, strict=True):
        good, mem = x <= a, np.minimum(x / a, 10.0)
        seconds = float(d.max() - s[0])
        share = share_bounds(good, C, memory=mem).bounds.lower
        new += goodput_bounds(good, mem, s, seconds, C).bounds[0] >= gate
        old += share * good.size / seconds >= gate
        att += share >= P0
    t = sent.shape[0]
    return new / t, old / t, att / t


@pytest.mark.parametrize("stationary", [True, False])
def test_goodput_gate_on_a_short_busy_run(stationary: bool) -> None:
    """M/M/1 at utilisation 0.9, 1,000 requests (about 3 independent ones), the gate at the true
    goodput: the attainment's blocks passed 29% / 36% (stationary / empty start; issue 39)."""
    trials, rho = 200, 0.9
    sent, done, soj = queues.mm1(np.random.default_rng(391 + stationary), trials, 1000, rho, 1.0, stationary=stationary)
    new, old, att = _goodput_passes(sent, done, soj, -math.log(1 - P0) / (1 - rho), P0 * rho)
    print(f"goodput gate, M/M/1 0.9, n 1,000, {'stationary' if stationary else 'empty'}: after {new:.3f}, "
          f"before {old:.3f} (attainment alone {att:.3f})")
    assert att > 0.15  # the former failure, reproduced
    assert_rate(f"goodput M/M/1 0.9 n 1000 {'stationary' if stationary else 'empty'}", new, trials)


def _independent(rng: np.random.Generator, trials: int, n: int, p: float) -> tuple[np.ndarray, ...]:
    """Poisson sends at 10 req/s, independent latencies: 10-200 ms, +300 ms for a share 1 - p (limit 250 ms)."""
    gaps = rng.exponential(0.1, (trials, n))
    gaps[:, 0] = 0.0
    sent = np.cumsum(gaps, axis=1)
    lat = rng.uniform(0.01, 0.2, (trials, n)) + np.where(rng.random((trials, n)) >= p, 0.3, 0.0)
    return sent, sent + lat, lat


def test_goodput_at_its_true_value_on_independent_requests() -> None:
    """The gate at exactly 10 req/s x 90%: with the rate taken as known it passed 33% (issue 39)."""
    trials = 400
    sent, done, lat = _independent(np.random.default_rng(394), trials, 500, P0)
    new, old, _ = _goodput_passes(sent, done, lat, 0.25, 10 * P0)
    print(f"goodput gate at the true goodput, independent Poisson requests, n 500: after {new:.3f}, before {old:.3f}")
    assert old > 0.2
    assert_rate("goodput independent n 500 at the truth", new, trials)


def test_goodput_gate_power() -> None:
    """A clearly good system passes: independent requests at 97% against a min of 90% x 10 req/s (n
    1,000), and M/M/1 from empty at utilisation 0.5, 99% attainment against 90% x the rate (n 3,000)."""
    sent, done, lat = _independent(np.random.default_rng(395), 150, 1000, 0.97)
    iid, _, _ = _goodput_passes(sent, done, lat, 0.25, 10 * P0)
    sent, done, soj = queues.mm1(np.random.default_rng(396), 100, 3000, 0.5, 1.0)
    mm1, _, _ = _goodput_passes(sent, done, soj, -math.log(0.01) / 0.5, P0 * 0.5)
    print(f"goodput gate power: independent 97% vs 90%, n 1,000: {iid:.3f}; M/M/1 0.5, 99% vs 90%, n 3,000: {mm1:.3f}")
    assert iid >= IID_POWER and mm1 >= MM1_POWER


def test_a_refused_run_says_what_a_bound_needs() -> None:
    sent, done, soj = queues.mm1(np.random.default_rng(397), 1, 1000, 0.9, 1.0, stationary=True)
    a = -math.log(1 - P0) / 0.1
    b = goodput_bounds(soj[0] <= a, np.minimum(soj[0] / a, 10.0), sent[0], float(done[0].max()), C)
    assert b.bounds == (0.0, math.inf) and (b.attainment.lower, b.attainment.upper) == (0.0, 1.0)
    assert b.refused.startswith("no bound: the run remembers about ") and "a bound needs >= 50 x tau" in b.refused
    assert b.tau * 50 > 1000

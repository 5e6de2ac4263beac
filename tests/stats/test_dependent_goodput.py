"""Goodput attainment and capacity terms on dependent requests (issue 32 item 2): seeded queues
(tests/queue_runs.py), the truth exactly on the threshold; a share bound may pass at most 1 - c + 3 SE.

Before (Clopper-Pearson on the requests as if independent) the boundary passed 13-65% of these
runs; the blocks bound (verdicts/shares.py) holds, and independent requests keep their power."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from simhelp import assert_rate

from pytest_perfgate.load.capacity import Term, decide_term
from pytest_perfgate.verdicts.bounds import clopper_pearson
from pytest_perfgate.verdicts.shares import share_bounds

sys.path.insert(0, str(Path(__file__).parents[1]))
import queue_runs as queues  # noqa: E402

C = 0.95
P0 = 0.9  # the attainment on the threshold


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

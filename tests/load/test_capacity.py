"""The capacity gate: seeded simulations of a queueing server of known capacity (M/M/1, FCFS).

The server: Poisson arrivals at rate R, exponential service at rate mu; TTFT = the sojourn time
(queue + service), whose stationary law is Exponential(mu - R), so P99 TTFT = ln(100) / (mu - R)
and the largest rate meeting "P99 TTFT <= a" is exactly R* = mu - ln(100) / a (the known capacity).
TPOT is i.i.d. lognormal with its P99 at 60% of its limit (never the binding term). Runs start
with an empty queue, as a real run does. Acceptance: false pass at the boundary (R* = target)
<= 1 - c + 3 SE over >= 1,000 trials; power: R* = 1.5 x target passes in >= 90% of trials.
Rates are printed (``pytest -s``) and stated in docs/workloads.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.capacity import (
    Level,
    Term,
    capacity_gate,
    decide_level,
    decide_term,
    level_of,
    load_from_times,
)

C = 0.95
TTFT_LIMIT, TPOT_LIMIT = 2.0, 0.1
TERMS = (Term("ttft", TTFT_LIMIT), Term("tpot", TPOT_LIMIT))


def _limit(trials: int) -> float:
    a = 1 - C
    return a + 3 * math.sqrt(a * (1 - a) / trials)


def mm1(rng: np.random.Generator, trials: int, n: int, rate: float, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """(arrival times, sojourn times), trials x n, from the Lindley recursion (empty at the start)."""
    gaps = rng.exponential(1 / rate, (trials, n))
    gaps[:, 0] = 0.0
    serv = rng.exponential(1 / mu, (trials, n))
    arrivals = np.cumsum(gaps, axis=1)
    soj = np.empty((trials, n))
    w = np.zeros(trials)
    for i in range(n):
        if i:
            w = np.maximum(0.0, w + serv[:, i - 1] - gaps[:, i])
        soj[:, i] = w + serv[:, i]
    return arrivals, soj


def _levels(rng: np.random.Generator, trials: int, n: int, levels: list[float], capacity: float) -> list[list[Level]]:
    """Each trial's decided levels for a server whose SLO capacity is ``capacity`` req/s."""
    mu = capacity + math.log(100) / TTFT_LIMIT
    sigma = 0.3
    tpot_mu = math.log(0.6 * TPOT_LIMIT) - 2.326 * sigma  # P99 at 60% of the limit
    out: list[list[Level]] = [[] for _ in range(trials)]
    for rate in levels:
        arr, soj = mm1(rng, trials, n, rate, mu)
        tpot = rng.lognormal(tpot_mu, sigma, (trials, n))
        for t in range(trials):
            sent = arr[t] * 1e9
            load = load_from_times(sent, sent, sent + soj[t] * 1e9, open_loop=True)
            out[t].append(decide_level(rate, {"ttft": soj[t], "tpot": tpot[t]}, load, TERMS, C))
    return out


def _pass_rate(trials: int, n: int, target: float, capacity: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    grid = [0.5 * target, 0.75 * target, target]
    passed = 0
    for lvls in _levels(rng, trials, n, grid, capacity):
        v = capacity_gate(lvls, target=target, c=C)
        passed += v.outcome == "pass"
    return passed / trials


@pytest.mark.parametrize(("rate", "n"), [(4.0, 3000), (4.0, 6000), (20.0, 12000)])
def test_false_pass_at_the_boundary(rate: float, n: int) -> None:
    trials = 1000
    got = _pass_rate(trials, n, rate, capacity=rate, seed=11)
    print(f"capacity at the boundary, R = {rate:g} req/s, P99 TTFT <= {TTFT_LIMIT:g} s, {n} requests a level: "
          f"false pass {got:.3f} over {trials} trials (limit {_limit(trials):.4f})")
    assert got <= _limit(trials)


@pytest.mark.parametrize(("rate", "n"), [(4.0, 6000), (20.0, 12000)])
def test_power_with_half_again_the_capacity(rate: float, n: int) -> None:
    """The budget: 6,000 requests a level at 4 req/s, 12,000 at 20 req/s (1.5x the SLO capacity is
    a busier queue at 20 req/s, rho 0.62 against 0.48: longer memory, fewer effective requests)."""
    trials = 1000
    got = _pass_rate(trials, n, rate, capacity=1.5 * rate, seed=12)
    print(f"capacity 1.5x the target R = {rate:g} req/s, {n} requests a level: passes {got:.3f} of {trials}")
    assert got >= 0.90


def test_the_naive_iid_rule_would_pass_the_boundary_often() -> None:
    """Why blocks: the order-statistic rule on the requests as if independent passes the boundary far
    too often; the shares over 30 blocks of consecutive requests hold."""
    from pytest_perfgate.verdicts.bounds import quantile_decision

    rng = np.random.default_rng(13)
    mu = 4.0 + math.log(100) / TTFT_LIMIT
    _, soj = mm1(rng, 400, 3000, 4.0, mu)
    naive = np.mean([quantile_decision(s, 0.99, C, "max", TTFT_LIMIT)[0] == "pass" for s in soj])
    honest = np.mean([decide_term(TERMS[0], s, C).decision == "pass" for s in soj])
    print(f"boundary, one term at 95%: i.i.d. rule passes {naive:.3f}, blocks rule {honest:.3f} (400 trials)")
    assert naive > 0.2 and honest <= _limit(400)


def test_saturation_fails_a_level_whatever_its_latencies() -> None:
    sched = np.arange(100) * 0.1e9
    # every request answered fast, but completions span twice the offered window: 5 of 10 req/s
    load = load_from_times(sched, sched, sched * 2 + 1e6, open_loop=True)
    assert load.saturated.startswith("saturated: achieved")
    fast = np.full(100, 0.01)
    lv = decide_level(10.0, {"ttft": fast, "tpot": fast / 10}, load, TERMS, C)
    assert lv.decision == "fail"
    # in flight growing: the middle third sees 1, the last third 5 requests in flight
    done = sched + np.where(np.arange(100) < 67, 0.05e9, 0.5e9)
    assert "in flight grew" in load_from_times(sched, sched, done, open_loop=True).saturated


def test_fixed_sequence_stops_at_the_first_level_that_does_not_pass() -> None:
    rng = np.random.default_rng(3)
    lvls = _levels(rng, 1, 3000, [1.0, 2.0, 3.0, 4.0, 6.0], capacity=3.5)[0]
    v = capacity_gate(lvls, target=3.0, c=C)
    decisions = [lv.decision for lv in v.levels]
    first_bad = next(i for i, d in enumerate(decisions) if d != "pass")
    assert v.sustained == v.levels[first_bad - 1].level if first_bad else v.sustained is None
    text = v.text()
    assert "capacity" in text and "P99 TTFT" in text and "n_eff" in text
    assert v.to_dict()["levels"][0]["terms"][0]["term"] == "P99 TTFT"
    with pytest.raises(ValueError, match="target 5 req/s is not one of the levels"):
        capacity_gate(lvls, target=5.0)


def test_a_level_from_records_counts_failed_requests_as_over_every_limit() -> None:
    recs = []
    for i in range(400):
        t = (i + 1) * 100_000_000
        r = RequestRecord(index=i, scheduled_ns=t, sent_ns=t, chunk_ns=[t + 50_000_000, t + 60_000_000],
                          chunk_tokens=[1, 1], end_ns=t + 60_000_000, output_tokens=2)
        if i % 10 == 0:
            r.error, r.chunk_ns, r.chunk_tokens, r.end_ns = "HTTP 500", [], [], None
        recs.append(r)
    lv = level_of(10.0, recs, TERMS, C, open_loop=True)
    assert lv.terms[0].exceed == 40 and lv.terms[0].decision == "fail"  # 10% failed: P99 over any limit
    assert lv.goodput is not None and lv.goodput.good == 360 and lv.goodput.requests == 400


def test_one_term_at_the_full_error_budget_at_the_boundary() -> None:
    """No Bonferroni slack: a TTFT-only gate spends all of 1 - c on its one term."""
    trials, n = 1000, 6000
    rng = np.random.default_rng(14)
    _, soj = mm1(rng, trials, n, 4.0, 4.0 + math.log(100) / TTFT_LIMIT)
    got = float(np.mean([decide_term(TERMS[0], s, C).decision == "pass" for s in soj]))
    print(f"boundary, TTFT only at 95%, {n} requests: false pass {got:.3f} over {trials} trials")
    assert got <= _limit(trials)


def closed_loop(rng: np.random.Generator, trials: int, n: int, users: int, mu: float) -> np.ndarray:
    """Sojourn times, trials x n, of a closed loop of ``users`` with no think time on one FCFS
    exponential server: request i waits for the users - 1 requests ahead of it, so its TTFT is
    the sum of services i - users + 1 .. i (the first ``users`` are sent at once)."""
    c = np.cumsum(rng.exponential(1 / mu, (trials, n)), axis=1)
    lag = np.concatenate([np.zeros((trials, 1)), c], axis=1)  # lag[:, j] = sum of the first j services
    idx = np.arange(n)
    return c - lag[:, np.maximum(0, idx - users + 1)]


def _closed_pass_rate(trials: int, n: int, target: int, capacity_users: int, seed: int) -> float:
    from scipy import stats as sps

    rng = np.random.default_rng(seed)
    mu = float(sps.gamma.ppf(0.99, capacity_users)) / TTFT_LIMIT  # P99 TTFT = a exactly at capacity_users
    sigma = 0.3
    tpot_mu = math.log(0.6 * TPOT_LIMIT) - 2.326 * sigma
    lvls: list[list[Level]] = [[] for _ in range(trials)]
    for users in (2, target // 2, target):
        soj = closed_loop(rng, trials, n, users, mu)
        tpot = rng.lognormal(tpot_mu, sigma, (trials, n))
        times = np.arange(n, dtype=np.float64)
        for t in range(trials):
            load = load_from_times(np.array([]), times, times + 1, open_loop=False)
            lvls[t].append(decide_level(users, {"ttft": soj[t], "tpot": tpot[t]}, load, TERMS, C))
    return float(np.mean([capacity_gate(lv, target=target, unit="concurrent requests").outcome == "pass"
                          for lv in lvls]))


@pytest.mark.parametrize(("capacity", "n", "floor"), [(8, 3000, None), (12, 8000, 0.90)])
def test_concurrency_capacity_boundary_and_power(capacity: int, n: int, floor: float | None) -> None:
    """Closed loop, target 8 concurrent requests: capacity exactly 8 (false pass), 12 (power)."""
    trials = 1000
    got = _closed_pass_rate(trials, n, 8, capacity, seed=20 + capacity)
    print(f"closed loop, target 8 users, capacity {capacity} users, {n} requests a level: passes {got:.3f} "
          f"of {trials}")
    if floor is None:
        assert got <= _limit(trials)
    else:
        assert got >= floor

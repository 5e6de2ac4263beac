"""Sequential load runs (issue 39, load/decided.py): a run that looks at its gates at 100, 200, 400,
... requests and stops when they are decided keeps each error within 1 - c (+ 3 SE) on dependent
queue runs, and stops early on a clearly good or clearly bad system.

The truth sits exactly on the limit (the boundary): M/M/1 at utilisation 0.5 and 0.7 (stationary
start, the sojourn time's P99 exact), and a continuous-batching server (16 slots, every step slower
for each request in it, Poisson arrivals at about 0.7 of its capacity; its TTFT P99 from four
seeded paths of 250,000 requests: 0.414 s +/- 0.005). benchmarks/bench_sequential_load.py gives
the full table (the expected requests to a decision at 0.5x - 1.5x the limit against a fixed 3,000).
"""

from __future__ import annotations

import numpy as np
import pytest
import queues
import seqload
from simhelp import assert_rate

from pytest_perfgate.config import Thresholds
from pytest_perfgate.load.decided import LoadLooks, PlanError, load_looks

BATCHING_P99 = 0.414  # s: TTFT P99 of queue_runs.batching at 12 requests/s (see the module's docstring)


@pytest.mark.parametrize(("rho", "max_requests", "trials"), [(0.5, 6400, 160), (0.7, 6400, 160)])
def test_p99_at_the_limit_on_mm1_keeps_its_rate(th: Thresholds, rho: float, max_requests: int, trials: int) -> None:
    rng = np.random.default_rng(390 + int(rho * 10))
    v, sent = queues.mm1(rng, trials, max_requests, rho)
    gate = seqload.at(th.gate("ttft_p99"), queues.mm1_quantile(0.99, rho))
    passed, _, mean_n = seqload.rates(gate, v, sent, max_requests)
    print(f"RATE sequential load P99, M/M/1 {rho}, <= {max_requests}: {passed:.3f} (mean {mean_n:,.0f} requests)")
    assert_rate(f"sequential load P99 at the limit, M/M/1 {rho}", passed, trials)


def test_p99_at_the_limit_on_a_batching_server_keeps_its_rate(th: Thresholds) -> None:
    import queue_runs  # tests/queue_runs.py

    trials, n, warm = 100, 3200, 500
    rng = np.random.default_rng(3939)
    rows = [queue_runs.batching(rng, n + warm, 12.0) for _ in range(trials)]
    v = np.stack([(first - sent)[warm:] for sent, first, _ in rows])
    sent = np.stack([s[warm:] for s, _, _ in rows])
    passed, _, mean_n = seqload.rates(seqload.at(th.gate("ttft_p99"), BATCHING_P99), v, sent, n)
    print(f"RATE sequential load P99, batching 16 slots, <= {n}: {passed:.3f} (mean {mean_n:,.0f} requests)")
    assert_rate("sequential load P99 at the limit, batching server", passed, trials)


def test_a_clear_case_stops_early_both_ways(th: Thresholds) -> None:
    """M/M/1 0.5: a P99 at 1.5x its limit fails at an early look in every run; at half its limit
    it passes in >= 80% of runs, on average before the budget of 10,000."""
    rng = np.random.default_rng(3901)
    v, sent = queues.mm1(rng, 60, 10_000, 0.5)
    truth = queues.mm1_quantile(0.99, 0.5)
    p_bad, f_bad, n_bad = seqload.rates(seqload.at(th.gate("ttft_p99"), truth / 1.5), v, sent, 10_000)
    p_good, f_good, n_good = seqload.rates(seqload.at(th.gate("ttft_p99"), truth / 0.5), v, sent, 10_000)
    print(f"POWER sequential load P99, M/M/1 0.5: 1.5x fails {f_bad:.2f} after {n_bad:,.0f}; "
          f"0.5x passes {p_good:.2f} after {n_good:,.0f}")
    assert f_bad == 1.0 and n_bad < 3000
    assert p_good >= 0.8 and f_good == 0.0 and n_good < 8000


def test_looks_and_plans() -> None:
    assert load_looks(10_000) == (100, 200, 400, 800, 1600, 3200, 6400, 10_000)
    assert load_looks(3000) == (100, 200, 400, 800, 1600, 3000)
    assert load_looks(50) == (50,)
    with pytest.raises(PlanError, match="max_requests"):
        load_looks(0)


def test_a_gate_no_look_can_pass_is_named(th: Thresholds) -> None:
    with pytest.raises(PlanError, match="gate ttft_p99: no look can pass it within 200 requests"):
        LoadLooks.plan([(th.gate("ttft_p99"), 0.95)], load_looks(200))
    with pytest.raises(PlanError, match="increasing"):
        LoadLooks.plan([(th.gate("ttft_p99"), 0.95)], (400, 200))

"""Quantile gates on heavy-tailed dependent runs (issue 39, "Over the budget" rows 1-2): a gate whose
limit is exactly the true stationary quantile passes at most 5% (+ 3 SE) of seeded runs, and a
clearly good heavy-tailed system still passes.

Before the jump-tail-index raise of ``D`` (``dependence.heavy_factor``), M/G/1 with Pareto service
(shape 2.5) at utilisation 0.5 passed 10-13% at its P99 (n 3,000-30,000) and 9.5% at its P95
(n 10,000); measured now in benchmarks/results-issue39-tails.txt and docs/statistics.md.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import queue_runs
import queues
import tails
from simhelp import assert_rate

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Gate, Thresholds
from pytest_perfgate.config.units import parse_quantity
from pytest_perfgate.verdicts import dependence as dp

TRIALS = 300


def _gate(th: Thresholds, q: float, limit: float) -> Gate:
    g = th.gate("ttft_p99")
    st = dataclasses.replace(g.statistic, q=q, text=f"p{round(q * 100)}")
    return dataclasses.replace(g, statistic=st, threshold=parse_quantity(f"{limit!r} s"))


def _pass_rate(gate: Gate, v: np.ndarray, sent: np.ndarray) -> float:
    return float(np.mean([evaluate(gate, make_samples(v[i], "s", sent=sent[i])).outcome == "pass"
                          for i in range(v.shape[0])]))


@pytest.mark.parametrize(("n", "q"), [(3000, 0.99), (10_000, 0.99), (10_000, 0.95)])
def test_a_gate_at_the_true_pareto_mg1_quantile_keeps_its_rate(th: Thresholds, n: int, q: float) -> None:
    rng = np.random.default_rng(n + int(q * 100))
    v, sent = tails.pareto_mg1(rng, TRIALS, n, 0.5)
    gate = _gate(th, q, tails.pareto_mg1_quantile(q, 0.5))
    assert_rate(f"P{round(q * 100)} at the true limit, M/G/1 Pareto 2.5, rho 0.5, n {n}", _pass_rate(gate, v, sent), TRIALS)


@pytest.mark.parametrize("q", [0.95, 0.99])
def test_a_gate_at_the_chunked_prefill_servers_quantile_keeps_its_rate(th: Thresholds, q: float) -> None:
    """At about 0.75 of the server's capacity the run's memory is long against 3,000 requests and its
    jumps are not heavy (index ~3.2): the heavy-tail raise barely applies, and the estimated D runs low
    (median 22 against a true ~35; ~12 in the runs that passed). D raised by one standard error of its
    own estimate (``dependence.spread_factor``, Madras-Sokal): P95 9.1% -> 6.4%, P99 2.4% -> 0.2% over
    450 runs (benchmarks/results-issue39-row2.txt); this test draws 300 of them (seeds 95 and 1095)."""
    trials = 150
    draws = [tails.chunked_prefill(np.random.default_rng(seed), trials, 3000) for seed in (95, 1095)]
    v, sent = np.concatenate([d[0] for d in draws]), np.concatenate([d[1] for d in draws])
    trials = v.shape[0]
    gate = _gate(th, q, tails.CHUNKED_TTFT[q])
    assert_rate(f"P{round(q * 100)} at the true limit, chunked-prefill batching, n 3000", _pass_rate(gate, v, sent), trials)


def test_a_clearly_good_heavy_tailed_system_still_passes_and_says_why_it_needs_more(th: Thresholds) -> None:
    """M/G/1 Pareto 2.5 at utilisation 0.3, n 10,000, a P99 limit 3x the true P99."""
    trials = 150
    v, sent = tails.pareto_mg1(np.random.default_rng(6), trials, 10_000, 0.3)
    gate = _gate(th, 0.99, 3 * tails.pareto_mg1_quantile(0.99, 0.3))
    rate = _pass_rate(gate, v, sent)
    print(f"POWER P99 at 3x the limit, M/G/1 Pareto 2.5, rho 0.3, n 10000: {rate:.3f}")
    assert rate >= 0.55
    verdict = evaluate(gate, make_samples(v[0], "s", sent=sent[0]))
    assert verdict.details["dependence_heavy"] > 1 and verdict.details["jump_tail_index"] < dp.HEAVY
    assert "the run's jumps have a heavy tail" in verdict.note


def test_the_jump_index_sees_the_service_tail_and_light_queues_are_left_alone() -> None:
    rng = np.random.default_rng(1)
    heavy, _ = tails.pareto_mg1(rng, 20, 3000, 0.5)
    light, _ = queues.mm1(rng, 20, 3000, 0.5)
    h = [dp.jump_index(x) for x in heavy]
    m = [dp.jump_index(x) for x in light]
    assert np.median(h) < 2.6 < dp.HEAVY < np.median(m)
    assert dp.heavy_factor(dp.HEAVY) == dp.heavy_factor(5.0) == dp.heavy_factor(math.inf) == 1.0
    assert 1.0 < dp.heavy_factor(2.8) < dp.heavy_factor(2.2) < dp.heavy_factor(1.5) <= dp.HEAVY_MAX
    assert dp.heavy_factor(1.0) == dp.HEAVY_MAX and dp.jump_index(np.ones(100)) == math.inf


def test_a_batching_servers_bounded_jumps_are_not_read_as_a_heavy_tail() -> None:
    """A continuous-batching server's TTFT jumps mix step jitter with queue onsets, all bounded (the
    largest ~0.4 s): Hill's estimate alone read them as a tail of index ~1.5 and raised D 6-8x over the
    true inflation (D 99-138 against ~27 across 300 runs, n 3,000-30,000), so a P99 at 1.5x headroom
    passed 5% of runs. The moment estimator (Dekkers-Einmahl-de Haan) of the same jumps finds no heavy
    tail (extreme-value index 0.06-0.13; Pareto 2.5 M/G/1: 0.38-0.45), and the raise is left out."""
    rng = np.random.default_rng(5)
    idx = []
    for _ in range(12):
        sent, first, _end = queue_runs.batching(rng, 3500, 12.0)
        idx.append(dp.jump_index((first - sent)[500:]))
    assert np.median(idx) == math.inf, idx
    heavy, _ = tails.pareto_mg1(np.random.default_rng(2), 12, 3000, 0.5)
    assert np.median([dp.jump_index(x) for x in heavy]) < 2.6


@pytest.mark.parametrize("q", [0.5, 0.75])
def test_a_median_keeps_its_rate_without_the_raise_and_an_upper_quartile_with_it(th: Thresholds, q: float) -> None:
    """The raise is for tail quantiles (``blocked.HEAVY_SHARE``): measured on M/G/1 Pareto 2.5, rho
    0.5, n 1,000, 200 runs at the true quantile: P50 2.5% unraised; P75 8.0% unraised, 4.0% raised."""
    trials = 200
    v, sent = tails.pareto_mg1(np.random.default_rng(11), trials, 1000, 0.5)
    gate = _gate(th, q, tails.pareto_mg1_quantile(q, 0.5))
    verdict = evaluate(gate, make_samples(v[0], "s", sent=sent[0]))
    assert ("dependence_heavy" in verdict.details) == (q > 0.5)
    assert_rate(f"P{round(q * 100)} at the true limit, M/G/1 Pareto 2.5, rho 0.5, n 1000", _pass_rate(gate, v, sent), trials)


def test_chunk_gaps_and_medians_are_not_raised() -> None:
    """A median 184x inside its limit on a stalled run, and chunk gaps at any quantile, keep the
    measured D (the raise models a queue's waits; the CI's busy machine made a scripted server's P50
    inconclusive with it)."""
    from pytest_perfgate.verdicts import blocked

    v, _ = tails.pareto_mg1(np.random.default_rng(3), 1, 3000, 0.5)
    x = v[0]
    dep = dp.estimate(x)
    assert dep.dependent
    assert blocked.for_quantile(x, 0.99, dep).heavy > 1
    assert blocked.for_quantile(x, 0.5, dep).heavy == 1.0
    assert blocked.for_quantile(x, 0.99, dep, sojourn=False).heavy == 1.0


def test_the_spread_raise_is_about_one_for_a_short_memory_and_grows_with_the_window_against_n() -> None:
    """``dependence.spread_factor``: D raised by ``z`` standard errors of its own estimate (Madras-Sokal:
    relative variance ``2 (2 M + 1) / n`` for a Geyer window of ``M`` lags): ~1 where the memory is
    short against the run, more where it is long (issue 39 row 2)."""
    from pytest_perfgate.verdicts import blocked

    assert dp.spread_factor(1, 10_000_000) < 1.002
    assert dp.spread_factor(10, 3000) < dp.spread_factor(50, 3000) < dp.spread_factor(50, 1000)
    assert dp.spread_factor(50, 3000) == pytest.approx(1 + dp.SPREAD_Z * math.sqrt(2 * 101 / 3000))
    assert dp.spread_factor(50, 3000, z=0.0) == 1.0 and dp.spread_factor(0, 0) == 1.0
    tau, window = dp.geyer_window(np.asarray([1.0, 0.5, 0.3, 0.1, -0.2, -0.1]))
    assert window == 3 and tau == pytest.approx(-1 + 2 * (1.5 + 0.4))
    assert dp.geyer_window(np.asarray([1.0, -1.0])) == (1.0, 0)
    short, _ = queues.mm1(np.random.default_rng(4), 1, 100_000, 0.3)
    long, _ = tails.chunked_prefill(np.random.default_rng(4), 1, 3000)
    s = blocked.for_quantile(short[0], 0.99, dp.estimate(short[0])).spread
    c = blocked.for_quantile(long[0], 0.95, dp.estimate(long[0])).spread
    assert 1.0 < s < 1.05 < 1.15 < c, (s, c)
    # where it applies: tail quantiles of per-request times only (a median, and chunk gaps, keep the measured D)
    d = dp.estimate(long[0])
    assert blocked.for_quantile(long[0], 0.5, d).spread == 1.0
    assert blocked.for_quantile(long[0], 0.95, d, sojourn=False).spread == 1.0

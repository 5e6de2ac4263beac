"""The per-token model and the exact P99-difference bound: ranks, coverage at the boundary
(seeded simulation), power, and the model on real H200 NCCL timings (tests/fixtures/gpu)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from pytest_perfgate import Gate, Thresholds, Verdict, evaluate, make_samples
from pytest_perfgate.config import load_thresholds
from pytest_perfgate.distributed.pertoken import (
    PerToken,
    lower_rank,
    per_token_times,
    quantile_difference,
    samples_for_upper,
    upper_rank,
)
from pytest_perfgate.distributed.sizes import decode_shape

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "gpu" / "allreduce_nccl_h200_world1.json"


def test_block_sums_keep_measurement_order() -> None:
    x = np.arange(10, dtype=float)
    assert per_token_times(x, 4).tolist() == [6.0, 22.0]  # (0+1+2+3), (4+5+6+7); 8, 9 dropped
    with pytest.raises(ValueError):
        per_token_times([1.0, float("nan")], 1)


@pytest.mark.parametrize("n", [1, 50, 299, 300, 1000])
def test_ranks_are_the_exact_binomial_ones(n: int) -> None:
    q, a = 0.99, 0.025
    k = upper_rank(n, q, a)
    if k is None:
        assert sps.binom.cdf(n - 1, n, q) < 1 - a
    else:
        assert sps.binom.cdf(k - 1, n, q) >= 1 - a and (k == 1 or sps.binom.cdf(k - 2, n, q) < 1 - a)
    j = lower_rank(n, q, a)
    if j is not None:
        assert sps.binom.sf(j - 1, n, q) >= 1 - a and (j == n or sps.binom.sf(j, n, q) < 1 - a)
    assert samples_for_upper(q, a) == 368  # 0.99^n <= 0.025 (0.99^367 = 0.02503)


def _pass_rate(shift: float, n: int, reps: int, seed: int, c: float = 0.95) -> tuple[float, float]:
    """Fraction of simulated runs where the gate passes (upper bound < 20 ms), true P99 difference
    = ``shift`` (the cross-node distribution is the single-node one shifted). Lognormal latencies."""
    rng = np.random.default_rng(seed)
    passes = 0
    for _ in range(reps):
        single = rng.lognormal(math.log(0.004), 0.6, n)
        cross = rng.lognormal(math.log(0.004), 0.6, n) + shift
        passes += quantile_difference(cross, single, 0.99, c).decide(0.020) == "pass"
    p = passes / reps
    return p, math.sqrt(max(p * (1 - p), 1e-12) / reps)


def test_false_pass_rate_at_the_boundary() -> None:
    """True difference exactly at the 20 ms threshold: pass rate <= 1 - c (+ 3 standard errors)."""
    p, se = _pass_rate(0.020, 500, 1500, seed=13)
    assert p <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 1500), (p, se)


def test_power_well_under_the_threshold() -> None:
    """True difference 2 ms (10x under): the gate passes nearly always with 1,000 tokens per layout."""
    p, _ = _pass_rate(0.002, 1000, 300, seed=14)
    assert p >= 0.95


def test_too_few_tokens_are_inconclusive_with_the_needed_count() -> None:
    th = load_thresholds(ROOT / "thresholds.toml")
    g = th.gate("cross_node_p99_increase")
    x = np.full(100, 0.001)
    v = cross_node_verdict(g, x, x, confidence=0.95, thresholds=th)
    assert v.outcome == "inconclusive" and v.needed == 368 and "368" in v.summary()


def cross_node_verdict(g: Gate, cross: np.ndarray, single: np.ndarray, *, confidence: float,
                       thresholds: Thresholds) -> Verdict:
    """The cross-node gate as the suite evaluates it: the framework's quantile difference on the pair."""
    return evaluate(g, (make_samples(cross, "s"), make_samples(single, "s")), confidence=confidence,
                    thresholds=thresholds)


def test_framework_difference_is_the_order_statistic_bound() -> None:
    """The gate goes through ``evaluate`` (stored data, baseline, confidence override): its bounds
    are exactly :func:`quantile_difference`'s (each run's one-sided order-statistic bound at
    1 - alpha/2, Bonferroni), on 200 seeded cases of every size, confidence and shift."""
    th = load_thresholds(ROOT / "thresholds.toml")
    g = th.gate("cross_node_p99_increase")
    rng = np.random.default_rng(23)
    for _ in range(200):
        n, m = (int(x) for x in rng.integers(20, 900, 2))
        c = float(rng.choice([0.9, 0.95, 0.99]))
        cross = rng.lognormal(math.log(0.004), 0.6, n) + float(rng.choice([0.0, 0.02, 0.05]))
        single = rng.lognormal(math.log(0.004), 0.6, m)
        ref = quantile_difference(cross, single, 0.99, c)
        v = cross_node_verdict(g, cross, single, confidence=c, thresholds=th)
        assert v.outcome == ref.decide(0.020), (n, m, c, v.summary())
        assert v.observed == pytest.approx(ref.observed)
        assert (v.lower, v.upper) == pytest.approx((ref.lower, ref.upper)), (n, m, c)


def test_per_token_holder_medians() -> None:
    t = PerToken()
    assert t.overhead_s is None and t.single_s is None
    t.single, t.cross = np.asarray([1.0, 2.0, 3.0]), np.asarray([2.0, 4.0, 6.0])
    assert t.single_s == 2.0 and t.overhead_s == 2.0


def test_per_token_model_on_h200_nccl_timings() -> None:
    """Real per-iteration NCCL times (H200, CUDA events, world size 1): per-token P99 of a 1-layer
    and a Llama-70B-shaped decode; the gate on two sizes' series (same GPU) passes."""
    doc = json.loads(H200.read_text())
    assert doc["backend"] == "nccl" and doc["unit"] == "us"
    th = load_thresholds(ROOT / "thresholds.toml")
    g = th.gate("cross_node_p99_increase")
    s16 = np.asarray(doc["per_iteration"]["16777216"]) / 1e6
    s64 = np.asarray(doc["per_iteration"]["65536"]) / 1e6
    assert s16.size == s64.size == 1000
    one = decode_shape({"num_hidden_layers": 1, "hidden_size": 8192, "dtype": "float16"})
    tok16, tok64 = per_token_times(s16, one.allreduces_per_token), per_token_times(s64, one.allreduces_per_token)
    assert tok16.size == 500
    # one token = 2 all-reduces: its median is about twice the all-reduce median
    assert np.median(tok16) == pytest.approx(2 * np.median(s16), rel=0.25)
    v = cross_node_verdict(g, tok16, tok64, confidence=0.95, thresholds=th)
    assert v.outcome == "pass" and v.upper < 0.001, v.summary()  # tens of microseconds, far under 20 ms
    llama70 = decode_shape({"num_hidden_layers": 80, "hidden_size": 8192, "dtype": "float16"})
    big = per_token_times(s16, llama70.allreduces_per_token)
    assert big.size == 6  # 1,000 iterations are 6 tokens of a 160-all-reduce model: no P99 bound
    assert cross_node_verdict(g, big, big, confidence=0.95, thresholds=th).outcome == "inconclusive"

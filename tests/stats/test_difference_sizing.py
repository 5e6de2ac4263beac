"""The phase-3 P99 difference (cross-node minus single-node per-token time, max 20 ms) sized for
power (issue 22 item 4): per-token times lognormal, median 50 ms, sigma 0.3, cross-node adding a
fixed overhead. Each run's exact P99 bounds at 97.5%, combined: a clearly good system (5 ms apart)
passed 8% / 31.5% / 86.5% at 500 / 1,000 / 2,000 a side and 99% at 4,000, so
``[params.phase3] tokens = 4000``. Both directions, seeded, through evaluate()."""

from __future__ import annotations

import math

import numpy as np
import pytest
from simhelp import assert_rate

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Thresholds

TOKENS = 4000  # [params.phase3] tokens


def _outcome(th: Thresholds, rng: np.random.Generator, overhead: float, n: int) -> str:
    single = rng.lognormal(math.log(0.05), 0.3, n)
    cross = rng.lognormal(math.log(0.05), 0.3, n) + overhead
    return evaluate(th.gate("cross_node"), (make_samples(cross, "s"), make_samples(single, "s")), thresholds=th).outcome


def test_boundary_twenty_ms(th: Thresholds) -> None:
    """True P99 difference exactly 20 ms (a fixed 20 ms overhead): false pass <= 1 - c + 3 SE."""
    rng = np.random.default_rng(61)
    rate = np.mean([_outcome(th, rng, 0.020, TOKENS) == "pass" for _ in range(1000)])
    assert_rate(f"P99 difference at 20 ms, {TOKENS} a side", float(rate), 1000)


@pytest.mark.parametrize("n,least", [(TOKENS, 0.9), (500, 0.0)])
def test_power_five_ms(th: Thresholds, n: int, least: float) -> None:
    """5 ms apart: >= 90% pass at the sized 4,000 a side (printed at 500, the old size)."""
    rng = np.random.default_rng(62)
    rate = float(np.mean([_outcome(th, rng, 0.005, n) == "pass" for _ in range(400)]))
    print(f"POWER P99 difference 5 ms vs max 20 ms, sigma 0.3, {n} a side: {rate:.3f}")
    assert rate >= least


def test_clear_failure_fails(th: Thresholds) -> None:
    """40 ms apart (twice the limit) fails at the sized design."""
    rng = np.random.default_rng(63)
    assert np.mean([_outcome(th, rng, 0.040, TOKENS) == "fail" for _ in range(100)]) >= 0.9

"""An inconclusive quantile comparison projects the samples a run that would decide it if each
run's observed distribution held (verdicts/projection.py): runs of that many samples drawn to that
distribution decide it; clearly fewer do not. Before, such a verdict said "these data do not
predict how many more samples would decide it" (issue 22, item (f) and "projected cost")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_perfgate import evaluate, load_thresholds, make_samples

ROOT = Path(__file__).parents[2]
TH = load_thresholds(ROOT / "thresholds.toml")


def _at(x: np.ndarray, n: int) -> np.ndarray:
    """n samples laid out on x's empirical distribution (its quantiles at (i + 0.5) / n)."""
    return np.quantile(x, (np.arange(n) + 0.5) / n, method="linear")


def test_projected_samples_decide_a_p50_reduction() -> None:
    g = TH.gate("prefix_cache_prefill_reduction")  # P50 reduction, min 80%, the main job's 12 a side
    rng = np.random.default_rng(7)
    hit = rng.lognormal(np.log(0.22), 0.5, 12)
    cold = rng.lognormal(np.log(1.43), 0.3, 12)
    v = evaluate(g, (make_samples(hit, "s"), make_samples(cold, "s")), thresholds=TH)
    assert v.outcome == "inconclusive" and v.needed is not None and v.needed > 12, v.summary()
    assert f"need >= {v.needed:,} samples a run" in v.summary() and "observed distribution holds" in v.summary()
    assert "do not predict" not in v.summary()
    n = v.needed
    more = evaluate(g, (make_samples(_at(hit, n), "s"), make_samples(_at(cold, n), "s")), thresholds=TH)
    assert more.outcome != "inconclusive", more.summary()
    fewer = evaluate(g, (make_samples(_at(hit, n * 2 // 3), "s"), make_samples(_at(cold, n * 2 // 3), "s")),
                     thresholds=TH)
    assert fewer.outcome == "inconclusive", fewer.summary()


def test_no_projection_when_the_point_sits_on_the_threshold() -> None:
    g = TH.gate("prefix_cache_prefill_reduction")
    x = np.linspace(1.0, 2.0, 12)
    v = evaluate(g, (make_samples(x * 0.2, "s"), make_samples(x, "s")), thresholds=TH)  # exactly 80%
    assert v.outcome == "inconclusive"
    assert v.needed is None or v.needed > 10**5, v.summary()


def test_betabinom_cdf_is_scipys() -> None:
    """The projection's beta-binomial cdf (summed over the shorter side) against scipy's, both sides."""
    from scipy import stats as sps

    from pytest_perfgate.verdicts.projection import betabinom_cdf

    rng = np.random.default_rng(5)
    for i in range(400):
        m = int(rng.integers(1, 6000))
        a, b = float(rng.uniform(0.5, 50)), float(rng.uniform(0.5, 3000))
        a, b = (b, a) if i % 2 else (a, b)
        k = int(rng.integers(-1, m + 2))
        assert betabinom_cdf(k, m, a, b) == pytest.approx(float(sps.betabinom.cdf(k, m, a, b)), abs=1e-9)

"""The quality gates' statistical rule (per-image paired top-1 differences, one-sided mean bound):
its false-pass rate at the boundary and its power, by seeded simulation through the real gate."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pytest_perfgate import evaluate, load_thresholds, make_samples
from pytest_perfgate.vision.quality import simulate_drops

ROOT = Path(__file__).resolve().parents[2]
TH = load_thresholds(ROOT / "thresholds.toml")
SIMS = 1000


def pass_rate(gate: str, n: int, drop: float, discordant: float, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    g = TH.gate(gate)
    passes = 0
    for _ in range(SIMS):
        d = simulate_drops(rng, n, drop, discordant)
        passes += evaluate(g, make_samples(d), thresholds=TH).outcome == "pass"
    p = passes / SIMS
    return p, math.sqrt(max(p * (1 - p), 1e-12) / SIMS)


@pytest.mark.parametrize("gate,n,discordant", [("vision_quality_loss", 840, 0.06), ("vision_quality_loss", 840, 0.15),
                                               ("vision_quality_loss_fine", 150, 0.06)])
def test_false_pass_rate_at_the_boundary(gate: str, n: int, discordant: float) -> None:
    """A true drop of exactly 5% passes at most 1 - c of the time (+ 3 standard errors)."""
    thr = TH.gate(gate).threshold.base  # type: ignore[union-attr]
    c = TH.settings.confidence
    p, se = pass_rate(gate, n, thr, discordant, seed=n + int(discordant * 100))
    assert p <= 1 - c + 3 * se + 1e-9, f"false-pass rate {p:.3f} > {1 - c:.2f} + 3 x {se:.3f}"


def test_power_small_drop_passes() -> None:
    """A 1% drop with 4% of images changing answer (what INT8 gives: < 1%) passes >= 90% of the time
    on the generated set's 840 eval images."""
    p, _ = pass_rate("vision_quality_loss", 840, 0.01, 0.04, seed=7)
    assert p >= 0.9, p


def test_power_large_drop_fails() -> None:
    """A 12% drop (a damaged quantization) never passes and fails (not inconclusive) nearly always."""
    rng = np.random.default_rng(3)
    g = TH.gate("vision_quality_loss")
    outcomes = [evaluate(g, make_samples(simulate_drops(rng, 840, 0.12, 0.2)), thresholds=TH).outcome
                for _ in range(300)]
    assert outcomes.count("pass") == 0
    assert outcomes.count("fail") >= 0.99 * len(outcomes)

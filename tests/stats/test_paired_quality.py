"""Phase 2 quality (issue 22, item 5): the accuracy drop of the quantized encoder as a paired
comparison (the same images through both encoders), bounded exactly on the discordant pairs
(McNemar-style: Clopper-Pearson on the discordance and on the split, Bonferroni), through the real
gates of thresholds.toml. Before: a mean with a skewness guard, inconclusive on the embedded default
("need >= 4950 samples ... heavy tail")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from simhelp import assert_rate

from pytest_perfgate import evaluate, load_thresholds, make_samples
from pytest_perfgate.verdicts import bounds as stats
from pytest_perfgate.vision.quality import simulate_drops

ROOT = Path(__file__).parents[2]
TH = load_thresholds(ROOT / "thresholds.toml")
TRIALS = 1000


def _rate(gate: str, n: int, drop: float, discordant: float, seed: int, outcome: str = "pass") -> float:
    rng = np.random.default_rng(seed)
    g = TH.gate(gate)
    hits = sum(evaluate(g, make_samples(simulate_drops(rng, n, drop, discordant)), thresholds=TH).outcome == outcome
               for _ in range(TRIALS))
    return hits / TRIALS


@pytest.mark.parametrize("gate,n,discordant", [
    ("vision_quality_loss", 600, 0.05), ("vision_quality_loss", 600, 0.08), ("vision_quality_loss", 600, 0.3),
    ("vision_quality_loss_fine", 300, 0.05), ("vision_quality_loss_fine", 300, 0.15),
    ("vision_quality_loss", 2000, 0.1),
])
def test_paired_drop_at_the_boundary(gate: str, n: int, discordant: float) -> None:
    """A true drop of exactly 5% (the max) passes at most 5% + 3 SE of the time."""
    p = _rate(gate, n, 0.05, discordant, seed=n + int(discordant * 1000))
    assert_rate(f"paired top-1 drop 5%, n = {n}, discordant {discordant:.0%}", p, TRIALS)


@pytest.mark.parametrize("gate,n", [("vision_quality_loss", 600), ("vision_quality_loss", 840)])
def test_paired_drop_power(gate: str, n: int) -> None:
    """Clearly good: a 1% drop with 4% of images changing answer (INT8's usual) passes >= 90%."""
    p = _rate(gate, n, 0.01, 0.04, seed=n)
    print(f"POWER paired top-1 drop 1%, 4% discordant, n = {n}: {p:.3f}")
    assert p >= 0.9


def test_paired_drop_fine_power_and_failure() -> None:
    p = _rate("vision_quality_loss_fine", 300, 0.005, 0.02, seed=9)
    print(f"POWER paired fine drop 0.5%, 2% discordant, n = 300: {p:.3f}")
    assert p >= 0.9
    f = _rate("vision_quality_loss_fine", 300, 0.2, 0.25, seed=10, outcome="fail")
    print(f"POWER paired fine drop 20%, 25% discordant, n = 300: fails {f:.3f}")
    assert f >= 0.9


def test_the_embedded_default_decides() -> None:
    """The issue's case: mean 0.5% from 3 losses of 600 images, all one-sided: decided (pass), where
    the mean bound was inconclusive (skewness 14)."""
    d = np.zeros(600)
    d[:3] = 1.0
    v = evaluate(TH.gate("vision_quality_loss"), make_samples(d), thresholds=TH)
    assert v.outcome == "pass" and v.method == "exact paired (discordant pairs)"
    assert "3 pairs right with the reference only, 0 with the other only, of 600" in v.note
    b = stats.paired_difference_bounds(0, 0, 10, 0.95)
    assert b.lower <= 0 <= b.upper and b.upper < 0.5
    with pytest.raises(ValueError, match="paired"):
        evaluate(TH.gate("vision_quality_loss"), make_samples([0.5, 0.0]), thresholds=TH)

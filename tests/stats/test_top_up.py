"""The "(M more)" advice is a plan that keeps its error rate (issue 32, item 3): topping a boundary run
up by the projected M and re-deciding at full confidence passed 8.1-8.9% of runs (optional stopping);
decided at ``wording.top_up_confidence`` (99% for a 95% gate) both looks together stay <= 5%. The
projection says how likely its N is to decide, and that chance is calibrated."""

from __future__ import annotations

import numpy as np
from simhelp import assert_rate

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Thresholds
from pytest_perfgate.verdicts import blocked
from pytest_perfgate.verdicts import bounds as stats
from pytest_perfgate.verdicts.dependence import Dependence
from pytest_perfgate.verdicts.wording import top_up_confidence

C = 0.95


def _topped_up(rng: np.random.Generator, trials: int, n0: int, c2: float) -> float:
    """False-pass rate of: decide at C; if inconclusive, top up to the projected N and decide at c2."""
    passed = 0
    for _ in range(trials):
        x = rng.random(n0)  # the limit 0.99 is exactly the true P99
        outcome, need = stats.quantile_decision(x, 0.99, C, "max", 0.99)
        if outcome == "pass":
            passed += 1
        elif outcome == "inconclusive" and need is not None:
            y = np.concatenate([x, rng.random(need - n0)])
            passed += stats.quantile_decision(y, 0.99, c2, "max", 0.99)[0] == "pass"
    return passed / trials


def test_top_up_at_the_stated_confidence_keeps_the_rate() -> None:
    rng = np.random.default_rng(9)
    trials = 2500
    assert_rate("P99 boundary run of 500 topped up at 99%", _topped_up(rng, trials, 500, top_up_confidence(C)), trials)
    naive = _topped_up(rng, trials, 500, C)
    print(f"RATE P99 boundary run of 500 topped up at 95% (optional stopping): {naive:.4f}")
    assert naive > 0.065  # the advice without its confidence was optional stopping


def test_the_projection_says_how_likely_it_decides_and_is_calibrated(th: Thresholds) -> None:
    rng = np.random.default_rng(4)
    stated, realised = [], []
    for _ in range(40):
        x = rng.random(1000)
        thr = 0.99 + rng.uniform(-0.004, 0.004)
        outcome, need = stats.quantile_decision(x, 0.99, C, "max", thr)
        if outcome != "inconclusive" or need is None or need > 100_000:
            continue
        stated.append(blocked.decide_chance(x, 0.99, C, "max", thr, Dependence(1000), need))
        realised.append(np.mean([stats.quantile_decision(rng.choice(x, need), 0.99, C, "max", thr)[0] != "inconclusive"
                                 for _ in range(60)]))
    print(f"CHANCE stated {np.mean(stated):.3f}, realised {np.mean(realised):.3f} over {len(stated)} runs")
    assert len(stated) >= 20 and abs(float(np.mean(stated)) - float(np.mean(realised))) < 0.08
    v = evaluate(th.gate("ttft_p99"), make_samples(np.full(100, 0.1), "s"))
    assert v.outcome == "inconclusive" and "that many decide nearly every run" in v.summary()
    assert "decide a topped-up run at 99.0% confidence (--perfgate-confidence) to keep 5% over both looks" in v.summary()

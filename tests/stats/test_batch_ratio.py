"""max_safe_batch_ratio within its rate (issue 22, item 6): a deterministic default batch (every
repeat equal) and both candidate settings at exactly 2x. A Mann-Whitney shift interval assumes both
sides share a shape, which a point mass cannot: it passed 8-12% of the time. With one side without
spread the bound is the varying side's exact sign bound over the constant (memory.compare)."""

from __future__ import annotations

import numpy as np
import pytest
from simhelp import assert_rate

from pytest_perfgate.memory.compare import rank_for, ratio_bound, runs_needed

TRIALS = 2000


def _mann_whitney_lower(x: np.ndarray, y: np.ndarray, alpha: float) -> float:
    d = np.sort((np.log(x)[:, None] - np.log(y)[None, :]).ravel())
    k = rank_for(x.size, y.size, alpha)
    return float(np.exp(d[k - 1])) if k else 0.0


def _best_passes(rng: np.random.Generator, repeats: int, center: float, new: bool) -> bool:
    ref = np.full(4, 16.0)  # deterministic default
    # the median exactly at center: half the repeats land on it, the others above (integer batches)
    cands = [center + np.where(rng.random(repeats) < 0.5, 0.0, rng.integers(1, 5, repeats)) for _ in range(2)]
    if new:
        bounds = [ratio_bound(c, ref, 0.95, candidates=2) for c in cands]
        best = max(bounds, key=lambda b: (b.estimate, b.lower))
        return best.lower > 2.0
    lows = [_mann_whitney_lower(c, ref, 0.025) for c in cands]
    ests = [float(np.exp(np.median(np.log(c)[:, None] - np.log(ref)[None, :]))) for c in cands]
    return lows[int(np.argmax(ests))] > 2.0


@pytest.mark.parametrize("repeats", [4, 6, 8])
def test_batch_ratio_deterministic_default_at_2x(repeats: int) -> None:
    rng = np.random.default_rng(240 + repeats)
    before = np.mean([_best_passes(rng, repeats, 32.0, new=False) for _ in range(TRIALS)])
    after = np.mean([_best_passes(rng, repeats, 32.0, new=True) for _ in range(TRIALS)])
    print(f"RATE batch ratio, deterministic default, 2 candidates at 2x, {repeats} repeats: "
          f"before {before:.4f} after {after:.4f}")
    assert_rate(f"batch ratio at 2x, {repeats} repeats, deterministic default", float(after), TRIALS)


def test_batch_ratio_power_and_needed_runs() -> None:
    rng = np.random.default_rng(9)
    power = np.mean([_best_passes(rng, 8, 40.0, new=True) for _ in range(1000)])  # 2.5x the default
    print(f"POWER batch ratio 2.5x, 8 repeats, deterministic default: {power:.3f}")
    assert power >= 0.9
    assert runs_needed([30.0, 31.0], [16.0, 16.0], 0.025) == 6  # the sign bound's minimum
    assert ratio_bound([30.0, 33, 34, 35], [16.0] * 4, 0.95, candidates=2).k == 0  # 4 repeats: no bound

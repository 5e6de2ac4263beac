"""Power for the TTFT gate (issue 22, item 2): in the suite's own design (thresholds.toml's
long_context_ttft, the first look at the first run's size, the budget ttft_max_samples), a clearly
good system (P99 at 0.8x the limit, lognormal sigma 0.5) passes >= 90% within the budget, the
false-pass rate at the boundary holds, inconclusive verdicts say the projected cost to decide, and
a gate whose planned runs can never decide is a usage error at load time."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import special as spc
from simhelp import assert_rate

from pytest_perfgate import make_samples, sample_until_decided
from pytest_perfgate.config import ConfigError, load_thresholds
from pytest_perfgate.verdicts.sequential import plan_for

ROOT = Path(__file__).parents[2]
C = 0.95
GOOD = 0.8  # "clearly good" (docs/statistics.md#power): true P99 at 0.8x the limit, sigma 0.5


@pytest.fixture(scope="module")
def suite() -> tuple[object, dict[str, int], dict[str, int]]:
    th = load_thresholds(ROOT / "thresholds.toml")
    p1 = dict(th.params["phase1"])
    emb = {**p1, **p1.pop("embedded")}
    return th, {"first": p1["requests"], "budget": p1["ttft_max_samples"]}, {"first": emb["requests"],
                                                                             "budget": emb["ttft_max_samples"]}


def _over_counts(rng: np.random.Generator, trials: int, n: int, p: float) -> np.ndarray:
    return np.cumsum(rng.random((trials, n)) < p, axis=1)


def _run(over: np.ndarray, plan: object, q: float = 0.99) -> tuple[np.ndarray, np.ndarray]:
    """sample_until_decided's rule for a max pNN gate, vectorised: (+1 pass / -1 fail / 0, samples used)."""
    n_all = over.shape[1]
    under = np.arange(1, n_all + 1) - over
    out, used, open_ = np.zeros(over.shape[0], int), np.full(over.shape[0], n_all), np.ones(over.shape[0], bool)
    for n in plan.looks:  # type: ignore[attr-defined]
        fail = open_ & (spc.bdtr(under[:, n - 1], n, q) <= 1 - plan.c_fail)  # type: ignore[attr-defined]
        out[fail], used[fail], open_ = -1, n, open_ & ~fail
        if n in plan.pass_looks:  # type: ignore[attr-defined]
            ok = open_ & (spc.bdtr(over[:, n - 1], n, 1 - q) <= 1 - plan.c_pass)  # type: ignore[attr-defined]
            out[ok], used[ok], open_ = 1, n, open_ & ~ok
    return out, used


def _p_over(ratio: float, sigma: float = 0.5) -> float:
    """P(TTFT > limit) when the true P99 is ``ratio`` x the limit (lognormal)."""
    return float(1 - spc.ndtr(spc.ndtri(0.99) + math.log(1 / ratio) / sigma))


@pytest.mark.parametrize("design", ["production", "embedded"])
def test_clearly_good_passes_within_the_suites_budget(suite: tuple, design: str) -> None:  # type: ignore[type-arg]
    th, prod, emb = suite
    d = prod if design == "production" else emb
    gate = th.gate("long_context_ttft")
    plan = plan_for(gate, C, d["budget"], d["first"])
    assert len(plan.pass_looks) >= 3 and plan.pass_looks[0] < d["budget"] // 2  # a pass possible well before the end
    rng = np.random.default_rng(2210 + d["first"])
    trials = 2000
    at, _ = _run(_over_counts(rng, trials, d["budget"], 0.01), plan)
    assert_rate(f"sequential P99 {design} (first look {d['first']}, budget {d['budget']}) at the boundary",
                float(np.mean(at == 1)), trials)
    good, used = _run(_over_counts(rng, trials, d["budget"], _p_over(GOOD)), plan)
    power = float(np.mean(good == 1))
    print(f"POWER sequential P99 {design} at {GOOD}x the limit: {power:.3f}, mean samples {used.mean():.0f}, "
          f"pass looks {plan.pass_looks}")
    assert power >= 0.9
    bad, used_b = _run(_over_counts(rng, trials, d["budget"], _p_over(1.5)), plan)
    print(f"POWER sequential P99 {design} at 1.5x: fails {np.mean(bad == -1):.3f}, mean samples {used_b.mean():.0f}")
    assert np.mean(bad == -1) >= 0.9


def test_old_budgets_measured(suite: tuple) -> None:  # type: ignore[type-arg]
    """Before: budgets 300 / 500 passed a clearly good system 43% / 61% of the time (the figures kept)."""
    th, _, _ = suite
    rng = np.random.default_rng(2212)
    for budget, first in ((300, 4), (500, 100)):
        plan = plan_for(th.gate("long_context_ttft"), C, budget, first)
        out, _ = _run(_over_counts(rng, 2000, budget, _p_over(GOOD)), plan)
        print(f"POWER sequential P99 budget {budget} at {GOOD}x (before): {np.mean(out == 1):.3f}")
        assert np.mean(out == 1) < 0.7


def test_the_rule_is_the_one_sample_until_decided_applies(suite: tuple) -> None:  # type: ignore[type-arg]
    th, prod, _ = suite
    gate = th.gate("long_context_ttft")
    plan = plan_for(gate, C, prod["budget"], prod["first"])
    rng = np.random.default_rng(2213)
    for _ in range(20):
        x = 0.150 * GOOD * np.exp(0.5 * (rng.standard_normal(prod["budget"]) - float(spc.ndtri(0.99))))
        it = iter(x)
        res = sample_until_decided(lambda it=it: make_samples([next(it)], "s"), gate, max_samples=prod["budget"],
                                   thresholds=th, first_look=prod["first"], max_seconds=1e9)
        out, used = _run(np.cumsum(x >= 0.150)[None, :], plan)
        assert res.verdict.n == int(used[0]) and (res.verdict.outcome == "pass") == (out[0] == 1)


def test_inconclusive_says_the_projected_cost(suite: tuple) -> None:  # type: ignore[type-arg]
    th, _, _ = suite
    ticks = iter(range(10**6))
    vals = iter(([0.1] * 100 + [0.2]) * 3 + [0.1] * 200)  # 3 of 400 over the limit: neither side decides

    res = sample_until_decided(lambda: make_samples([next(vals)], "s"), th.gate("long_context_ttft"),
                               max_samples=400, thresholds=th, clock=lambda: float(next(ticks)) * 0.5,
                               max_seconds=1e9)
    assert res.verdict.outcome == "inconclusive" and res.verdict.needed
    more = res.verdict.needed - 400
    cost = res.cost_to_decide()  # the scripted clock: ~0.5 s a sample
    assert cost.startswith(f"projected cost to decide: {res.verdict.needed:,} samples in all ({more:,} more), about ")
    assert " s at the measured 0.5" in cost


def test_planned_runs_that_can_never_decide_are_a_usage_error(tmp_path: Path) -> None:
    text = (ROOT / "thresholds.toml").read_text().replace(
        'statistic = "p50"          # a P99 reduction', 'statistic = "p99"          # a P99 reduction')
    p = tmp_path / "thresholds.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=r"tiered_kv_ttft.*100 requests can never decide.*needs >= 368 requests a run"):
        load_thresholds(p)

"""Draft acceptance under vLLM's accepted-prefix counting (issue 22 item 1): k = 3 / 5 drafts a step,
accepted up to the first rejection, each request stopping at its token limit, per-request acceptance
Beta-distributed (concentration 4: strong, 10: moderate heterogeneity). The truth is the workload's
E[accepted] / E[proposed] (Monte Carlo, 200,000 requests), on the 70% minimum. 1,000 trials a case,
through the public API in the suite's designs (tests/stats/prefixsim.py is the counting model)."""

from __future__ import annotations

import numpy as np
import pytest
from prefixsim import requests, truth
from simhelp import assert_rate

from pytest_perfgate import evaluate, make_proportion, sample_until_decided
from pytest_perfgate.config import Thresholds

LIMIT = 96  # [params.phase1.embedded] prompt_set_max_tokens
# per-token acceptance means whose workload rate is 70% / ~80% (k, concentration) -> (mu70, mu80)
MU = {(3, 4): (0.8521, 0.9065), (3, 10): (0.8415, 0.8995), (5, 4): (0.8997, 0.9390), (5, 10): (0.8915, 0.935)}
CASES = list(MU)
TRIALS = 1000


def _rate(case: tuple[int, int], good: bool) -> tuple[float, float]:
    mu = MU[case][1 if good else 0]
    return mu, truth(mu, case[1], case[0], LIMIT, seed=9)


def _sequential(th: Thresholds, rng: np.random.Generator, mu: float, case: tuple[int, int], first: int, per: int,
                draws: int) -> str:
    sizes = iter([first] + [per] * (draws - 1))

    def draw():  # type: ignore[no-untyped-def]
        a, p = requests(rng, next(sizes), mu, case[1], case[0], LIMIT)
        return make_proportion(a, p)

    return sample_until_decided(draw, th.gate("acceptance"), thresholds=th, max_draws=draws).verdict.outcome


@pytest.mark.parametrize("case", CASES, ids=[f"k{k}-conc{c}" for k, c in CASES])
def test_boundary_twenty_requests(th: Thresholds, case: tuple[int, int]) -> None:
    """One gate on 20 requests (the audited design: 7.6-11.5% false pass with the Wald-type bound)."""
    mu, true = _rate(case, good=False)
    assert 0.6995 <= true < 0.702, true  # on the minimum, never below it (a rate below would flatter the rule)
    rng = np.random.default_rng(31)
    passed = 0
    for _ in range(TRIALS):
        a, p = requests(rng, 20, mu, case[1], case[0], LIMIT)
        passed += evaluate(th.gate("acceptance"), make_proportion(a, p), thresholds=th).outcome == "pass"
    assert_rate(f"accepted-prefix acceptance k={case[0]} concentration {case[1]}, 20 requests", passed / TRIALS, TRIALS)


@pytest.mark.parametrize("case", CASES, ids=[f"k{k}-conc{c}" for k, c in CASES])
def test_boundary_embedded_sequential(th: Thresholds, case: tuple[int, int]) -> None:
    """The embedded suite's sequential path: 20 requests in the first draw (the long-context run's 4
    and a round of 8 + 8), 16 a round after, <= 6 draws (the audited design, 12 / 8 / <= 4: 7.3-12.8%)."""
    mu, _ = _rate(case, good=False)
    rng = np.random.default_rng(32)
    passed = sum(_sequential(th, rng, mu, case, 20, 16, 6) == "pass" for _ in range(TRIALS))
    assert_rate(f"accepted-prefix sequential k={case[0]} concentration {case[1]}, embedded", passed / TRIALS, TRIALS)


@pytest.mark.parametrize("case", CASES, ids=[f"k{k}-conc{c}" for k, c in CASES])
def test_power_at_eighty(th: Thresholds, case: tuple[int, int]) -> None:
    """A true ~80% against the 70% minimum: the production path (the long-context run's 100 requests
    and 16 a round, <= 6 rounds) and the embedded one (20, then 16, <= 6): printed; production holds
    >= 90% at moderate heterogeneity and >= 78% at strong (measured 83.8-99.8%); the embedded one is
    printed (docs/statistics.md#power-table)."""
    mu, true = _rate(case, good=True)
    rng = np.random.default_rng(33)
    n = 400
    prod = np.mean([_sequential(th, rng, mu, case, 116, 16, 6) == "pass" for _ in range(n)])
    emb = np.mean([_sequential(th, rng, mu, case, 20, 16, 6) == "pass" for _ in range(n)])
    print(f"POWER accepted-prefix k={case[0]} concentration {case[1]} at {true:.3f}: production {prod:.3f}, "
          f"embedded {emb:.3f} ({n} trials)")
    assert prod >= (0.9 if case[1] >= 10 else 0.78)

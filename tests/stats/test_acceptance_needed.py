"""The requests an inconclusive draft-acceptance verdict says it needs (issue 22): projected with the
accepted-prefix bound itself (verdicts/acceptance.py ``requests_to_decide``: its skewness guard and
stricter side included), in requests, not the binomial formula's draft tokens. Deterministic: the
observed requests repeated k times have the same pooled rate and the same spread and skewness per
request, and decide exactly when k x n reaches the projected count."""

from __future__ import annotations

import math
from itertools import count

import numpy as np
import pytest
from prefixsim import requests

from pytest_perfgate import evaluate, make_proportion, sample_until_decided
from pytest_perfgate.config import Thresholds
from pytest_perfgate.verdicts.failures import headline
from pytest_perfgate.verdicts.wording import outcome_text


def _repeated(a: np.ndarray, p: np.ndarray, k: int) -> object:
    return make_proportion(np.tile(a, k), np.tile(p, k))


def _seeded(seed: int, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """20 requests of vLLM's counting (k = 3, concentration 4, 96 tokens: tests/stats/prefixsim.py)."""
    return requests(np.random.default_rng(seed), 20, mu, 4, 3, 96)


CASES = {
    # accepted, proposed per request -> (rate, projected requests)
    "4 requests, 77.8%": (np.array([44, 46, 30, 48]), np.array([50, 52, 60, 54])),
    "4 requests, 47.2% (fails at the 12-request floor)": (np.array([30, 28, 10, 34]), np.array([50, 52, 60, 54])),
    "5 requests, 76.2% (the count a multiple of 5)": (np.array([42, 45, 47, 44, 20]), np.array([48, 50, 52, 50, 60])),
    "20 requests, 78.8% (seed 0)": _seeded(0, 0.90),
    "20 requests, 66.5% (seed 1)": _seeded(1, 0.85),
}


@pytest.mark.parametrize("case", list(CASES))
def test_projected_requests_decide(th: Thresholds, case: str) -> None:
    a, p = CASES[case]
    g = th.gate("acceptance")
    v = evaluate(g, make_proportion(a, p), thresholds=th)
    n, need = int(a.size), v.needed
    assert v.outcome == "inconclusive" and need is not None and need > n, v
    assert v.details["requests"] == n
    assert f"need >= {need} requests in all ({need - n} more) if the observed rate and its spread" in v.summary()
    decided = "pass" if v.observed > 0.70 else "fail"
    k_at = math.ceil(need / n)  # the fewest repeats reaching the projected count: decided
    assert evaluate(g, _repeated(a, p, k_at), thresholds=th).outcome == decided, (case, need)
    k_below = (need - 1) // n  # the most repeats short of it: still inconclusive
    if k_below >= 1:
        assert evaluate(g, _repeated(a, p, k_below), thresholds=th).outcome == "inconclusive", (case, need)
    print(f"NEEDED {case}: {need} requests ({k_at * n} repeated decide, {k_below * n} do not)")


def test_the_texts_count_requests(th: Thresholds) -> None:
    """The verdict counts draft tokens in n; the stored record, the failure summary and the sequential
    cost say requests, with the requests measured (not the tokens) subtracted."""
    a, p = CASES["5 requests, 76.2% (the count a multiple of 5)"]
    g = th.gate("acceptance")
    v = evaluate(g, make_proportion(a, p), thresholds=th)
    assert v.needed == 60 and v.n == int(p.sum())
    assert outcome_text(v.to_dict()) == "inconclusive (need >= 60 requests, 55 more)"
    assert "(need 55 more requests)" in headline(v)
    ticks = count()
    res = sample_until_decided(lambda: make_proportion(a, p), g, thresholds=th, max_draws=1,
                               clock=lambda: 2.0 * next(ticks))  # one draw of 5 requests in 2 s
    cost = res.cost_to_decide()
    assert res.verdict.outcome == "inconclusive" and res.verdict.needed is not None
    more = res.verdict.needed - 5
    assert cost.startswith(f"projected cost to decide: {res.verdict.needed:,} requests in all ({more:,} more), "
                           f"about {more * 0.4:,.0f} s at the measured 0.4 s a request"), cost


def test_requests_to_decide_by_one_grid_is_the_bound_search() -> None:
    """``requests_to_decide`` asks of each count whether every candidate rate up to the threshold is
    shown (one grid); the same counts as running the bound's own search (``_edge``) at each count."""
    from pytest_perfgate.verdicts import acceptance as acc
    from pytest_perfgate.verdicts import bounds

    rng = np.random.default_rng(17)
    for i in range(150):
        a, p = requests(rng, int(rng.integers(5, 120)), float(rng.uniform(0.6, 0.95)), (4, 10)[i % 2], (3, 5)[i % 3 % 2], 96)
        thr = float(rng.choice([0.3, 0.5, 0.7, 0.8]))
        s, t = a[p > 0].astype(np.float64), p[p > 0].astype(np.float64)
        rate = float(s.sum() / t.sum())

        def by_search(m: int, rate: float = rate, thr: float = thr, s: np.ndarray = s, t: np.ndarray = t) -> bool:
            b = acc._edge(s, t, 0.95, "above" if rate > thr else "below", rate, size=m)
            return b > thr if rate > thr else b < thr

        assert acc.requests_to_decide(a, p, 0.95, thr) == bounds._search(int(s.size), by_search)

"""Goodput with its Clopper-Pearson bound (scripted records), and a rate sweep on the scripted server."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from pytest_perfgate.calib.scripted_server import Script, ScriptedServer
from pytest_perfgate.contract import Request, RequestRecord
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.load.capacity import Term
from pytest_perfgate.load.goodput import goodput, parse_slos
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.load.sweep import sweep
from pytest_perfgate.verdicts.bounds import clopper_pearson

MS = 1_000_000


def _rec(i: int, ttft_ms: float, tpot_ms: float, n_out: int = 5, error: str | None = None) -> RequestRecord:
    t = (i + 1) * 100 * MS  # sent_ns 0 means "never sent"
    first = t + int(ttft_ms * MS)
    chunks = [first + int(k * tpot_ms * MS) for k in range(n_out)]
    r = RequestRecord(index=i, sent_ns=t, scheduled_ns=t, chunk_ns=chunks, chunk_tokens=[1] * n_out,
                      end_ns=chunks[-1], output_tokens=n_out)
    if error:
        r.error, r.chunk_ns, r.chunk_tokens, r.end_ns = error, [], [], None
    return r


def test_goodput_counts_requests_meeting_every_slo() -> None:
    recs = [_rec(0, 100, 10), _rec(1, 300, 10), _rec(2, 100, 60), _rec(3, 100, 10, n_out=1),
            _rec(4, 100, 10, error="HTTP 500: boom"), _rec(5, 150, 40)]
    g = goodput(recs, "ttft:200,tpot:50")
    # good: 0, 3 (one token: TPOT undefined, no violation), 5; not: 1 (TTFT), 2 (TPOT), 4 (failed)
    assert (g.good, g.requests) == (3, 6)
    span = (recs[5].end_ns - recs[0].sent_ns) / 1e9
    assert g.seconds == pytest.approx(span) and g.rate == pytest.approx(3 / span)
    cp = clopper_pearson(3, 6, 0.95)
    assert (g.attainment.lower, g.attainment.upper) == (cp.lower, cp.upper)
    # goodput's bounds carry the request rate's own uncertainty (a ratio of sums over the requests):
    # no bound below 12 requests
    assert g.rate_bounds == (0.0, math.inf)
    assert "3 of 6 requests met ttft <= 200 ms, tpot <= 50 ms" in g.text()
    assert g.to_dict()["method"].startswith("good requests / seconds, a ratio of sums")
    assert g.to_dict()["dependence"] == "n = 6, no dependence shown"  # too few to estimate: Clopper-Pearson


def test_parse_slos_takes_vllm_syntax_in_ms_and_mappings_in_seconds() -> None:
    assert parse_slos("ttft:200,tpot:50,e2el:1000") == {"ttft": 0.2, "tpot": 0.05, "e2e": 1.0}
    assert parse_slos({"TTFT": 0.5}) == {"ttft": 0.5}
    for bad in ("ttft=200", "itl:5", "ttft:-1"):
        with pytest.raises(ValueError, match="NAME:MILLISECONDS"):
            parse_slos(bad)


def test_goodput_lower_bound_covers_at_the_confidence() -> None:
    """Independent requests, attainment 90%: the one-sided 95% lower bound is over it <= 5% (+ 3 SE)."""
    rng = np.random.default_rng(5)
    trials, n, p = 1000, 60, 0.9
    over = 0
    for _ in range(trials):
        slow = rng.random(n) > p
        g = goodput([_rec(i, 300 if s else 100, 10) for i, s in enumerate(slow)], {"ttft": 0.2})
        over += g.attainment.lower > p
    limit = 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)
    print(f"goodput attainment 90%, n = {n}: lower bound over the truth in {over / trials:.3f} of {trials}")
    assert over / trials <= limit


@pytest.fixture(scope="module")
def engine() -> Iterator[OpenAIEngine]:
    srv = ScriptedServer(Script(ttft=0.002, itl=0.001))
    url = srv.start()
    eng = OpenAIEngine("cal", {"base_url": url, "model": "scripted", "timeout": 10})
    eng.start()
    try:
        yield eng
    finally:
        eng.stop()
        srv.stop()


def test_a_rate_sweep_gives_one_result_per_level_and_a_capacity_verdict(engine: OpenAIEngine) -> None:
    reqs = [Request(prompt="a b", max_tokens=4) for _ in range(30)]
    # P50 terms with a generous 1 s limit: decided on 30 requests whatever the machine's load
    terms = [Term("ttft", 1.0, 0.5), Term("tpot", 1.0, 0.5)]
    sw = sweep(engine, reqs, [40, 20], terms=terms, base=LoadConfig(mode="poisson", rate=1, num_requests=30),
               target=40)
    assert sorted(sw.results) == [20.0, 40.0]
    v = sw.verdict
    assert v is not None and [lv.level for lv in v.levels] == [20.0, 40.0]
    for lv in v.levels:
        assert lv.load.offered == pytest.approx(lv.level, rel=1e-6)  # exact-rate schedule: offered = level
        assert lv.goodput is not None and lv.goodput.requests == 30
    assert v.outcome in ("pass", "fail")  # fail only if this busy machine saturates a loopback stub
    curve = sw.curve()
    assert [p["level"] for p in curve] == [20.0, 40.0] and "ttft_p99" in curve[0]
    # P99 on 30 requests cannot pass: the level is inconclusive and says how many requests would do
    sw99 = sweep(engine, reqs, [20], terms=[Term("ttft", 1.0)], base=LoadConfig(mode="poisson", rate=1,
                                                                                num_requests=30))
    lv = sw99.verdict.levels[0] if sw99.verdict else None
    assert lv is not None and lv.terms[0].decision == "inconclusive" and (lv.terms[0].needed or 0) >= 299
    with pytest.raises(ValueError, match="target 30 is not one of the levels"):
        sweep(engine, reqs, [20], terms=terms, target=30)

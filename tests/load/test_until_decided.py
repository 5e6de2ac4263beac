"""A sequential load run stops when its gates are decided (issue 39, load/decided.py, load/watcher.py):
against the scripted server over real sockets, a clearly good server is decided at the first look and
the run stops there; a server whose P99 sits on the limit runs to its budget, undecided. The time
budget's last look is checked with a scripted clock on seeded records (no engine)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.config import Gate, Statistic
from pytest_perfgate.config.units import parse_quantity
from pytest_perfgate.contract import Request
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.load.decided import LoadLooks
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.load.watcher import Watcher, run_until_decided

LOOKS = (100, 200, 400, 800)


def _gate(name: str, metric: str, q: float, limit: str) -> Gate:
    return Gate(name=name, phase="slo", metric=metric, statistic=Statistic("quantile", q, f"p{round(q * 100)}"),
                direction="max", threshold=parse_quantity(limit))


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.02, itl=0.001)) as srv:
        yield srv


@pytest.fixture(scope="module")
def engine(server: ScriptedServer, openai_engine_on: Callable[..., OpenAIEngine]) -> OpenAIEngine:
    return openai_engine_on(server, timeout=30)


def _requests(n: int, slow_every: int | None = None) -> list[Request]:
    """``n`` requests scripted to independent TTFTs (exponential, mean 20 ms, seeded: they outweigh a
    busy machine's own drift, which would show as dependence); every ``slow_every``-th one 0.5 s."""
    ttft = np.random.default_rng(39).exponential(0.02, n)
    if slow_every:
        ttft = np.minimum(ttft, 0.15)
        ttft[slow_every - 1::slow_every] = 0.5
    return [Request(prompt=f"r{i}", max_tokens=2, extra={"perfgate": {"ttft": float(ttft[i])}}) for i in range(n)]


def test_a_clearly_good_server_stops_at_the_first_look(engine: OpenAIEngine) -> None:
    """Limits 100x the server's times: decided at the first look (the second where a busy machine's
    stall makes the first requests look dependent)."""
    looks = (100, 200, 400, 800, 1600)
    gates = [(_gate("ttft_p90", "ttft", 0.9, "5 s"), 0.95), (_gate("e2e_p90", "e2e", 0.9, "10 s"), 0.95)]
    plan = LoadLooks.plan(gates, looks)
    said: list[str] = []
    run = run_until_decided(engine, _requests(looks[-1]), LoadConfig(mode="concurrency", concurrency=4),
                            plan, say=said.append)
    assert plan.stopped_by == "decided"
    for name in ("ttft_p90", "e2e_p90"):
        d = plan.decided[name]
        assert d.verdict.outcome == "pass" and d.decided and d.look <= 2 and d.requests == looks[d.look - 1]
        assert d.data.engine_info and [r.index for r in d.data.records] == list(range(d.requests))
    assert run.stopped_early and len(run.measured) < looks[-1]  # stopped well before the budget
    assert run.decided is plan
    assert said[0].startswith("sequential load run: looks at 100, 200, 400, 800, 1,600 requests (max_requests 1,600)")
    assert said[1].startswith("  ttft_p90: may fail at any look at 0.9900 confidence (0.05 split over the looks), pass at looks 100")
    assert any(s.startswith("look 1 of 5 at 100 requests") for s in said)
    assert "every gate decided" in said[-1]
    d = plan.decided["ttft_p90"]
    data, c, note = plan.verdict_data("ttft_p90") or (None, 0.0, "")
    assert data is d.data and c == plan.plans["ttft_p90"].c_pass  # type: ignore[union-attr]
    assert note.startswith(f"sequential load run: decided at look {d.look} of 5 ({d.requests:,} requests)")


def test_a_server_on_its_limit_runs_to_its_budget(engine: OpenAIEngine) -> None:
    """Exactly 1 request in 100 over the limit (0.5 s against 0.2 s, the rest <= 0.15 s): a P99 can
    neither pass nor fail."""
    gate = _gate("ttft_p99", "ttft", 0.99, "200 ms")
    plan = LoadLooks.plan([(gate, 0.95)], LOOKS)
    said: list[str] = []
    run = run_until_decided(engine, _requests(LOOKS[-1], slow_every=100), LoadConfig(mode="concurrency", concurrency=4),
                            plan, say=said.append)
    d = plan.decided["ttft_p99"]
    assert plan.stopped_by == "max_requests" and not d.decided and d.verdict.outcome == "inconclusive"
    assert len(run.measured) == LOOKS[-1] and d.requests == LOOKS[-1] and plan.looked == len(LOOKS)
    assert "open: ttft_p99" in said[-2] and "max_requests 800 reached" in said[-1]
    assert "undecided when the run stopped (max_requests = 800)" in (plan.verdict_data("ttft_p99") or ("", 0, ""))[2]


def _mm1(n: int) -> RunResult:
    import mm1_runs  # tests/mm1_runs.py

    return mm1_runs.mm1_run(np.random.default_rng(39), rate=5.0, mu=10.0, n=n)


def test_the_time_budget_takes_a_last_look_with_a_scripted_clock() -> None:
    """The run's time budget ends it after 300 requests: looks at 100 and 200 on the way, then a last
    look at 300 (a pass allowed there once possible), said with the scripted clock's seconds."""
    full = _mm1(300)
    gate = _gate("ttft_p90", "ttft", 0.9, "10 s")
    plan = LoadLooks.plan([(gate, 0.95)], (100, 200, 400, 800), max_seconds=30)
    plan.plans["ttft_p90"] = dataclasses.replace(plan.plans["ttft_p90"], pass_looks=(400, 800))  # type: ignore[type-var]
    ticks = iter(float(t) for t in range(1000))
    said: list[str] = []
    w = Watcher(plan, said.append, clock=lambda: next(ticks), background=False)
    for k in range(1, 301):  # the runner's partial runs, one finished request at a time
        assert not w(RunResult(records=full.records[:k], start_ns=1))
    assert plan.looked == 2 and not plan.decided["ttft_p90"].decided  # no pass look reached
    w.finish(full)
    d = plan.decided["ttft_p90"]
    assert plan.stopped_by == "decided" and (d.verdict.outcome, d.requests, d.look) == ("pass", 300, 3)
    assert said[0].startswith("look 1 of 4 at 100 requests (1.0 s, 100.0/s): open: ttft_p90") and said[-2].startswith("look 3 of 4 at 300")


def test_run_until_decided_says_what_is_wrong_before_starting_anything() -> None:
    """Bad budgets and gates are one-line errors raised before any engine starts."""
    from pytest_perfgate.session.lab import Engines
    from pytest_perfgate.session.runs import Runs

    engines = Engines(None, None, {}, Runs())  # type: ignore[arg-type]  # nothing is started
    g = _gate("ttft_p99", "ttft", 0.99, "1 s")
    with pytest.raises(ValueError, match="max_requests is required"):
        engines.run_until_decided("e", [], gates=[g])
    with pytest.raises(ValueError, match=r"the last look \(800\) is the budget; max_requests = 1,000 differs"):
        engines.run_until_decided("e", [], gates=[g], looks=(400, 800), max_requests=1000)
    with pytest.raises(TypeError, match="gates are the perfgate fixture or Gate objects"):
        engines.run_until_decided("e", [], gates=["ttft_p99"], max_requests=1000)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="gate ttft_p99: no look can pass it within 200 requests at 0.95"):
        engines.run_until_decided("e", [], gates=[g], max_requests=200)
    compare = dataclasses.replace(g, compare="ratio")
    with pytest.raises(ValueError, match="gate ttft_p99: a comparison of two runs cannot be decided on one load run"):
        engines.run_until_decided("e", [], gates=[(compare, 0.9)], max_requests=1000)

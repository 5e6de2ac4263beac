"""A hostile server at the ``openai`` engine's start (issue 31): one that answers readiness but
hangs on completions holds the dialect probe and each warm-up request for ``ready_timeout``-derived
deadlines (not the request ``timeout``) and the wait says so; a slowloris probe that did not finish
concludes nothing; a redirect is not followed and says where it pointed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hostile_server import HostileServer

from pytest_perfgate.config.model import EngineSpec
from pytest_perfgate.contract import Request, RequestRecord, clock, run_sync
from pytest_perfgate.engines.manager import EngineManager
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.load import runner
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.runtime.progress import progress_printer

KEY = "sk-perfgate-START-51c0e9a7"


@pytest.fixture
def hanging() -> Iterator[HostileServer]:
    server = HostileServer(hang_probe=True)
    try:
        yield server
    finally:
        server.close()


def test_a_hanging_probe_waits_ready_timeout_and_says_so(hanging: HostileServer) -> None:
    said: list[str] = []
    # request timeout 120 s (the default is 600 s): the probe must not wait for it
    spec = EngineSpec("h", "openai", {"base_url": hanging.base_url, "model": "m", "timeout": 120, "ready_timeout": 1})
    mgr = EngineManager({"h": spec}, say=said.append, tick_s=0.1)
    try:
        eng = mgr.get("h")
    finally:
        mgr.close()
    decided = eng.info()["dialect_decided"]
    assert "not decided" in decided and "no complete answer (timeout: no complete answer within 1 s" in decided
    assert "accepted" not in decided
    ticks = [s for s in said if "still starting after" in s]
    assert any("waiting for the dialect probe's one-token answer (deadline 1 s: ready_timeout)" in t for t in ticks), said


def test_a_hanging_warm_up_request_has_its_own_deadline_and_progress(hanging: HostileServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "WARMUP_TICK_S", 0.05)
    eng = OpenAIEngine("h", {"base_url": hanging.base_url, "model": "m", "timeout": 120, "ready_timeout": 0.5,
                             "dialect": "openai"})
    said: list[str] = []
    try:
        eng.start()
        run = runner.run_load(eng, [Request("fine x", 2)], LoadConfig(num_requests=1, warmup=1),
                              progress_printer(said.append, "h", every_s=0.1), warmup=[Request("hang w", 2)])
    finally:
        eng.stop()
    warm = [r for r in run.records if r.warmup]
    assert warm[0].error is not None and warm[0].error.startswith("timeout: no complete answer within 1 s"), warm[0].error
    assert "2 x ready_timeout" in warm[0].error
    assert run.successful, run.errors()
    assert len([s for s in said if "warm-up 0/1" in s]) >= 2, said  # the first line, then while it hangs


def test_a_slowloris_probe_concludes_nothing() -> None:
    server = HostileServer(slow_probe=True, slow_s=2.0)  # head at once, then one body byte every 2 s
    eng = OpenAIEngine("s", {"base_url": server.base_url, "model": "m", "timeout": 120, "ready_timeout": 1})
    try:
        eng.start()
    finally:
        eng.stop()
        server.close()
    info = eng.info()
    assert "not decided" in info["dialect_decided"] and "accepted" not in info["dialect_decided"]
    assert not any("[DONE]" in n for n in info["notes"]), info["notes"]


@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
def test_a_redirect_is_not_followed_and_says_where(monkeypatch: pytest.MonkeyPatch, transport: str) -> None:
    monkeypatch.setenv("PERFGATE_START_KEY", KEY)
    server = HostileServer()
    eng = OpenAIEngine("r", {"base_url": server.base_url, "model": "m", "timeout": 5, "ready_timeout": 5,
                             "transport": transport, "dialect": "openai", "api_key_env": "PERFGATE_START_KEY"})
    rec = RequestRecord(index=0)
    try:
        run_sync(eng.generate(Request(prompt="redirect x", max_tokens=2), rec, clock))
    finally:
        run_sync(eng.transport.close())
        server.close()
    assert rec.error == "HTTP 302 (redirect to http://evil.example/steal?k=Bearer+***&x=\\x1b[2J; not followed)"
    assert len(server.posts) == 1  # nothing followed it

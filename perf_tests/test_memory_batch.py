"""Memory phase: the engine-level max-safe-batch search (the memory issue's "engine max-safe-batch
search"; the roadmap's second document reports "max safe concurrent batch size 2x").

``pytest -m memory perf_tests``. The baseline engine with a KV cache of ``[params.memory_batch]
kv_blocks`` blocks (``num_gpu_blocks_override``: out of KV blocks early and the same on every
machine), probed at concurrency 1, 2, 4, ... then bisected: the largest concurrency whose run of
``rounds x n`` requests moved no ``vllm:num_preemptions`` and failed no request
(:mod:`pytest_perfgate.memory.engine_batch`). Recorded by gate ``engine_max_safe_concurrency``
with every probe in the test's notes; runs on any engine (the embedded CPU vLLM included).
"""

from __future__ import annotations

import json

import pytest

from pytest_perfgate import Engines, Perfgate, Request, Thresholds, memory, prompts, workload

pytestmark = pytest.mark.memory


@pytest.fixture(scope="module")
def memory_batch(perfgate_thresholds: Thresholds) -> memory.EngineBatchParams:
    return workload(memory.EngineBatchParams, perfgate_thresholds, "memory_batch")


@pytest.mark.gate("engine_max_safe_concurrency")
def test_engine_max_safe_batch(perfgate: Perfgate, perfgate_engines: Engines, memory_batch: memory.EngineBatchParams) -> None:
    p = memory_batch
    name = perfgate_engines.variant("baseline", f"baseline-kv{p.kv_blocks}", num_gpu_blocks_override=p.kv_blocks,
                                    max_model_len=p.max_model_len, enable_prefix_caching=False)
    tok = perfgate_engines.tokenizer(name)
    seeds = iter(range(500, 10_000))

    def fresh(k: int) -> list[Request]:  # fresh prompts a probe: no probe helped by another's cache
        return list(prompts.exact_length_prompts(tok, p.prompt_tokens, k, seed=next(seeds), tag="max-safe-batch",
                                                 max_tokens=p.max_tokens))

    res = memory.search(lambda reqs, cfg: perfgate_engines.run(name, reqs, cfg), fresh,
                 cap=p.cap, rounds=p.rounds, max_seconds=p.max_seconds, on_probe=lambda pr: perfgate.note(pr.text()))
    perfgate.note(res.text())
    perfgate.note(json.dumps(res.to_dict()))
    assert res.probes and all(pr.concurrency <= p.cap for pr in res.probes)
    perfgate.check(res)

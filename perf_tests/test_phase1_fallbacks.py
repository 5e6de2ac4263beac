"""Phase 1 fallback plans (ROADMAP.md). Each test runs only when a gate naming it failed in this
session (or in the recorded decision of phase 1); otherwise the plugin skips it and says which gate
passed. Where the engine or hardware can't do a plan, the test skips saying exactly what is missing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pytest_perfgate.engines.manager import cpu_only
from pytest_perfgate.load.prompts import dialogue_prompts, math_prompts
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.samples import Proportion


def _variant(perfgate_engines: Any, base: str, name: str, **changes: Any) -> str:
    """Register engine ``name`` = engine ``base`` with vLLM arguments changed."""
    from pytest_perfgate.config import EngineSpec

    spec = perfgate_engines.spec(base)
    args = {**spec.args, **changes}
    perfgate_engines.specs = {**perfgate_engines.specs, name: EngineSpec(name, spec.kind, args, base)}
    return name


@pytest.mark.fallback("tiered_kv_cache")
def test_plan_a_tiered_kv_cache(perfgate: Any, perfgate_engines: Any, phase1: Any, runs: dict[str, Any]) -> None:
    """Plan A through vLLM's KV-cache CPU offloading (``kv_offloading_size``, GiB of CPU memory):
    TTFT P99 at least 40% lower than the failing speculative run; page-swap cost reported."""
    spec = perfgate_engines.spec("speculative")
    if spec.kind not in ("vllm", "vllm-server"):
        pytest.skip(f"plan A needs a vLLM engine to set kv_offloading_size; engine 'speculative' is {spec.kind!r}")
    if cpu_only():
        pytest.skip("plan A offloads KV blocks from GPU memory to CPU memory (vLLM kv_offloading_size / "
                    "OffloadingConnector); this machine has no CUDA GPU, so there is no GPU tier to offload from")
    name = _variant(perfgate_engines, "speculative", "speculative+tiered_kv",
                    kv_offloading_size=phase1.get("kv_offloading_gib", 64), kv_offloading_backend="native")
    prompts = [replace(r, max_tokens=1) for r in runs["long_prompts"]]
    run = perfgate_engines.run(name, prompts, LoadConfig(mode="sequential", num_requests=len(prompts)))
    # page swap: re-send the same prompts; their KV now comes back from the CPU tier
    again = perfgate_engines.run(name, prompts, LoadConfig(mode="sequential", num_requests=len(prompts)))
    failing = runs.get("speculative")
    if failing is None:
        pytest.fail("no speculative run recorded in this session to compare plan A with")
    v = perfgate.evaluate((run, failing), gate="tiered_kv_ttft")
    perfgate.check(again, gate="tiered_kv_page_swap")  # recorded: TTFT when the KV comes back from CPU
    perfgate.raise_for(v)


@pytest.mark.fallback("sequence_parallel")
def test_plan_b_sequence_parallel(perfgate: Any, perfgate_engines: Any, phase1: Any, runs: dict[str, Any]) -> None:
    """Plan B through vLLM's context parallelism (``prefill_context_parallel_size`` /
    ``decode_context_parallel_size``): split the long sequence across GPUs."""
    spec = perfgate_engines.spec("speculative")
    if spec.kind not in ("vllm", "vllm-server"):
        pytest.skip(f"plan B needs a vLLM engine for context parallelism; engine 'speculative' is {spec.kind!r}")
    if cpu_only():
        pytest.skip("plan B (vLLM prefill_context_parallel_size / decode_context_parallel_size) needs >= 2 CUDA "
                    "GPUs; this machine has none (vLLM's CPU backend has no context parallelism)")
    import torch

    gpus = torch.cuda.device_count()
    tp = int(spec.args.get("tensor_parallel_size", 1))
    if gpus < 2 * tp:
        pytest.skip(f"plan B needs tensor_parallel_size x 2 = {2 * tp} GPUs for context parallel size 2; found {gpus}")
    name = _variant(perfgate_engines, "speculative", "speculative+context_parallel", prefill_context_parallel_size=2)
    prompts = [replace(r, max_tokens=1) for r in runs["long_prompts"]]
    run = perfgate_engines.run(name, prompts, LoadConfig(mode="sequential", num_requests=len(prompts)))
    perfgate.check(run, gate="long_context_ttft")


@pytest.mark.fallback("switch_draft_model")
def test_switch_draft_model(perfgate: Any, perfgate_engines: Any, phase1: Any) -> None:
    """Re-measure acceptance with each candidate draft listed in [params.phase1] candidate_drafts;
    report the best (and gate it)."""
    spec = perfgate_engines.spec("speculative")
    if "speculative_config" not in spec.args:
        pytest.skip("engine 'speculative' has no speculative_config to change the draft of")
    tok = perfgate_engines.get("speculative").tokenizer()
    reqs = [*dialogue_prompts(tok, phase1.prompt_set_tokens, phase1.prompt_set_requests, seed=11,
                              max_tokens=phase1.prompt_set_max_tokens),
            *math_prompts(tok, phase1.prompt_set_tokens, phase1.prompt_set_requests, seed=11,
                          max_tokens=phase1.prompt_set_max_tokens)]
    reqs = [replace(r, temperature=phase1.temperature) for r in reqs]
    results: dict[str, Proportion] = {}
    for i, draft in enumerate(phase1.candidate_drafts):
        sc = {**spec.args["speculative_config"], "model": draft}
        name = _variant(perfgate_engines, "speculative", f"speculative[draft {i + 1}]", speculative_config=sc)
        run = perfgate_engines.run(name, reqs, LoadConfig(mode="sequential", num_requests=len(reqs)))
        results[draft] = run.perfgate_data("acceptance_rate")
        print(f"candidate draft {draft}: acceptance {results[draft].successes}/{results[draft].trials}"
              f" = {results[draft].successes / max(1, results[draft].trials):.1%}")
    best = max(results, key=lambda d: results[d].successes / max(1, results[d].trials))
    print(f"best draft: {best}")
    perfgate.check(results[best], gate="draft_acceptance")

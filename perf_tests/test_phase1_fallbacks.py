"""Phase 1 fallback plans (ROADMAP.md). Each test runs only when a gate naming it failed in this
session (or in the recorded decision of phase 1); otherwise the plugin skips it and says which gate
passed. Where the engine or hardware can't do a plan, the test skips saying exactly what is missing.

A plan's engine is declared as a variant of the failing one (``perfgate_engines.variant``); plans
A and B re-send the prompts of the baseline run (``perfgate.runs.requests("baseline")``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from pytest_perfgate import Engines, LoadConfig, Perfgate, Proportion, Thresholds, prompts, workload


@dataclass(frozen=True)
class Plans:
    """The keys of ``[params.phase1]`` the fallback plans use."""

    temperature: float
    prompt_set_tokens: int
    prompt_set_requests: int
    prompt_set_max_tokens: int
    candidate_drafts: tuple[str, ...] = ()
    kv_offloading_gib: float = 64


@pytest.fixture(scope="module")
def plans(perfgate_thresholds: Thresholds, perfgate_engines: Engines) -> Plans:
    return workload(Plans, perfgate_thresholds, "phase1", embedded=perfgate_engines.is_embedded("speculative"))


def _needs_vllm(perfgate_engines: Engines, plan: str, what: str) -> None:
    kind = perfgate_engines.spec("speculative").kind
    if kind not in ("vllm", "vllm-server"):
        pytest.skip(f"{plan} needs a vLLM engine {what}; engine 'speculative' is {kind!r}")


@pytest.mark.fallback("tiered_kv_cache")
def test_plan_a_tiered_kv_cache(perfgate: Perfgate, perfgate_engines: Engines, plans: Plans) -> None:
    """Plan A through vLLM's KV-cache CPU offloading (``kv_offloading_size``, GiB of CPU memory):
    TTFT P99 at least 40% lower than the failing speculative run; page-swap cost reported."""
    _needs_vllm(perfgate_engines, "plan A", "to set kv_offloading_size")
    if perfgate_engines.gpus() == 0:
        pytest.skip("plan A offloads KV blocks from GPU memory to CPU memory (vLLM kv_offloading_size / "
                    "OffloadingConnector); this machine has no CUDA GPU, so there is no GPU tier to offload from")
    name = perfgate_engines.variant("speculative", "speculative+tiered_kv", kv_offloading_size=plans.kv_offloading_gib,
                                    kv_offloading_backend="native")
    first_tokens = [replace(r, max_tokens=1) for r in perfgate.runs.requests("baseline")]
    perfgate_engines.run(name, first_tokens, keep_as="tiered_kv_cache")
    # page swap: re-send the same prompts; their KV now comes back from the CPU tier
    again = perfgate_engines.run(name, first_tokens)
    v = perfgate.evaluate(gate="tiered_kv_ttft")  # the runs kept as "tiered_kv_cache" and "speculative"
    perfgate.check(again, gate="tiered_kv_page_swap")  # recorded: TTFT when the KV comes back from CPU
    perfgate.raise_for(v)


@pytest.mark.fallback("sequence_parallel")
def test_plan_b_sequence_parallel(perfgate: Perfgate, perfgate_engines: Engines) -> None:
    """Plan B through vLLM's context parallelism (``prefill_context_parallel_size`` /
    ``decode_context_parallel_size``): split the long sequence across GPUs."""
    _needs_vllm(perfgate_engines, "plan B", "for context parallelism")
    gpus = perfgate_engines.gpus()
    if gpus == 0:
        pytest.skip("plan B (vLLM prefill_context_parallel_size / decode_context_parallel_size) needs >= 2 CUDA "
                    "GPUs; this machine has none (vLLM's CPU backend has no context parallelism)")
    tp = int(perfgate_engines.spec("speculative").args.get("tensor_parallel_size", 1))
    if gpus < 2 * tp:
        pytest.skip(f"plan B needs tensor_parallel_size x 2 = {2 * tp} GPUs for context parallel size 2; found {gpus}")
    name = perfgate_engines.variant("speculative", "speculative+context_parallel", prefill_context_parallel_size=2)
    first_tokens = [replace(r, max_tokens=1) for r in perfgate.runs.requests("baseline")]
    perfgate.check(perfgate_engines.run(name, first_tokens), gate="long_context_ttft")


@pytest.mark.fallback("switch_draft_model")
def test_switch_draft_model(perfgate: Perfgate, perfgate_engines: Engines, plans: Plans) -> None:
    """Re-measure acceptance with each candidate draft listed in [params.phase1] candidate_drafts;
    report the best (and gate it)."""
    spec = perfgate_engines.spec("speculative")
    if "speculative_config" not in spec.args:
        pytest.skip("engine 'speculative' has no speculative_config to change the draft of")
    tok = perfgate_engines.tokenizer("speculative")
    shape = {"max_tokens": plans.prompt_set_max_tokens, "temperature": plans.temperature}
    reqs = [*prompts.dialogue_prompts(tok, plans.prompt_set_tokens, plans.prompt_set_requests, seed=11, **shape),
            *prompts.math_prompts(tok, plans.prompt_set_tokens, plans.prompt_set_requests, seed=11, **shape)]
    results: dict[str, Proportion] = {}
    for i, draft in enumerate(plans.candidate_drafts):
        config = {**spec.args["speculative_config"], "model": draft}
        name = perfgate_engines.variant("speculative", f"speculative[draft {i + 1}]", speculative_config=config)
        acc = perfgate_engines.run(name, reqs, LoadConfig()).perfgate_data("acceptance_rate")
        assert isinstance(acc, Proportion), acc
        results[draft] = acc
        perfgate.note(f"candidate draft {draft}: acceptance {acc.successes}/{acc.trials}"
                      f" = {acc.successes / max(1, acc.trials):.1%}")
    best = max(results, key=lambda d: results[d].successes / max(1, results[d].trials))
    perfgate.note(f"best draft: {best}")
    perfgate.check(results[best], gate="draft_acceptance")

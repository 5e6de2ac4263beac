"""Phase 1 fallback plans (ROADMAP.md). Each test runs only when a gate naming it failed in this
session (or in the recorded decision of phase 1); otherwise the plugin skips it and says which gate
passed. Where the engine or hardware can't do a plan, the test skips saying exactly what is missing.

A plan's engine is declared as a variant of the failing one (``perfgate_engines.variant``); plans
A and B re-send the prompts of the baseline run (``perfgate.runs.requests("baseline")``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from pytest_perfgate import Engines, LoadConfig, Perfgate, Proportion, Thresholds, plans, prompts, workload


@dataclass(frozen=True)
class PlanParams:
    """The keys of ``[params.phase1]`` the fallback plans use."""

    temperature: float
    prompt_set_tokens: int
    prompt_set_requests: int
    prompt_set_max_tokens: int
    candidate_drafts: tuple[str, ...] = ()
    kv_offloading_gib: float = 64
    prompt_tokens: int = 8000
    ttft_max_samples: int = 1800  # plan B gates long_context_ttft sequentially, as the main test does
    max_seconds: float = 240


@pytest.fixture(scope="module")
def plan_params(perfgate_thresholds: Thresholds, perfgate_engines: Engines) -> PlanParams:
    embedded = perfgate_engines.is_embedded("speculative")
    p = workload(PlanParams, perfgate_thresholds, "phase1", embedded=embedded)
    if embedded and not all(d.startswith("embedded:") for d in p.candidate_drafts):
        # [params.phase1] candidate_drafts names the GPU engine's drafts (hub ids); the tiny engine's are these
        p = replace(p, candidate_drafts=("embedded:draft", "embedded:draft_independent"))
    return p


def _needs_vllm(perfgate_engines: Engines, plan: str, what: str) -> None:
    kind = perfgate_engines.spec("speculative").kind
    if kind not in ("vllm", "vllm-server"):
        pytest.skip(f"{plan} needs a vLLM engine {what}; engine 'speculative' is {kind!r}")


def _model(perfgate_thresholds: Thresholds, perfgate_engines: Engines) -> Any:
    """The speculative engine's model shape (its config.json, else [models.*]), or None."""
    return plans.model_shape(perfgate_thresholds, perfgate_engines.spec("speculative"))


@pytest.mark.fallback("tiered_kv_cache")
def test_plan_a_tiered_kv_cache(perfgate: Perfgate, perfgate_engines: Engines, perfgate_thresholds: Thresholds,
                                plan_params: PlanParams) -> None:
    """Plan A through vLLM's KV-cache CPU offloading (``kv_offloading_size``, GiB of CPU memory): the
    prompts' KV is computed once, the GPU tier is evicted (distinct prompts holding more tokens than
    it), and the re-sent prompts must come back from the CPU tier (vLLM's external prefix-cache hit
    counters): their TTFT P99 at least 40% lower than the failing speculative run's cold one."""
    _needs_vllm(perfgate_engines, "plan A", "to set kv_offloading_size")
    if perfgate_engines.gpus() == 0:
        pytest.skip("plan A offloads KV blocks from GPU memory to CPU memory (vLLM kv_offloading_size / "
                    "OffloadingConnector); this machine has no CUDA GPU, so there is no GPU tier to offload from")
    v = plans.tiered_kv("speculative", plan_params.kv_offloading_gib)
    name = perfgate_engines.variant("speculative", v.name, **v.args)
    first_tokens = [replace(r, max_tokens=1) for r in perfgate.runs.requests("baseline")]
    started = perfgate_engines.run(name, first_tokens[:1])
    gpu_tokens, model = plans.gpu_kv_tokens(started.counters_after), _model(perfgate_thresholds, perfgate_engines)
    if gpu_tokens is None or model is None:
        pytest.fail(f"plan A: engine {name!r}: no GPU KV size (vllm:cache_config_info) or no model shape for "
                    "the CPU tier's size; neither can be guessed")
    cpu_tokens = int(plan_params.kv_offloading_gib * 2**30 // model.kv_bytes_per_token())
    plen = len(first_tokens[0].prompt) if not isinstance(first_tokens[0].prompt, str) else 8000
    plan = plans.eviction(gpu_tokens, cpu_tokens, plen, len(first_tokens))
    if isinstance(plan, str):
        pytest.skip(plan)
    k, f = plan
    perfgate_engines.run(name, first_tokens[1:k])  # their KV is computed and offloaded
    tok = perfgate_engines.tokenizer(name)
    perfgate_engines.run(name, prompts.exact_length_prompts(tok, plen, f, seed=97, tag="evict", max_tokens=1))
    again = perfgate_engines.run(name, first_tokens[:k], keep_as="tiered_kv_cache")
    hits = again.counters_after.get(plans.EXTERNAL_HITS, 0.0) - again.counters_before.get(plans.EXTERNAL_HITS, 0.0)
    queried = again.counters_after.get(plans.EXTERNAL_QUERIES, 0.0) - again.counters_before.get(plans.EXTERNAL_QUERIES, 0.0)
    perfgate.note(f"plan A: GPU tier {gpu_tokens:,} tokens, CPU tier {cpu_tokens:,}; {k} prompts re-sent after "
                  f"{f} evicting ones; {plans.EXTERNAL_HITS} +{hits:,.0f} of {queried:,.0f} tokens queried")
    if hits < 0.5 * k * plen:
        pytest.fail(f"plan A: the re-sent prompts did not come back from the CPU tier: {plans.EXTERNAL_HITS} +{hits:,.0f} "
                    f"tokens for {k} x {plen:,}-token prompts (vLLM's KV offloading did not serve them)")
    verdict = perfgate.evaluate(gate="tiered_kv_ttft")  # the runs kept as "tiered_kv_cache" and "speculative"
    perfgate.check(again, gate="tiered_kv_page_swap")  # recorded: TTFT when the KV comes back from CPU
    perfgate.raise_for(verdict)


@pytest.mark.fallback("sequence_parallel")
def test_plan_b_sequence_parallel(perfgate: Perfgate, perfgate_engines: Engines, perfgate_thresholds: Thresholds,
                                  plan_params: PlanParams) -> None:
    """Plan B through vLLM's context parallelism, as vLLM 0.32 allows it on this model
    (``plans.context_parallel``): prefill context parallelism on MLA models
    only, decode context parallelism where tensor_parallel_size > KV heads."""
    _needs_vllm(perfgate_engines, "plan B", "for context parallelism")
    gpus = perfgate_engines.gpus()
    if gpus == 0:
        pytest.skip("plan B (vLLM prefill_context_parallel_size / decode_context_parallel_size) needs >= 2 CUDA GPUs "
                    "(how many for this model: see the skip on a GPU runner or `perfgate check`); this machine has "
                    "none (vLLM's CPU backend has no context parallelism)")
    spec, model = perfgate_engines.spec("speculative"), _model(perfgate_thresholds, perfgate_engines)
    if model is None:
        pytest.skip(f"plan B: no shape of {spec.args.get('model')!r} (config.json or [models.*]) to tell which "
                    "context parallelism vLLM allows for it")
    sc = spec.args.get("speculative_config")
    v = plans.context_parallel("speculative", int(spec.args.get("tensor_parallel_size", 1)), model.heads, model.kv_heads,
                         mla=False, speculative_config=sc if isinstance(sc, dict) else None)
    if v.unavailable:
        pytest.skip(f"plan B on {model.name}: {v.unavailable}")
    if gpus < v.gpus:
        pytest.skip(f"plan B on {model.name}: {v.notes[0]}; this machine has {gpus}")
    name = perfgate_engines.variant("speculative", v.name, **v.args)
    first_tokens = [replace(r, max_tokens=1) for r in perfgate.runs.requests("baseline")]
    # a P99 pass needs >= 299 requests: the baseline's prompts first, then fresh ones until decided
    more = iter(prompts.exact_length_prompts(perfgate_engines.tokenizer(name), plan_params.prompt_tokens,
                                             plan_params.ttft_max_samples, seed=5, tag="plan-b", max_tokens=1))
    first = [perfgate_engines.run(name, first_tokens)]
    perfgate.sample_until_decided(lambda: first.pop() if first else perfgate_engines.run(name, [next(more)]),
                                  gate="long_context_ttft", max_samples=plan_params.ttft_max_samples,
                                  max_seconds=plan_params.max_seconds, first_look=len(first_tokens))


@pytest.mark.fallback("switch_draft_model")
def test_switch_draft_model(perfgate: Perfgate, perfgate_engines: Engines, plan_params: PlanParams) -> None:
    """Re-measure acceptance with each candidate draft listed in [params.phase1] candidate_drafts;
    report the best (and gate it)."""
    spec = perfgate_engines.spec("speculative")
    if "speculative_config" not in spec.args:
        pytest.skip("engine 'speculative' has no speculative_config to change the draft of")
    tok = perfgate_engines.tokenizer("speculative")
    shape = {"max_tokens": plan_params.prompt_set_max_tokens, "temperature": plan_params.temperature}
    reqs = [*prompts.dialogue_prompts(tok, plan_params.prompt_set_tokens, plan_params.prompt_set_requests, seed=11, **shape),
            *prompts.math_prompts(tok, plan_params.prompt_set_tokens, plan_params.prompt_set_requests, seed=11, **shape)]
    results: dict[str, Proportion] = {}
    for i, draft in enumerate(plan_params.candidate_drafts):
        (v,) = plans.switch_draft("speculative", spec.args["speculative_config"], [draft])
        name = perfgate_engines.variant("speculative", f"speculative[draft {i + 1}]", **v.args)
        acc = perfgate_engines.run(name, reqs, LoadConfig()).perfgate_data("acceptance_rate")
        assert isinstance(acc, Proportion), acc
        results[draft] = acc
        perfgate.note(f"candidate draft {draft}: acceptance {acc.successes}/{acc.trials}"
                      f" = {acc.successes / max(1, acc.trials):.1%}")
    # the best of K by point estimate, gated at 1 - alpha/K: choosing the best and gating it at c
    # would pass a truth on the threshold up to K times as often (docs/statistics.md)
    # (stored and recorded like any check, at 1 - (1 - c) / K)
    best, verdict = perfgate.best_of(results, "draft_acceptance", check=False)
    perfgate.note(f"best draft: {best}")
    perfgate.raise_for(verdict)

"""Issue-3 proofs through the load runner on real vLLM engines: acceptance 100% with draft = target,
about 0 with the independent draft, in the calibrated band with the calibrated draft; prefix-cache
hit rate high on the shared-prefix set and about 0 on unique prompts; TTFT < E2E and
latency - TTFT == sum(ITL) for every request of a run."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_perfgate.engines.registry import create
from pytest_perfgate.load.metrics import e2e_ns, itl_ns, ttft_ns
from pytest_perfgate.load.prompts import dialogue_prompts, exact_length_prompts, shared_prefix_prompts
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.models import ModelSet
from pytest_perfgate.verdicts.samples import Proportion

pytestmark = pytest.mark.needs_engine


def _engine(engine_slot: Any, tiny_models: ModelSet, key: str, draft: str | None, base_args: Any) -> Any:
    args = dict(base_args(tiny_models))
    if draft is not None:
        args["speculative_config"] = {**args["speculative_config"], "model": draft}
    return engine_slot.get(key, lambda: create(key, "vllm", args))


def _acceptance(engine: Any) -> Proportion:
    reqs = dialogue_prompts(engine.tokenizer(), 64, 4, seed=5, max_tokens=48)
    run = run_load(engine, reqs, LoadConfig(mode="concurrency", concurrency=4, num_requests=4))
    assert not run.errors(), run.errors()
    acc = run.perfgate_data("acceptance_rate")
    assert isinstance(acc, Proportion) and acc.trials > 50
    return acc


def test_acceptance_extreme_drafts(engine_slot: Any, tiny_models: ModelSet, tools: Any) -> None:
    # (engines are swapped in the shared slot: never two alive; "vllm" last, for the next module)
    same = _acceptance(_engine(engine_slot, tiny_models, "vllm-self-draft", str(tiny_models.target), tools.inproc_args))
    assert same.successes == same.trials, f"draft = target must accept everything: {same}"
    indep = _acceptance(_engine(engine_slot, tiny_models, "vllm-independent", str(tiny_models.draft_independent),
                                tools.inproc_args))
    assert indep.successes / indep.trials < 0.05, f"independent draft accepted {indep}"


def test_acceptance_calibrated_draft_in_band(engine_slot: Any, tiny_models: ModelSet, tools: Any) -> None:
    calibrated = _acceptance(_engine(engine_slot, tiny_models, "vllm", None, tools.inproc_args))
    rate = calibrated.successes / calibrated.trials
    assert 0.65 <= rate <= 0.85, f"calibrated draft accepted {rate:.1%} (documented: ~76%)"


def test_prefix_cache_hit_rate_and_timing_identities(engine_slot: Any, tiny_models: ModelSet, tools: Any) -> None:
    engine = _engine(engine_slot, tiny_models, "vllm", None, tools.inproc_args)
    tok = engine.tokenizer()
    shared = shared_prefix_prompts(tok, 512, 32, 6, seed=9, max_tokens=4)
    unique = exact_length_prompts(tok, 544, 6, seed=10, max_tokens=4)
    cfg = LoadConfig(mode="sequential", num_requests=6, warmup=0)
    run_load(engine, shared[:1], LoadConfig(mode="sequential", num_requests=1))  # the prefix enters the cache
    hit = run_load(engine, shared[1:], LoadConfig(mode="sequential", num_requests=5)).perfgate_data("prefix_cache_hit_rate")
    cold = run_load(engine, unique, cfg)
    miss = cold.perfgate_data("prefix_cache_hit_rate")
    assert isinstance(hit, Proportion) and isinstance(miss, Proportion)
    assert hit.successes / hit.trials > 0.8, hit
    assert miss.successes / miss.trials < 0.05, miss
    for rec in cold.successful:
        assert rec.prompt_tokens == 544 and rec.output_tokens == 4
        ttft, e2e = ttft_ns(rec), e2e_ns(rec)
        assert ttft is not None and e2e is not None and ttft <= e2e  # equal when all chunks came in one read
        assert e2e - ttft == sum(itl_ns(rec))

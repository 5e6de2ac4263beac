"""Memory gates (second roadmap document: "20 GB free yet CUDA out of memory"): fragmentation under a
chosen definition, the allocator-setting sweep with the max-safe-batch ratio vs the default
(roadmap: 2x), its fallback (apply the best measured setting), KV-cache pressure of an engine run.

``pytest -m memory perf_tests``. CUDA parts skip, saying why, where there is no CUDA device; the
KV-cache pressure runs on any engine (the embedded CPU vLLM included). Workload: ``[params.memory]``.
Every verdict goes through ``perfgate`` (``perfgate_memory.check`` hands it the report or the sweep).
"""

from __future__ import annotations

import json
import os

import pytest

from pytest_perfgate import Engines, LoadConfig, Perfgate, Thresholds, memory, prompts

pytestmark = pytest.mark.memory


def require_cuda() -> None:
    why = memory.cuda_unavailable()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def params(perfgate_thresholds: Thresholds) -> memory.MemoryParams:
    return memory.MemoryParams.parse(perfgate_thresholds.params.get("memory", {}))


@pytest.fixture(scope="module")
def allocator_sweep(params: memory.MemoryParams) -> memory.SweepResult:
    """Every allocator setting, ``repeats`` children each: measured once, for the gate and its fallback."""
    require_cuda()
    return params.sweep(progress=print)


@pytest.mark.gate("memory_fragmentation")
def test_fragmentation_of_the_serving_churn(perfgate: Perfgate, perfgate_memory: memory.MemoryGates,
                                            params: memory.MemoryParams) -> None:
    """The transformer-style churn in this process, under this process's allocator setting."""
    require_cuda()
    with perfgate_memory.probe(snapshot="peaks") as probe:

        def step(_i: int) -> None:
            probe.sample()

        memory.churn(memory.torch_alloc("cuda"), params.pattern, on_step=step).live.clear()
    report = probe.report
    assert report is not None, "the probe wrote no report"
    doc = report.to_dict()
    perfgate.note(json.dumps(doc, indent=1))
    perfgate.note(memory.definitions_note(doc["fragmentation"], report.definition,
                                          os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")))
    perfgate_memory.check(perfgate, report, "memory_fragmentation")


@pytest.mark.gate("max_safe_batch_ratio")
def test_allocator_sweep_max_safe_batch(perfgate: Perfgate, perfgate_memory: memory.MemoryGates,
                                        allocator_sweep: memory.SweepResult) -> None:
    perfgate.write_text("memory-sweep.json", json.dumps(allocator_sweep.to_dict(), indent=1))
    perfgate.note("\n".join(allocator_sweep.table()))
    perfgate.note(allocator_sweep.best(perfgate.confidence).statement())
    perfgate_memory.check(perfgate, allocator_sweep, "max_safe_batch_ratio")


@pytest.mark.fallback("best_allocator_setting")
@pytest.mark.gate("allocator_fallback_fragmentation")
def test_fallback_best_allocator_setting(perfgate: Perfgate, params: memory.MemoryParams,
                                         allocator_sweep: memory.SweepResult) -> None:
    """Re-run the workload under the best measured setting and gate its fragmentation."""
    best = allocator_sweep.best(perfgate.confidence)
    setting = params.setting(best.setting)
    perfgate.note(f"applying {setting.name}: {setting.describe()}")
    r = memory.run_child(params.spec(), setting)
    d = memory.gate_definition(perfgate.gate("allocator_fallback_fragmentation"))
    frag = r["memory"]["fragmentation"][d]["max"]
    perfgate.note(memory.definitions_note(r["memory"]["fragmentation"], d, setting.describe()))
    perfgate.check(perfgate.samples([100.0 * frag], "%"), "allocator_fallback_fragmentation",
                   note=f"under {setting.name} ({setting.describe()})")


@pytest.mark.gate("kv_preemptions", "kv_cache_usage_peak")
def test_kv_cache_pressure_of_an_engine_run(perfgate: Perfgate, perfgate_engines: Engines) -> None:
    """Concurrent long prompts with the usage gauge polled: peak usage, preemptions (recomputed)."""
    reqs = prompts.exact_length_prompts(perfgate_engines.tokenizer(perfgate.engine), 1024, 8, seed=14,
                                        tag="kv-pressure", max_tokens=16)
    run = perfgate_engines.run(perfgate.engine, reqs, LoadConfig(mode="concurrency", concurrency=8, num_requests=8,
                                                                 gauge_interval=0.1, max_seconds=300))
    kv = run.kv_pressure()
    perfgate.note(json.dumps(kv.to_dict()))
    perfgate.check(kv, "kv_preemptions")
    perfgate.check(kv, "kv_cache_usage_peak")

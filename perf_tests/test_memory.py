"""Memory gates (second roadmap document: "20 GB free yet CUDA out of memory"): fragmentation under a
chosen definition, the allocator-setting sweep with the max-safe-batch ratio vs the default
(roadmap: 2x), its fallback (apply the best measured setting), KV-cache pressure of an engine run.

``pytest -m memory perf_tests``. CUDA parts skip, saying why, where there is no CUDA device; the
KV-cache pressure runs on any engine (the embedded CPU vLLM included). Workload: ``[params.memory]``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from pytest_perfgate.load.prompts import exact_length_prompts
from pytest_perfgate.load.schedule import LoadConfig

pytestmark = pytest.mark.memory

STATE: dict[str, Any] = {}  # the sweep of this session, for the fallback test


def _cuda() -> None:
    torch = pytest.importorskip("torch", reason="the CUDA memory gates need torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False): the memory gates read "
                    "torch.cuda.memory_stats(); the CPU machinery is tested in tests/memory")


def _params(thresholds: Any) -> dict[str, Any]:
    p: dict[str, Any] = dict(thresholds.params.get("memory", {}))
    return p


def _spec(p: dict[str, Any]) -> dict[str, Any]:
    return {"backend": "cuda", "pattern": dict(p.get("pattern", {})), "cuda_fraction": p.get("cuda_fraction"),
            "snapshot": "peaks"}


def _settings(p: dict[str, Any]) -> tuple[Any, ...]:
    from pytest_perfgate.memory.sweep import CUDA_SETTINGS, Setting

    raw = p.get("settings")
    if not raw:
        return CUDA_SETTINGS
    return tuple(Setting(k, {"PYTORCH_CUDA_ALLOC_CONF": v} if v else {}) for k, v in raw.items())


@pytest.mark.gate("memory_fragmentation")
def test_fragmentation_of_the_serving_churn(perfgate: Any, perfgate_memory: Any, perfgate_thresholds: Any) -> None:
    """The transformer-style churn in this process, under this process's allocator setting."""
    _cuda()
    from pytest_perfgate.memory.workload import Pattern, churn, torch_alloc

    pat = Pattern.from_dict(dict(_params(perfgate_thresholds).get("pattern", {})))
    with perfgate_memory.probe(snapshot="peaks") as probe:
        ch = churn(torch_alloc("cuda"), pat, on_step=lambda _i: probe.sample())
        ch.live.clear()
    from pytest_perfgate.memory.stats import definitions_note

    doc = probe.report.to_dict()
    perfgate.note(json.dumps(doc, indent=1))
    perfgate.note(definitions_note(doc["fragmentation"], probe.report.definition,
                                   os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")))
    perfgate_memory.check(perfgate, probe.report, "memory_fragmentation")


@pytest.mark.gate("max_safe_batch_ratio")
def test_allocator_sweep_max_safe_batch(request: pytest.FixtureRequest, perfgate: Any, perfgate_memory: Any,
                                        perfgate_thresholds: Any) -> None:
    _cuda()
    from pytest_perfgate.memory.sweep import sweep
    from pytest_perfgate.plugin import CONF

    p = _params(perfgate_thresholds)
    res = sweep(_spec(p), _settings(p), repeats=int(p.get("repeats", 4)), progress=print,
                parallel=int(p.get("parallel", 1)))
    STATE["sweep"] = res
    out = request.config.stash[CONF].out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory-sweep.json").write_text(json.dumps(res.to_dict(), indent=1))
    perfgate.note("\n".join(res.table()))
    perfgate.note(res.best(perfgate.thresholds.settings.confidence).statement())
    perfgate_memory.check(perfgate, res, "max_safe_batch_ratio")


@pytest.mark.fallback("best_allocator_setting")
@pytest.mark.gate("allocator_fallback_fragmentation")
def test_fallback_best_allocator_setting(perfgate: Any, perfgate_thresholds: Any) -> None:
    """Re-run the workload under the best measured setting and gate its fragmentation."""
    _cuda()
    from pytest_perfgate.memory.gates import gate_definition
    from pytest_perfgate.memory.sweep import run_child, sweep

    p = _params(perfgate_thresholds)
    res = STATE.get("sweep") or sweep(_spec(p), _settings(p), repeats=int(p.get("repeats", 4)),
                                      parallel=int(p.get("parallel", 1)))
    best = res.best(perfgate.thresholds.settings.confidence)
    setting = next(s for s in res.settings if s.name == best.setting)
    perfgate.note(f"applying {setting.name}: {setting.describe()}")
    r = run_child(_spec(p), setting)
    d = gate_definition(perfgate.gate("allocator_fallback_fragmentation"))
    frag = r["memory"]["fragmentation"][d]["max"]
    from pytest_perfgate.memory.stats import definitions_note

    perfgate.note(definitions_note(r["memory"]["fragmentation"], d, setting.describe()))
    perfgate.check(perfgate.samples([100.0 * frag], "%"), "allocator_fallback_fragmentation")


@pytest.mark.gate("kv_preemptions", "kv_cache_usage_peak")
def test_kv_cache_pressure_of_an_engine_run(perfgate: Any, perfgate_engine: Any) -> None:
    """Concurrent long prompts with the usage gauge polled: peak usage, preemptions (recomputed)."""
    prompts = exact_length_prompts(perfgate_engine.tokenizer(), 1024, 8, seed=14, tag="kv-pressure", max_tokens=16)
    from pytest_perfgate.load.runner import run_load

    result = run_load(perfgate_engine, prompts, LoadConfig(mode="concurrency", concurrency=8, num_requests=8,
                                                           gauge_interval=0.1, max_seconds=300))
    kv = result.kv_pressure()
    perfgate.note(json.dumps(kv.to_dict()))
    perfgate.check(kv, "kv_preemptions")
    perfgate.check(kv, "kv_cache_usage_peak")

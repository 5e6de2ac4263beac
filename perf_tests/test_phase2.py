"""Phase 2 (week 3): INT8 vision encoder for multimodal (ROADMAP.md).

Targets: multimodal throughput >= 30 tok/s (baseline 15) and visual-feature quality loss <= 5%
(overall, and separately on the fine-grained subsets: OCR-like text and charts). Quantization must
free memory for the LLM's KV cache. Fallback: the FP16 pipeline (test_phase2_fallbacks.py).

Measurement: every quantization path side by side against the reference (fp16 on a GPU, fp32 on the
CPU) on the same images (quality per image, images/s per batch size); the gated path is
``[params.phase2] vision_quant``. Throughput: the same image + text chat requests through the
quantized pipeline and the FP16 pipeline, one engine at a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_perfgate.load.schedule import LoadConfig

pytestmark = pytest.mark.phase2


def _run_pipeline(perfgate_engines: Any, role: str, vision: Any, phase2: dict[str, Any], reqs: list[Any]) -> Any:
    """The pipeline ``role`` ("quantized" / "fp16"): ``[params.phase2] <role>`` names an engine of
    thresholds.toml; without it, the embedded tiny LLaVA on transformers (vision tower quantized
    with ``vision_quant`` for "quantized", the reference dtype for "fp16")."""
    from pytest_perfgate.engines.registry import create
    from pytest_perfgate.load.runner import run_load
    from pytest_perfgate.runtime.progress import progress_printer
    from pytest_perfgate.vision.vlm import make_vlm

    cfg = LoadConfig(mode="sequential", num_requests=len(reqs), max_seconds=phase2["max_seconds"],
                     warmup=int(phase2.get("warmup", 3)))  # the cold first requests never gated (statistics.md#warm-up)
    if role in phase2:
        return perfgate_engines.run(str(phase2[role]), reqs, cfg)
    perfgate_engines.stop()  # engines never run side by side
    quant = phase2["vision_quant"] if role == "quantized" else ("fp16" if vision.device == "cuda" else "fp32")
    engine = create(f"vlm_{role}", "transformers-vlm",
                    {"model": str(make_vlm()), "vision_quant": quant, "device": vision.device})
    engine.start()
    try:
        return run_load(engine, reqs, cfg, progress_printer(print, engine.name))
    finally:
        engine.stop()


# ------------------------------------------------------------------ 0. under which phase-1 outcome
def test_phase1_outcome(perfgate: Any, record_property: Any) -> None:
    """Phase 2 says which phase-1 outcome it ran under (the recorded decision, if any)."""
    d = perfgate.decision("phase1")
    outcome = d.get("outcome", "?") if d else "not recorded"
    record_property("perfgate.phase2.phase1_outcome", outcome)
    perfgate.note(f"phase 2 runs under phase-1 outcome: {outcome}"
          + (f" (run {d.get('run_id')}, {d.get('timestamp')}; triggered {d.get('triggered_fallbacks')})" if d else ""))


# ------------------------------------------------------------------ 1. quantization paths side by side
def test_paths_side_by_side(perfgate: Any, vision: Any, phase2: dict[str, Any]) -> None:
    from pytest_perfgate.runtime.atomic import atomic_write_text
    from pytest_perfgate.vision import suite

    paths = [p for p in phase2["paths"] if p != phase2["vision_quant"]] + [phase2["vision_quant"]]
    for p in dict.fromkeys(paths):
        suite.run_path(vision, p, phase2["timing_batches"])
    table, why = suite.side_by_side(vision)
    text = (f"## Phase 2: vision encoder paths ({vision.device}, reference {vision.reference_dtype}, "
            f"{vision.encoder.source})\n\n{table}\n\n" + "\n".join(f"- {w}" for w in why) + "\n")
    perfgate.note("\n" + text)
    atomic_write_text(perfgate.out_dir / "phase2-paths.md", text)
    got = vision.results[phase2["vision_quant"]]
    assert got.status == "ok", f"the gated path {phase2['vision_quant']} did not run: {got.status}"


# ------------------------------------------------------------------ 2. quality of the gated path
@pytest.mark.gate("vision_quality_loss", "vision_quality_loss_fine", "vision_embedding_loss",
                  "vision_embedding_loss_fine")
def test_quality_loss(perfgate: Any, vision: Any, phase2: dict[str, Any]) -> None:
    from pytest_perfgate.vision import suite

    r = vision.results.get(phase2["vision_quant"]) or suite.run_path(vision, phase2["vision_quant"],
                                                                     phase2["timing_batches"])
    assert r.quality is not None, r.status
    q = r.quality
    for row in q.table():
        perfgate.note(f"  {row['group']:>8}: n={row['images']:4d}  top-1 {row['ref_top1']:.3f} -> {row['quant_top1']:.3f} "
              f"(drop {row['top1_drop']:+.2%})  1-mean cos {row['one_minus_mean_cos']:.5f}")
    verdicts = [
        perfgate.evaluate(perfgate.samples(q.drops("all")), gate="vision_quality_loss"),
        perfgate.evaluate(perfgate.samples(q.cos_losses("all")), gate="vision_embedding_loss"),
    ]
    if q.fine:
        verdicts += [perfgate.evaluate(perfgate.samples(q.drops("fine")), gate="vision_quality_loss_fine"),
                     perfgate.evaluate(perfgate.samples(q.cos_losses("fine")), gate="vision_embedding_loss_fine")]
    for v in verdicts:
        perfgate.raise_for(v)


# ------------------------------------------------------------------ 3. memory decision for phase 3
@pytest.mark.gate("vision_encoder_bytes_reference", "vision_encoder_bytes_quantized", "vision_kv_tokens_freed")
def test_memory_freed(perfgate: Any, vision: Any, phase2: dict[str, Any]) -> None:
    import json
    from pathlib import Path

    from pytest_perfgate.vision import suite
    from pytest_perfgate.vision.memory import freed_kv_tokens, kv_cost
    from pytest_perfgate.vision.vlm import make_vlm

    ref = vision.results.get("reference") or suite.reference_result(vision, [1])
    got = vision.results.get(phase2["vision_quant"]) or suite.run_path(vision, phase2["vision_quant"], [1])
    llm = phase2.get("llm_config")
    cfg = json.loads((Path(llm) if llm else make_vlm() / "config.json").read_text())
    mem = freed_kv_tokens(ref.param_bytes, got.param_bytes, kv_cost(cfg, "float16" if vision.device == "cuda" else None))
    perfgate.note(f"memory: {json.dumps(mem)}")
    assert got.param_bytes < ref.param_bytes, f"{phase2['vision_quant']} freed no bytes: {mem}"
    perfgate.check(perfgate.samples([mem["encoder_param_bytes_before"]], "B"), gate="vision_encoder_bytes_reference")
    perfgate.check(perfgate.samples([mem["encoder_param_bytes_after"]], "B"), gate="vision_encoder_bytes_quantized")
    perfgate.check(perfgate.samples([mem["kv_tokens_freed"]]), gate="vision_kv_tokens_freed")


@pytest.mark.gate("vision_pipeline_peak_memory_fp16", "vision_pipeline_peak_memory_quantized")
def test_pipeline_peak_memory_gpu(perfgate: Any, vision: Any, phase2: dict[str, Any]) -> None:
    if vision.device != "cuda":
        pytest.skip("torch.cuda peak memory of both pipelines needs a CUDA GPU (none here); "
                    "scripts/gpu-check.sh measures it on one")
    from pytest_perfgate.vision.gpu_check import pipeline_peak_bytes

    peaks = pipeline_peak_bytes(vision, phase2["vision_quant"])
    perfgate.check(perfgate.samples([peaks["fp16"]], "B"), gate="vision_pipeline_peak_memory_fp16")
    perfgate.check(perfgate.samples([peaks["quantized"]], "B"), gate="vision_pipeline_peak_memory_quantized")


# ------------------------------------------------------------------ 4. multimodal throughput
@pytest.mark.gate("multimodal_throughput", "multimodal_ttft", "multimodal_vs_fp16_throughput")
def test_multimodal_throughput(perfgate: Any, perfgate_engines: Any, vision: Any, phase2: dict[str, Any],
                               runs: dict[str, Any]) -> None:
    from pytest_perfgate.vision import suite

    reqs = suite.multimodal_requests(vision, phase2["requests"], phase2["max_tokens"])
    runs["phase2_requests"] = reqs
    q = _run_pipeline(perfgate_engines, "quantized", vision, phase2, reqs)
    runs["phase2_quantized"] = q
    assert q.successful and all((r.output_tokens or 0) > 0 for r in q.successful), "no tokens came back"
    key = "perfgate:vision_encoder_seconds"
    if key in q.counters_after:  # the engine reports its vision tower's own time
        calls = q.counters_after["perfgate:vision_encoder_calls"] - q.counters_before["perfgate:vision_encoder_calls"]
        secs = q.counters_after[key] - q.counters_before[key]
        perfgate.note(f"vision encoder (engine-reported): {secs * 1000 / max(calls, 1):.1f} ms per image over {calls:.0f} images")
    per_request = [r.output_tokens / ((r.end_ns - r.sent_ns) / 1e9) for r in q.successful if r.end_ns and r.output_tokens]
    perfgate.note("output tok/s per request (quantized): " + ", ".join(f"{v:.1f}" for v in per_request))
    tput = perfgate.evaluate(q, gate="multimodal_throughput")
    perfgate.evaluate(q, gate="multimodal_ttft")
    fp = _run_pipeline(perfgate_engines, "fp16", vision, phase2, reqs)
    runs["phase2_fp16"] = fp
    perfgate.evaluate((q, fp), gate="multimodal_vs_fp16_throughput")
    perfgate.raise_for(tput)

"""Phase 2 (week 3): INT8 vision encoder for multimodal (ROADMAP.md).

Targets: multimodal throughput >= 30 tok/s (baseline 15) and visual-feature quality loss <= 5%
(overall, and separately on the fine-grained subsets: OCR-like text and charts). Quantization must
free memory for the LLM's KV cache. Fallback: the FP16 pipeline (test_phase2_fallbacks.py).

Measurement: every quantization path side by side against the reference (fp16 on a GPU, fp32 on the
CPU) on the same images (quality per image, images/s per batch size); the gated path is
``[params.phase2] vision_quant``. Throughput: the same image + text chat requests through the
quantized pipeline and the FP16 pipeline, one engine at a time (the engine manager stops one before
starting the other), kept as the runs ``phase2_quantized`` and ``phase2_fp16``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pytest_perfgate import Engines, LoadConfig, Perfgate, Request, RunResult, vision

pytestmark = pytest.mark.phase2


RETUNE = "phase1_retune"  # phase 1's batch re-tune (test_phase1_retune.py): its chosen arguments are our input


def pipeline(perfgate: Perfgate, perfgate_engines: Engines, role: str, phase2: vision.Phase2) -> str:
    """The engine of pipeline ``role`` ("quantized" / "fp16"): ``[params.phase2] <role>`` names an
    engine of thresholds.toml (a vLLM one runs with the batch size phase 1's re-tune chose, when it
    chose one); without it, the embedded tiny LLaVA on transformers (vision tower quantized with
    ``vision_quant`` for "quantized", the reference dtype for "fp16")."""
    named = phase2.engine(role)
    if named:
        retune = perfgate.decision(RETUNE) if RETUNE in perfgate.thresholds.phases else None
        return perfgate_engines.retuned(named, retune)
    return perfgate_engines.declare(f"vlm_{role}", "transformers-vlm", **phase2.embedded_pipeline(role))


def run_pipeline(perfgate: Perfgate, perfgate_engines: Engines, role: str, phase2: vision.Phase2,
                 reqs: list[Request]) -> RunResult:
    """The requests through pipeline ``role``, kept as ``phase2_<role>``; ``warmup`` requests of the same
    shape first, never gated (docs/statistics.md#warm-up)."""
    cfg = LoadConfig(mode="sequential", num_requests=len(reqs), max_seconds=phase2.max_seconds, warmup=phase2.warmup)
    return perfgate_engines.run(pipeline(perfgate, perfgate_engines, role, phase2), reqs, cfg, keep_as=f"phase2_{role}")


# ------------------------------------------------------------------ 0. under which phase-1 outcome
def test_phase1_outcome(perfgate: Perfgate, record_property: Callable[[str, object], None]) -> None:
    """Phase 2 says which phase-1 outcome it ran under (the recorded decision, if any)."""
    d = perfgate.decision("phase1")
    outcome = d.get("outcome", "?") if d else "not recorded"
    record_property("perfgate.phase2.phase1_outcome", outcome)
    perfgate.note(f"phase 2 runs under phase-1 outcome: {outcome}"
                  + (f" (run {d.get('run_id')}, {d.get('timestamp')}; triggered {d.get('triggered_fallbacks')})" if d else ""))


# ------------------------------------------------------------------ 1. quantization paths side by side
def test_paths_side_by_side(perfgate: Perfgate, encoders: vision.VisionSetup, phase2: vision.Phase2) -> None:
    paths = [p for p in phase2.paths if p != phase2.vision_quant] + [phase2.vision_quant]
    for p in dict.fromkeys(paths):
        vision.run_path(encoders, p, phase2.timing_batches)
    table, why = vision.side_by_side(encoders)
    text = (f"## Phase 2: vision encoder paths ({encoders.device}, reference {encoders.reference_dtype}, "
            f"{encoders.encoder.source})\n\n{table}\n\n" + "\n".join(f"- {w}" for w in why) + "\n")
    perfgate.note("\n" + text)
    perfgate.write_text("phase2-paths.md", text)
    got = encoders.results[phase2.vision_quant]
    assert got.status == "ok", f"the gated path {phase2.vision_quant} did not run: {got.status}"


# ------------------------------------------------------------------ 2. quality of the gated path
@pytest.mark.gate("vision_quality_loss", "vision_quality_loss_fine", "vision_embedding_loss",
                  "vision_embedding_loss_fine")
def test_quality_loss(perfgate: Perfgate, encoders: vision.VisionSetup, phase2: vision.Phase2) -> None:
    r = encoders.results.get(phase2.vision_quant) or vision.run_path(encoders, phase2.vision_quant,
                                                                     phase2.timing_batches)
    assert r.quality is not None, r.status
    q = r.quality
    for row in q.table():
        perfgate.note(f"  {row['group']:>8}: n={row['images']:4d}  top-1 {row['ref_top1']:.3f} -> {row['quant_top1']:.3f} "
                      f"(drop {row['top1_drop']:+.2%})  1-mean cos {row['one_minus_mean_cos']:.5f}")
    groups = [("all", ""), ("fine", "_fine")] if q.fine else [("all", "")]
    verdicts = [v for group, suffix in groups for v in (
        perfgate.evaluate(perfgate.samples(q.drops(group)), gate=f"vision_quality_loss{suffix}"),
        perfgate.evaluate(perfgate.samples(q.cos_losses(group)), gate=f"vision_embedding_loss{suffix}"))]
    for v in verdicts:
        perfgate.raise_for(v)


# ------------------------------------------------------------------ 3. memory decision for phase 3
@pytest.mark.gate("vision_encoder_bytes_reference", "vision_encoder_bytes_quantized", "vision_kv_tokens_freed")
def test_memory_freed(perfgate: Perfgate, encoders: vision.VisionSetup, phase2: vision.Phase2) -> None:
    ref = encoders.results.get("reference") or vision.reference_result(encoders, [1])
    got = encoders.results.get(phase2.vision_quant) or vision.run_path(encoders, phase2.vision_quant, [1])
    cost = vision.kv_cost(phase2.llm(), "float16" if encoders.device == "cuda" else None)
    mem = vision.freed_kv_tokens(ref.param_bytes, got.param_bytes, cost)
    perfgate.note(f"memory: {json.dumps(mem)}")
    assert got.param_bytes < ref.param_bytes, f"{phase2.vision_quant} freed no bytes: {mem}"
    perfgate.check(perfgate.samples([mem["encoder_param_bytes_before"]], "B"), gate="vision_encoder_bytes_reference")
    perfgate.check(perfgate.samples([mem["encoder_param_bytes_after"]], "B"), gate="vision_encoder_bytes_quantized")
    perfgate.check(perfgate.samples([mem["kv_tokens_freed"]]), gate="vision_kv_tokens_freed")


@pytest.mark.gate("vision_pipeline_peak_memory_fp16", "vision_pipeline_peak_memory_quantized")
def test_pipeline_peak_memory_gpu(perfgate: Perfgate, encoders: vision.VisionSetup, phase2: vision.Phase2) -> None:
    if encoders.device != "cuda":
        pytest.skip("torch.cuda peak memory of both pipelines needs a CUDA GPU (none here); "
                    "scripts/gpu-check.sh measures it on one")
    peaks = vision.pipeline_peak_bytes(encoders, phase2.vision_quant)
    perfgate.check(perfgate.samples([peaks["fp16"]], "B"), gate="vision_pipeline_peak_memory_fp16")
    perfgate.check(perfgate.samples([peaks["quantized"]], "B"), gate="vision_pipeline_peak_memory_quantized")


# ------------------------------------------------------------------ 4. multimodal throughput
@pytest.mark.gate("multimodal_throughput", "multimodal_ttft", "multimodal_vs_fp16_throughput")
def test_multimodal_throughput(perfgate: Perfgate, perfgate_engines: Engines, encoders: vision.VisionSetup,
                               phase2: vision.Phase2) -> None:
    reqs = vision.multimodal_requests(encoders, phase2.requests, phase2.max_tokens)
    q = run_pipeline(perfgate, perfgate_engines, "quantized", phase2, reqs)
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
    fp = run_pipeline(perfgate, perfgate_engines, "fp16", phase2, reqs)
    perfgate.evaluate((q, fp), gate="multimodal_vs_fp16_throughput")
    perfgate.raise_for(tput)

"""Phase 2 fallback: the FP16 vision pipeline. Runs only when a phase-2 gate triggered it (in this
run or the recorded decision): it serves the same image + text requests with the encoder unquantized
and records its throughput (the plan's stated cost: 20 tok/s)."""

from __future__ import annotations

import pytest
from test_phase2 import run_pipeline

from pytest_perfgate import Engines, Perfgate, vision

pytestmark = pytest.mark.phase2


@pytest.mark.fallback("fp16_pipeline")
@pytest.mark.gate("fp16_pipeline_throughput")
def test_fp16_pipeline(perfgate: Perfgate, perfgate_engines: Engines, encoders: vision.VisionSetup,
                       phase2: vision.Phase2) -> None:
    """The FP16 run of the throughput test when it ran, else the same requests (or fresh ones) now."""
    if "phase2_fp16" in perfgate.runs:
        run = perfgate.runs["phase2_fp16"]
    else:  # the throughput test did not run (or stopped before the FP16 pipeline)
        reqs = (perfgate.runs.requests("phase2_quantized") if "phase2_quantized" in perfgate.runs
                else vision.multimodal_requests(encoders, phase2.requests, phase2.max_tokens))
        run = run_pipeline(perfgate, perfgate_engines, "fp16", phase2, reqs)
    assert run.successful and all((r.output_tokens or 0) > 0 for r in run.successful), "the FP16 pipeline produced no tokens"
    perfgate.check(run, gate="fp16_pipeline_throughput")

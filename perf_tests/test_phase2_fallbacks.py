"""Phase 2 fallback: the FP16 vision pipeline. Runs only when a phase-2 gate triggered it (in this
run or the recorded decision): it serves the same image + text requests with the encoder unquantized
and records its throughput (the plan's stated cost: 20 tok/s)."""

from __future__ import annotations

from typing import Any

import pytest
from test_phase2 import _run_pipeline

pytestmark = pytest.mark.phase2


@pytest.mark.fallback("fp16_pipeline")
@pytest.mark.gate("fp16_pipeline_throughput")
def test_fp16_pipeline(perfgate: Any, perfgate_engines: Any, vision: Any, phase2: dict[str, Any],
                       runs: dict[str, Any]) -> None:
    from pytest_perfgate.vision import suite

    run = runs.get("phase2_fp16")
    if run is None:  # the throughput test did not run (or stopped before the FP16 pipeline)
        reqs = runs.get("phase2_requests") or suite.multimodal_requests(vision, phase2["requests"], phase2["max_tokens"])
        run = _run_pipeline(perfgate_engines, "fp16", vision, phase2, reqs)
    assert run.successful and all((r.output_tokens or 0) > 0 for r in run.successful), "the FP16 pipeline produced no tokens"
    perfgate.check(run, gate="fp16_pipeline_throughput")

"""``[params.phase2]`` as the typed workload the phase-2 suite reads (vision.Phase2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate import load_thresholds, vision

ROOT = Path(__file__).resolve().parents[2]


def test_the_roadmap_params_on_each_device() -> None:
    raw = load_thresholds(ROOT / "thresholds.toml").params["phase2"]
    cpu = vision.Phase2.parse(raw, "cpu")
    gpu = vision.Phase2.parse(raw, "cuda")
    assert cpu.vision_quant == "torch-dynamic-int8" and gpu.vision_quant == "int8-dynamic"  # the CPU's own choice
    assert cpu.requests == 6 and cpu.timing_batches == (1, 16) and gpu.requests == 6  # embedded overrides
    assert cpu.reference_dtype == "fp32" and gpu.reference_dtype == "fp16"
    assert cpu.engine("quantized") is None and cpu.as_mapping()["max_per_class"] == 100


def test_a_configured_pipeline_engine_and_bad_input() -> None:
    base = {"vision_quant": "int8-dynamic", "paths": ["fp16"], "timing_batches": [1], "requests": 4,
            "max_tokens": 8, "max_seconds": 60}
    p = vision.Phase2.parse({**base, "quantized": "my-vlm-int8"}, "cuda")
    assert p.engine("quantized") == "my-vlm-int8" and p.engine("fp16") is None
    with pytest.raises(ValueError, match="one of quantized, fp16"):
        p.engine("int4")
    with pytest.raises(ValueError, match=r"\[params.phase2\]: missing requests"):
        vision.Phase2.parse({k: v for k, v in base.items() if k != "requests"}, "cpu")

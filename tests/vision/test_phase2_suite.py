"""The roadmap's phase-2 suite (perf_tests/test_phase2*.py) end to end through pytester, on the
generated images, the trained tiny encoder and the tiny LLaVA served by transformers on the CPU:

* INT8 (the embedded gated path) passes both quality gates with a small, non-zero, measured loss; the
  decision record holds the memory figures; multimodal requests produce tokens with measured tok/s;
* the deliberately damaged quantization (2-bit, per-tensor scale) fails the quality gates, triggers
  ``fp16_pipeline``, and the fallback's test then runs and records the FP16 pipeline's throughput.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate.models.make import default_cache_dir

ROOT = Path(__file__).resolve().parents[2]
# read before pytester points HOME at its temporary directory: the suite then reuses the cached
# images, encoder and VLM (building them is the first run's job, not each test's)
CACHE = default_cache_dir()

# CI-sized: fewer images per class, two timed paths, short requests (same gates and code).
# requests = 12, not 3: multimodal_throughput is a ratio of sums over the requests (CR2 variance,
# Student t with requests - 1 degrees of freedom); beside two busy loops 3 requests read 80.8 tok/s
# with bounds -101 to 262 (inconclusive against min 1 tok/s: one slowed request and t at 2 degrees
# of freedom). By simulation (2*10^4 runs each) of 12-token requests of ~0.15 s with per-request
# log-sd 0.5-0.8 and, in 30% of them, a stall of exponential mean 0.3 s: P(lower bound > 1 tok/s)
# at 3 requests 36-52%, at 12 98.7-99.1% (each extra request costs ~0.2-0.5 s on this machine).
BUDGETS = """
[params.phase2.embedded]
vision_quant = "{quant}"
paths = [{paths}]
max_per_class = 60
timing_batches = [1, 8]
requests = 12
max_tokens = 12
"""


def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, quant: str, paths: list[str]) -> None:
    monkeypatch.setenv("PERFGATE_CACHE", str(CACHE))
    text = (ROOT / "thresholds.toml").read_text()
    # tok/s on a shared 2-core CI machine is the load's, not the code's: the proof gates >= 1 tok/s
    # (the main job gates the roadmap's 30 tok/s)
    old = 'min = "30 tok/s"'
    assert old in text
    text = text.replace(old, 'min = "1 tok/s"', 1)
    text = text.replace("[params.phase2.embedded]", "[params.phase2.embedded_main_job]")
    budgets = BUDGETS.format(quant=quant, paths=", ".join(f'"{p}"' for p in paths))
    pytester.makefile(".toml", thresholds=text + budgets)
    shutil.copytree(ROOT / "perf_tests", pytester.path / "perf_tests", ignore=shutil.ignore_patterns("__pycache__"))
    (pytester.path / "docs").mkdir()


def decision(pytester: pytest.Pytester) -> dict[str, Any]:
    doc = json.loads((pytester.path / "perfgate-results" / "decisions.json").read_text())
    return dict(doc["phases"]["phase2"])


def test_int8_passes_with_measured_loss_memory_and_tokens(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    suite(pytester, monkeypatch, "torch-dynamic-int8", ["torch-dynamic-int8"])
    r = pytester.runpytest_subprocess("perf_tests/test_phase2.py", "perf_tests/test_phase2_fallbacks.py",
                                      "-p", "no:cacheprovider", "-rs", "-s", timeout=900)
    out = r.stdout.str()
    assert r.ret == 0, out[-5000:]
    r.assert_outcomes(passed=5, skipped=2)  # GPU peak memory and the (untriggered) fallback skip
    assert "peak memory of both pipelines needs a CUDA GPU" in out
    assert "fallback fp16_pipeline: not triggered" in out
    assert "phase 2 runs under phase-1 outcome:" in out
    d = decision(pytester)
    by = {v["gate"]: v for v in d["verdicts"]}
    q = by["vision_quality_loss"]
    assert q["outcome"] == "pass" and q["n"] > 300 and q["upper"] < 0.05
    assert 0 < by["vision_embedding_loss"]["observed"] < 0.01  # small, but measured (not zero)
    assert by["vision_quality_loss_fine"]["outcome"] == "pass"
    before = by["vision_encoder_bytes_reference"]["observed"]
    after = by["vision_encoder_bytes_quantized"]["observed"]
    assert 0 < after < before and by["vision_kv_tokens_freed"]["observed"] > 0
    t = by["multimodal_throughput"]
    assert t["outcome"] == "pass" and t["observed"] > 1 and t["n"] == 12
    assert by["multimodal_vs_fp16_throughput"]["outcome"] == "recorded"
    assert any(e.get("kind") == "transformers-vlm" for e in d["engines"]) or "vlm_quantized" in out
    assert (pytester.path / "perfgate-results" / "phase2-paths.md").is_file()


def test_damaged_quantization_fails_and_runs_the_fp16_fallback(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    suite(pytester, monkeypatch, "damaged-w2", ["damaged-w2"])
    r = pytester.runpytest_subprocess("perf_tests/test_phase2.py", "perf_tests/test_phase2_fallbacks.py",
                                      "-k", "quality or fp16_pipeline", "-p", "no:cacheprovider", "-rs", "-s",
                                      timeout=900)
    out = r.stdout.str()
    assert r.ret == 1, out[-5000:]
    r.assert_outcomes(passed=1, failed=1)  # the quality test fails; the FP16 fallback's test runs and passes
    assert "-> fallback: fp16_pipeline" in out
    d = decision(pytester)
    by = {v["gate"]: v for v in d["verdicts"]}
    assert by["vision_quality_loss"]["outcome"] == "fail" and by["vision_quality_loss"]["lower"] > 0.05
    assert d["triggered_fallbacks"] == ["fp16_pipeline"]
    assert [t["outcome"] for t in d["fallback_tests"]] == ["passed"]
    assert by["fp16_pipeline_throughput"]["observed"] > 0

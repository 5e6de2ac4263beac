from __future__ import annotations

import pytest

THRESHOLDS = """
[perfgate]
confidence = 0.95

[phases.phase1]
title = "Speculative decoding for long context"

[phases.phase2]
title = "INT8 vision encoder"
depends_on = ["phase1"]

[fallbacks.tiered_kv_cache]
title = "Plan A: tiered KV cache (GPU hot, CPU warm tokens)"
cost = "page swap 30-50 ms; TTFT about 40% lower"
doc = "docs/fallbacks.md#tiered-kv-cache"

[fallbacks.fp16_pipeline]
title = "FP16 pipeline"
doc = "docs/fallbacks.md#fp16-pipeline"

[gates.long_context_ttft]
phase = "phase1"
metric = "ttft"
statistic = "p99"
max = "150 ms"
baseline = "320 ms"
fallback = ["tiered_kv_cache"]

[gates.acceptance]
phase = "phase1"
metric = "acceptance_rate"
min = "70%"

[gates.mm_throughput]
phase = "phase2"
metric = "output_throughput"
statistic = "value"
min = "30 tok/s"
baseline = "15 tok/s"
single = true
fallback = ["fp16_pipeline"]
"""

TESTS = """
import os
import pytest

TTFT_MS = float(os.environ.get("TTFT_MS", "100"))

@pytest.mark.gate("long_context_ttft")
def test_ttft(perfgate):
    perfgate.check(perfgate.samples([TTFT_MS] * 400, "ms"))

@pytest.mark.gate("acceptance")
def test_acceptance(perfgate):
    perfgate.check(perfgate.proportion(760, 1000))

@pytest.mark.fallback("tiered_kv_cache")
def test_plan_a(perfgate):
    d = perfgate.decision("phase1")
    assert "tiered_kv_cache" in d["triggered_fallbacks"]

def test_unrelated():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_gates=TESTS)
    return pytester

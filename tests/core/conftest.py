from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate.config import Thresholds, load_thresholds

TOML = """
[perfgate]
confidence = 0.95
[phases.phase1]
title = "Speculative decoding for long context"
[fallbacks.tiered_kv_cache]
title = "Plan A: tiered KV cache (GPU hot, CPU warm tokens)"
cost = "page swap 30-50 ms; TTFT about 40% lower"
doc = "docs/fallbacks.md#tiered-kv-cache"
[fallbacks.sequence_parallel]
title = "Plan B: sequence parallelism"
doc = "docs/fallbacks.md#sequence-parallel"
[gates.long_context_ttft]
phase = "phase1"
metric = "ttft"
statistic = "p99"
max = "150 ms"
baseline = "320 ms"
fallback = ["tiered_kv_cache", "sequence_parallel"]
[gates.acceptance]
phase = "phase1"
metric = "acceptance_rate"
min = "70%"
bands = { "large gain" = "80%", medium = "70%", insufficient = "0%" }
[gates.mean_tpot]
phase = "phase1"
metric = "tpot"
statistic = "mean"
max = "50 ms"
[gates.tput_ratio]
phase = "phase1"
metric = "output_throughput"
statistic = "value"
compare = "ratio"
runs = ["speculative", "plain"]
min = 0.8
[gates.cross_node]
phase = "phase1"
metric = "e2e"
statistic = "p99"
compare = "difference"
runs = ["cross_node", "single_node"]
max = "20 ms"
[gates.prefill_reduction]
phase = "phase1"
metric = "ttft"
statistic = "p50"
compare = "reduction"
runs = ["cache_hit", "cold"]
min = "80%"
[gates.tpot_p50]
phase = "phase1"
metric = "tpot"
statistic = "p50"
record_only = true
"""


@pytest.fixture
def th(tmp_path: Path) -> Thresholds:
    p = tmp_path / "thresholds.toml"
    p.write_text(TOML)
    return load_thresholds(p)

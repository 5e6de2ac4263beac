"""Seeded simulations of every verdict kind at its boundary (issue 9): the truth sits exactly on the
threshold, and a verdict may pass at most 1 - c of the time (+ 3 standard errors of the estimate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate.config import Thresholds, load_thresholds

TOML = """
[perfgate]
confidence = 0.95
max_samples = 500
[phases.phase1]
title = "phase 1"
[fallbacks.tiered_kv_cache]
title = "Plan A"
[fallbacks.switch_draft_model]
title = "switch the draft"
[gates.ttft_p99]
phase = "phase1"
metric = "ttft"
statistic = "p99"
max = "150 ms"
fallback = ["tiered_kv_cache"]
[gates.ttft_p50]
phase = "phase1"
metric = "ttft"
statistic = "p50"
max = "150 ms"
[gates.tpot_mean]
phase = "phase1"
metric = "tpot"
statistic = "mean"
max = "50 ms"
[gates.acceptance]
phase = "phase1"
metric = "acceptance_rate"
min = "70%"
fallback = ["switch_draft_model"]
[gates.tput_ratio]
phase = "phase1"
metric = "output_throughput"
statistic = "value"
compare = "ratio"
runs = ["speculative", "baseline"]
min = 0.8
[gates.cross_node]
phase = "phase1"
metric = "e2e"
statistic = "p99"
compare = "difference"
runs = ["cross_node", "single_node"]
max = "20 ms"
[gates.p99_reduction]
phase = "phase1"
metric = "ttft"
statistic = "p99"
compare = "reduction"
runs = ["tiered_kv_cache", "speculative"]
min = "40%"
[gates.p50_reduction]
phase = "phase1"
metric = "ttft"
statistic = "p50"
compare = "reduction"
runs = ["cache_hit", "cold"]
min = "80%"
[gates.throughput]
phase = "phase1"
metric = "output_throughput"
statistic = "value"
min = "30 tok/s"
[gates.throughput_single]
phase = "phase1"
metric = "output_throughput"
statistic = "value"
min = "30 tok/s"
single = true
[gates.tpot_p50_recorded]
phase = "phase1"
metric = "tpot"
statistic = "p50"
record_only = true
"""


@pytest.fixture(scope="session")
def th(tmp_path_factory: pytest.TempPathFactory) -> Thresholds:
    p: Path = tmp_path_factory.mktemp("stats") / "thresholds.toml"
    p.write_text(TOML)
    return load_thresholds(p)

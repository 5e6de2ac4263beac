"""KV-cache pressure of a run from the engine's counters (names as flatten_metrics gives them)."""

from __future__ import annotations

import pytest

from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.kv import KV_USAGE, PREEMPTIONS, SWAPPED, kv_pressure
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.verdicts.samples import SampleError


def test_peak_usage_over_polls_and_preemptions_from_the_counter_delta() -> None:
    before = {PREEMPTIONS: 3.0, KV_USAGE: 0.0}
    after = {PREEMPTIONS: 10.0, KV_USAGE: 0.1}
    p = kv_pressure(before, after, [{KV_USAGE: 0.4}, {KV_USAGE: 0.93}, {"other": 1.0}])
    assert p.peak_usage == pytest.approx(0.93) and p.polls == 3
    assert p.preemptions == 7 and p.recomputed == 7 and p.swapped == 0  # v1: preemption = recompute
    assert float(p.perfgate_data("preemptions").values[0]) == 7.0
    assert float(p.perfgate_data("kv_cache_usage").values[0]) == pytest.approx(0.93)  # base unit: fraction


def test_engine_with_a_swap_counter_and_engine_without_counters() -> None:
    p = kv_pressure({PREEMPTIONS: 0.0}, {PREEMPTIONS: 2.0, SWAPPED: 0.0}, [{SWAPPED: 3.0}])
    assert p.swapped == 3 and p.recomputed is None and p.preemptions == 2
    none = kv_pressure({}, {})
    assert none.peak_usage is None and none.preemptions is None and none.swapped is None
    with pytest.raises(SampleError, match="no vllm:num_preemptions counter"):
        none.perfgate_data("preemptions")
    with pytest.raises(SampleError, match="no vllm:kv_cache_usage_perc gauge"):
        none.perfgate_data("kv_cache_usage")


def test_every_run_result_records_its_kv_pressure() -> None:
    run = RunResult(records=[RequestRecord(index=0)], counters_before={PREEMPTIONS: 1.0},
                    counters_after={PREEMPTIONS: 4.0, KV_USAGE: 0.5}, gauges=[{KV_USAGE: 0.75}])
    d = run.to_dict()
    assert d["kv_pressure"] == {"peak_usage": 0.75, "polls": 2, "preemptions": 3, "recomputed": 3, "swapped": 0}
    assert float(run.perfgate_data("preemptions").values[0]) == 3.0

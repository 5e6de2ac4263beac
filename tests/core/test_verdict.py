"""evaluate(gate, data) on every kind of data, and the edge cases of tiny samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_perfgate import GateFailure, Proportion, SampleError, evaluate, make_samples
from pytest_perfgate.config import Thresholds


def test_failure_message_names_the_fallback(th: Thresholds) -> None:
    rng = np.random.default_rng(0)
    v = evaluate(th.gate("long_context_ttft"), make_samples(rng.normal(212, 8, 500), "ms"), thresholds=th)
    assert v.outcome == "fail" and v.n == 500 and v.triggered == ("tiered_kv_cache", "sequence_parallel")
    msg = str(GateFailure(v))
    assert msg.startswith("gate long_context_ttft: ttft p99 = ")
    assert "(one-sided 95% bounds " in msg and "n=500) > max 150 ms (baseline 320 ms" in msg
    assert '-> fallback: tiered_kv_cache "Plan A: tiered KV cache (GPU hot, CPU warm tokens)" (docs/fallbacks.md#tiered-kv-cache)' in msg
    assert isinstance(GateFailure(v), AssertionError)


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_samples_are_inconclusive_with_needed(th: Thresholds, n: int) -> None:
    v = evaluate(th.gate("long_context_ttft"), make_samples([100.0] * n, "ms"), thresholds=th)
    # one sample is never a pass of a percentile gate: it is a sample, not the percentile
    assert v.outcome == "inconclusive" and v.needed == 299 and v.method == "order-statistic"
    assert f"need >= 299 samples in all ({299 - n} more)" in v.summary()


def test_zero_samples_rejected(th: Thresholds) -> None:
    with pytest.raises(SampleError, match="no samples"):
        evaluate(th.gate("long_context_ttft"), make_samples([], "ms") if False else [], thresholds=th)


def test_all_equal_samples(th: Thresholds) -> None:
    v = evaluate(th.gate("long_context_ttft"), make_samples([100.0] * 400, "ms"), thresholds=th)
    assert v.outcome == "pass" and v.lower == v.upper == pytest.approx(0.1)
    v = evaluate(th.gate("mean_tpot"), make_samples([40.0] * 12, "ms"), thresholds=th)
    assert v.outcome == "pass"
    v = evaluate(th.gate("mean_tpot"), make_samples([40.0] * 5, "ms"), thresholds=th)
    assert v.outcome == "inconclusive" and v.needed == 12 and "needs >= 12 samples" in v.note


@pytest.mark.parametrize(
    ("values", "unit", "match"),
    [
        ([1.0, float("nan")], "ms", "item 1 is nan"),
        ([1.0, float("inf")], "ms", "item 1 is inf"),
        ([1.0, -2.0], "ms", "negative duration"),
        (["1 ms", "2 tok/s"], "", "mixed units"),
        ([1.0, "x"], "ms", "item 1"),
        ([1.0], "parsecs", "unknown unit"),
    ],
)
def test_bad_samples(values: list[object], unit: str, match: str) -> None:
    with pytest.raises(SampleError, match=match):
        make_samples(values, unit)


def test_wrong_dimension(th: Thresholds) -> None:
    with pytest.raises(SampleError, match="ttft is measured in time"):
        evaluate(th.gate("long_context_ttft"), make_samples([1.0] * 10, "tok/s"), thresholds=th)


def test_proportion_and_bands(th: Thresholds) -> None:
    v = evaluate(th.gate("acceptance"), Proportion(7600, 10000), thresholds=th)
    assert v.outcome == "pass" and v.band == "medium" and v.method == "clopper-pearson"
    v = evaluate(th.gate("acceptance"), Proportion(850, 1000), thresholds=th)
    assert v.band == "large gain"
    v = evaluate(th.gate("acceptance"), Proportion(5, 100), thresholds=th)
    assert v.outcome == "fail" and v.band == "insufficient"
    v = evaluate(th.gate("acceptance"), Proportion(72, 100), thresholds=th)
    assert v.outcome == "inconclusive" and v.needed and v.needed > 100
    with pytest.raises(SampleError, match="0 trials"):
        evaluate(th.gate("acceptance"), Proportion(0, 0), thresholds=th)


def test_ratio_gate_is_reproducible(th: Thresholds) -> None:
    rng = np.random.default_rng(3)
    spec = make_samples(rng.normal(100, 5, 40), "tok/s", denominators=np.ones(40))
    plain = make_samples(rng.normal(110, 5, 40), "tok/s", denominators=np.ones(40))
    v1 = evaluate(th.gate("tput_ratio"), (spec, plain), thresholds=th)
    v2 = evaluate(th.gate("tput_ratio"), (spec, plain), thresholds=th)
    assert v1 == v2 and v1.method == "Welch t on the log ratio of sums" and v1.outcome == "pass"
    assert v1.lower < v1.observed < v1.upper
    assert "design: requests as the unit (40 vs 40), assumes no run-to-run variance" in v1.note


def test_single_values_ratio(th: Thresholds) -> None:
    from dataclasses import replace

    pair = (make_samples([30], "tok/s"), make_samples([40], "tok/s"))
    v = evaluate(th.gate("tput_ratio"), pair, thresholds=th)  # one number a side: no bound
    assert v.outcome == "inconclusive" and v.observed == pytest.approx(0.75) and "single = true" in v.note
    v = evaluate(replace(th.gate("tput_ratio"), single=True), pair, thresholds=th)
    assert v.outcome == "fail" and v.method == "single" and "single = true" in v.summary()


def test_difference_gate(th: Thresholds) -> None:
    rng = np.random.default_rng(5)
    single = make_samples(rng.normal(45, 2, 1000), "ms")
    cross = make_samples(rng.normal(95, 2, 1000), "ms")
    v = evaluate(th.gate("cross_node"), (cross, single), thresholds=th)
    assert v.outcome == "fail" and 0.045 < v.observed < 0.06 and v.unit == "ms"


def test_reduction_gate(th: Thresholds) -> None:
    rng = np.random.default_rng(6)
    cold = make_samples(rng.normal(100, 3, 50), "ms")
    hit = make_samples(rng.normal(10, 1, 50), "ms")
    v = evaluate(th.gate("prefill_reduction"), (hit, cold), thresholds=th)
    assert v.outcome == "pass" and v.observed == pytest.approx(0.9, abs=0.02)


def test_compare_needs_a_pair(th: Thresholds) -> None:
    with pytest.raises(SampleError, match="compares two runs \\(speculative and plain\\)"):
        evaluate(th.gate("tput_ratio"), make_samples([1.0], "tok/s"), thresholds=th)


def test_recorded_only(th: Thresholds) -> None:
    v = evaluate(th.gate("tpot_p50"), make_samples([10.0, 11.0, 12.0], "ms"), thresholds=th)
    assert v.outcome == "recorded" and v.passed and v.triggered == ()


def test_value_statistic_of_repeated_runs_is_their_mean(th: Thresholds) -> None:
    from dataclasses import replace

    from pytest_perfgate.config.units import parse_quantity

    gate = replace(th.gate("tput_ratio"), compare=None, threshold=parse_quantity("30 tok/s"), direction="min")
    v = evaluate(gate, make_samples([40.0, 41.0, 39.5, 40.2] * 3, "tok/s"), thresholds=th)
    assert v.outcome == "pass" and v.method == "skew-corrected t" and "mean of repeated runs" in v.note
    v = evaluate(gate, make_samples([40.0], "tok/s"), thresholds=th)  # one run: no bound unless single = true
    assert v.outcome == "inconclusive" and "repeat the run" in v.note
    assert evaluate(replace(gate, single=True), make_samples([40.0], "tok/s"), thresholds=th).outcome == "pass"


def test_one_million_samples(th: Thresholds) -> None:
    """A verdict on 1,000,000 samples: bounds from order statistics. How long it takes is a figure
    of the machine, printed by benchmarks/bench_stats.py (target 100 ms), not asserted here."""
    x = make_samples(np.random.default_rng(1).exponential(50, 1_000_000), "ms")
    v = evaluate(th.gate("long_context_ttft"), x, thresholds=th)
    assert v.n == 1_000_000 and math.isfinite(v.upper) and v.method == "order-statistic"
    assert v.lower <= v.observed <= v.upper
    assert evaluate(th.gate("long_context_ttft"), x, thresholds=th) == v  # the same data, the same verdict


def test_to_dict_is_json(th: Thresholds) -> None:
    import json

    v = evaluate(th.gate("long_context_ttft"), make_samples([100.0] * 3, "ms"), thresholds=th)
    d = json.loads(json.dumps(v.to_dict(), allow_nan=False))
    assert d["upper"] is None and d["display"]["threshold"] == "150 ms"


def test_failed_requests_are_an_error_never_a_pass(th: Thresholds) -> None:
    from pytest_perfgate.contract import RequestRecord
    from pytest_perfgate.load.result import RunResult

    recs = [RequestRecord(index=i, sent_ns=0, error="connection refused: [Errno 111]") for i in range(5)]
    v = evaluate(th.gate("long_context_ttft"), RunResult(recs), thresholds=th)
    assert v.outcome == "error" and v.triggered == () and not v.passed
    assert "5/5 requests failed (5 x connection refused)" in v.summary()
    ok = RequestRecord(index=9, sent_ns=0, chunk_ns=[10_000_000, 20_000_000], chunk_tokens=[1, 1], end_ns=20_000_000,
                       output_tokens=2)
    v = evaluate(th.gate("long_context_ttft"), RunResult([*recs[:1], ok]), thresholds=th)
    assert v.outcome == "error" and "1/2 requests failed" in v.summary()
    with pytest.raises(GateFailure, match="ERROR"):
        raise GateFailure(v)

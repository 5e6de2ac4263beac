"""The failing gate as a reviewer reads it (verdicts/review.py, issue 35): the outcome, the metric and
statistic, observed vs threshold with units, n and how sure in plain words on the first line; the
physical floor its own line only when it decides; the fallback line as before; the bounds, the
sequential plan and the notes only in the full summary (-v, summary.md, report.html, gates.xml)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pytest_perfgate import GateFailure, Proportion, Verdict, evaluate, load_thresholds, make_samples
from pytest_perfgate.plugin.shortfail import message
from pytest_perfgate.verdicts.review import first_line, floor_line, percent, review_lines
from pytest_perfgate.verdicts.samples import RequestCounts

TH = load_thresholds(Path(__file__).resolve().parents[2] / "thresholds.toml")
SEQ = "sequential: decided after 1 look; planned 17 looks (fail side: 0.05 split over them, each at 0.9971)"


def _ttft(ms: list[float], c: float = 0.95, **kw: Any) -> Verdict:
    v = evaluate(TH.gate("long_context_ttft"), make_samples([x / 1e3 for x in ms], "s"), confidence=c, thresholds=TH)
    fb = tuple(TH.fallbacks[f] for f in TH.gate("long_context_ttft").fallbacks)
    return dataclasses.replace(v, fallback_info=fb, **kw)


def test_the_issues_failing_gate_reads_in_two_short_lines_then_its_fallbacks() -> None:
    v = _ttft([1458.0, 1459.0, 1460.0, 1461.0], c=0.9971, note=SEQ, floor=0.792, floor_kind="floor",
              floor_multiple=0.150 / 0.792, efficiency=0.543, efficiency_kind="MFU")
    lines = GateFailure(v).brief.splitlines()
    assert lines[0] == "FAILED long_context_ttft: ttft p99 1461 ms > max 150 ms (n=4, 99.7% sure it is above)"
    assert lines[1] == "infeasible on this hardware: the floor is 792 ms (max 150 ms is 0.189x it)"
    assert lines[2].startswith('-> fallback: tiered_kv_cache "Plan A') and len(lines) == 3
    assert max(len(ln) for ln in lines[:2]) < 100
    brief = "\n".join(lines)
    for detail in ("sequential", "one-sided", "MFU", "baseline 320 ms"):
        assert detail not in brief and detail in str(GateFailure(v))  # the full text: -v, --tb=long


def test_a_floor_below_the_threshold_does_not_decide_and_is_not_said() -> None:
    v = _ttft([212.0] * 400, floor=0.052, floor_kind="floor", floor_multiple=0.150 / 0.052)
    assert floor_line(v) == "" and len(review_lines(v)) == 1


def test_every_outcome_kind() -> None:
    assert first_line(_ttft([100.0] * 600)) == "PASSED long_context_ttft: ttft p99 100 ms < max 150 ms (n=600, 95% sure it is below)"
    inc = first_line(_ttft([100.0] * 50))
    assert inc.startswith("INCONCLUSIVE long_context_ttft: ttft p99 100 ms vs max 150 ms (n=50, not sure either way: "
                          "need >= 299 samples in all (249 more)")
    acc = evaluate(TH.gate("draft_acceptance"), Proportion(330, 600), confidence=0.95, thresholds=TH)
    assert first_line(acc) == ("FAILED draft_acceptance: acceptance_rate rate 55.0% < min 70.0% "
                               "(n=600 trials, 95% sure it is below; band: insufficient)")
    err = Verdict.error(TH.gate("long_context_ttft"), "12/24 requests failed (12 x HTTP 500); more", confidence=0.95,
                        requests=RequestCounts(24, 12, {"HTTP 500": 12}), observed=0.131, unit="ms")
    assert review_lines(err) == ["ERROR long_context_ttft: ttft p99 not evaluated: 12/24 requests failed (12 x HTTP 500); more",
                                 "ttft p99 of the requests that succeeded: 131 ms (not gated)"]
    ratio = evaluate(TH.gate("spec_throughput_ratio"), ([make_samples([x], "tok/s") for x in (61.0, 60.2, 62.3)],
                                                        [make_samples([x], "tok/s") for x in (100.0, 99.0, 101.5)]),
                     confidence=0.95, thresholds=TH)
    assert first_line(ratio).startswith("FAILED spec_throughput_ratio: ratio of output_throughput value 0.611 < min 0.800 "
                                        "(n=3 runs a side, 95% sure it is below)")
    reg = _ttft([100.0] * 600, outcome="fail", details={"target_met": 1.0, "baseline_regressed": 1.0,
                                                         "baseline_change": 0.31, "baseline_tolerance": 0.05})
    assert first_line(reg) == ("FAILED long_context_ttft: ttft p99 +31% vs the baseline run, beyond its 5% tolerance "
                               "(n=600; target met: 100 ms < max 150 ms)")
    assert (percent(0.9971), percent(0.95), percent(0.975)) == ("99.7%", "95%", "97.5%")


def test_the_terminal_shows_the_brief_and_with_v_the_full_summary() -> None:
    exc = GateFailure(_ttft([212.0] * 400, note=SEQ))
    brief, head = message(exc, False, None) or ([], "")
    full, _ = message(exc, False, None, verbose=1) or ([], "")
    assert brief[0].startswith("FAILED long_context_ttft") and full[0].startswith("gate long_context_ttft: ttft p99 = 212 ms")
    assert "sequential" in full[0] and "sequential" not in "\n".join(brief)
    assert head == "gate long_context_ttft: ttft p99 212 ms > max 150 ms; fallback: tiered_kv_cache, sequence_parallel"


def test_an_outcome_without_a_decision_claims_no_side() -> None:
    v = _ttft([100.0] * 600, outcome="invalid")  # an outcome kind this module does not know
    assert first_line(v) == "INVALID long_context_ttft: ttft p99 100 ms vs max 150 ms (n=600)"

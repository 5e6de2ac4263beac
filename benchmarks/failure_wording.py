"""What a reviewer reads for each outcome kind: the failing test's text (the default terminal and
``-v``), the short-summary line and the gate-table row, over synthetic verdicts of thresholds.toml's
gates (the issue-35 example among them). Printed, not asserted:

    PYTHONPATH=. .venv/bin/python benchmarks/failure_wording.py
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from pytest_perfgate import load_thresholds
from pytest_perfgate.plugin.shortfail import message
from pytest_perfgate.verdicts.failures import GateFailure
from pytest_perfgate.verdicts.samples import Proportion, RequestCounts, make_samples
from pytest_perfgate.verdicts.verdict import Verdict, evaluate
from pytest_perfgate.writers.table import gate_table

ROOT = Path(__file__).resolve().parents[1]
TH = load_thresholds(ROOT / "thresholds.toml")
SEQ = ("sequential: decided after 1 look; planned 17 looks (fail side: 0.05 split over them, each at 0.9971); "
       "pass possible from n=459: 5 pass look(s) at 518, 778, 1167, 1751, 1800, each at 0.9900; 3 warm-up "
       "request(s) excluded: sent first, shaped like the measured ones (a cold engine never decides a "
       "steady-state gate)")


def _fb(name: str) -> tuple[Any, ...]:  # the gate's fallback plans, as the fixture attaches them
    return tuple(TH.fallbacks[f] for f in TH.gate(name).fallbacks if f in TH.fallbacks)


def _ev(name: str, data: Any, c: float = 0.95, **kw: Any) -> Verdict:
    v = evaluate(TH.gate(name), data, confidence=c, thresholds=TH)
    return dataclasses.replace(v, fallback_info=_fb(name), **kw)


def cases() -> dict[str, Verdict]:
    rng = np.random.default_rng(1)

    def ms(xs: Any) -> Any:
        return make_samples(np.asarray(xs) / 1e3, "s")

    out = {
        "pass": _ev("long_context_ttft", ms(rng.normal(100, 8, 600))),
        "fail with floor (the issue's example)": _ev(
            "long_context_ttft", ms([1458.0, 1459.0, 1460.0, 1461.0]), c=0.9971, note=SEQ,
            floor=0.792, floor_kind="floor", floor_multiple=0.150 / 0.792, efficiency=0.543, efficiency_kind="MFU"),
        "fail with a floor that does not decide": _ev(
            "long_context_ttft", ms(rng.normal(190, 10, 600)),
            floor=0.052, floor_kind="floor", floor_multiple=0.150 / 0.052, efficiency=0.274, efficiency_kind="MFU"),
        "fail (proportion, band)": _ev("draft_acceptance", Proportion(330, 600, "acceptance")),
        "inconclusive": _ev("long_context_ttft", ms(rng.normal(120, 12, 60))),
        "error": dataclasses.replace(Verdict.error(
            TH.gate("long_context_ttft"), "12/24 requests failed (12 x HTTP 500 from http://127.0.0.1:8000/v1/"
            "completions: internal error)", confidence=0.95, requests=RequestCounts(24, 12, {"HTTP 500": 12}),
            observed=0.131, unit="ms"), fallback_info=_fb("long_context_ttft")),
        "comparison: ratio (fail)": _ev("spec_throughput_ratio", (
            [make_samples([x], "tok/s") for x in (61.0, 60.2, 62.3, 60.8)],
            [make_samples([x], "tok/s") for x in (100.0, 99.0, 101.5, 100.4)])),
        "comparison: reduction (pass)": _ev("prefix_cache_prefill_reduction",
                                            (ms(rng.normal(12, 1, 200)), ms(rng.normal(160, 9, 200)))),
        "baseline regression (target met)": _ev(
            "long_context_ttft", ms(rng.normal(100, 8, 600)), outcome="fail",
            details={"target_met": 1.0, "baseline_regressed": 1.0, "baseline_change": 0.31, "baseline_tolerance": 0.05},
            note="vs baseline run 20261201-0912: P99 +31% (one-sided 95% bounds +22% - +40%): REGRESSED beyond 5%"),
    }
    return out


def main() -> None:
    for kind, v in cases().items():
        print(f"=== {kind} ({v.outcome})")
        exc = GateFailure(v)
        for verbose in (0, 1):
            got = message(exc, False, None, **({"verbose": verbose} if "verbose" in message.__code__.co_varnames else {}))
            lines, head = got if got else ([], "")
            print(f"--- {'-v' if verbose else 'default'} terminal, the failing test's text (a pass fails no test: "
                  f"what it would say): {len(lines)} lines, longest {max(map(len, lines))} chars")
            print("\n".join(lines))
        print("--- short test summary: FAILED perf_tests/test_phase1.py::test_x - " + head)
        print("--- gate table")
        print("\n".join(gate_table([v.to_dict()])))
        print()


if __name__ == "__main__":
    main()

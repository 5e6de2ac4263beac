"""Hand-built decision documents shared by the writer tests (hostile strings included)."""

from __future__ import annotations

from typing import Any

from pytest_perfgate.config.units import format_value, unit

HOSTILE = "</script><img src=x onerror=alert(1)> ]]> & \"quote' \x00\x07\x1b[31m \ud800 \udfff \ufffe end"


def verdict(
    gate: str = "long_context_ttft",
    outcome: str = "pass",
    *,
    phase: str = "phase1",
    metric: str = "ttft",
    statistic: str = "p99",
    observed: float | None = 0.120,
    lower: float | None = 0.110,
    upper: float | None = 0.131,
    threshold: float | None = 0.150,
    direction: str | None = "max",
    baseline: float | None = 0.320,
    n: int = 500,
    method: str = "order-statistic",
    unit_name: str = "ms",
    fallbacks: tuple[str, ...] = (),
    band: str | None = None,
    needed: int | None = None,
    note: str = "",
    test: str = "perf_tests/test_phase1.py::test_ttft",
) -> dict[str, Any]:
    """A verdict dict shaped like ``Verdict.to_dict()`` plus ``test``."""
    u = unit(unit_name)

    def fmt(x: float | None) -> str:
        return "n/a" if x is None else format_value(x, u)

    imp = None if not baseline or observed is None else (baseline - observed) / abs(baseline)
    if imp is not None and direction == "min":
        imp = -imp
    ci = "single measurement" if method == "single" else f"95% CI {fmt(lower)} - {fmt(upper)}, n={n}"
    return {
        "gate": gate, "phase": phase, "outcome": outcome, "metric": metric, "statistic": statistic,
        "observed": observed, "lower": lower, "upper": upper, "n": n, "confidence": 0.95, "method": method,
        "unit": unit_name, "direction": direction, "threshold": threshold, "baseline": baseline,
        "needed": needed, "fallbacks": list(fallbacks), "band": band, "compare": None, "note": note,
        "details": {}, "improvement": imp, "ci": ci,
        "summary": f"gate {gate}: {metric} {statistic} = {fmt(observed)} ({ci}) {outcome}",
        "display": {k: fmt(v) for k, v in
                    (("observed", observed), ("lower", lower), ("upper", upper),
                     ("threshold", threshold), ("baseline", baseline))},
        "test": test,
    }


def phase_entry(name: str, verdicts: list[dict[str, Any]], *, outcome: str = "passed", **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "phase": name, "title": f"title of {name}", "depends_on": [], "outcome": outcome,
        "timestamp": "2024-07-01T12:00:00+00:00", "git_commit": "0123456789abcdef0123456789abcdef01234567",
        "thresholds_file": "/repo/thresholds.toml", "thresholds_sha256": "ab" * 32,
        "run_id": "20240701T120000Z-abcdef", "confidence": 0.95, "verdicts": verdicts,
        "triggered_fallbacks": sorted({f for v in verdicts if v["outcome"] == "fail" for f in v["fallbacks"]}),
        "fallback_tests": [], "not_evaluated": [],
    }
    entry.update(extra)
    return entry


FALLBACKS = {
    "tiered_kv_cache": {"title": "Tiered KV cache", "cost": "page swap 30-50 ms", "doc": "docs/fallbacks.md#plan-a"},
    "sequence_parallel": {"title": "Sequence parallelism", "cost": "high complexity", "doc": "https://example.org/sp"},
}


def make_doc() -> dict[str, Any]:
    p1 = [
        verdict("long_context_ttft", "fail", observed=0.212, lower=0.2, upper=0.23,
                fallbacks=("tiered_kv_cache", "sequence_parallel")),
        verdict("acceptance_rate", "pass", metric="acceptance_rate", statistic="rate", observed=0.82,
                lower=0.78, upper=0.85, threshold=0.7, direction="min", baseline=None, unit_name="%",
                method="clopper-pearson", band="large gain", fallbacks=("tiered_kv_cache",)),
        verdict("spec_throughput", "inconclusive", metric="output_throughput", statistic="mean",
                observed=0.81, lower=0.74, upper=0.88, threshold=0.8, direction="min", baseline=None,
                unit_name="", method="bootstrap", needed=1200, n=100),
        verdict("ttft_p50", "recorded", statistic="p50", threshold=None, direction=None, baseline=None,
                lower=None, upper=None),
        verdict("long_context_ttft", "pass", test="perf_tests/test_phase1.py::test_ttft_again"),
    ]
    p2 = [verdict("mm_throughput", "pass", phase="phase2", metric="output_throughput", statistic="value",
                  observed=31.0, lower=31.0, upper=31.0, threshold=30.0, direction="min", baseline=15.0,
                  unit_name="tok/s", method="single", n=1)]
    return {
        "schema": "pytest-perfgate/decisions/1",
        "updated": "2024-07-01T12:00:00+00:00",
        "fallbacks": FALLBACKS,
        "phases": {
            "phase1": phase_entry(
                "phase1", p1, outcome="failed", not_evaluated=["tpot_p99"],
                fallback_tests=[{"test": "perf_tests/test_fb.py::test_tiered", "fallback": "tiered_kv_cache",
                                 "outcome": "failed", "reason": "ttft 180 ms"}],
            ),
            "phase2": phase_entry("phase2", p2, depends_on=["phase1"]),
            "phase3": phase_entry("phase3", [], outcome="not run", not_evaluated=["cross_node_p99"]),
        },
    }

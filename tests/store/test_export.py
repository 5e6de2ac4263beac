"""Dashboard exports checked against the documented shapes of Bencher and github-action-benchmark."""

from __future__ import annotations

from typing import Any

from pytest_perfgate.store.export import bencher, export, github_benchmark


def _v(gate: str, metric: str, direction: str | None, observed: float, unit: str, **kw: Any) -> dict[str, Any]:
    return {"gate": gate, "metric": metric, "statistic": "p99", "direction": direction, "observed": observed,
            "lower": observed * 0.9, "upper": observed * 1.1, "unit": unit, "outcome": "pass", "n": 100,
            "run_id": "r1", **kw}


VS = [
    _v("ttft", "ttft", "max", 0.120, "ms"),
    _v("tput", "output_throughput", "min", 1500.0, "tok/s", statistic="value", lower=None, upper=None),
    _v("acc", "acceptance_rate", "min", 0.72, "%"),
    _v("e2e", "e2e", None, 2.5, "s"),
    _v("broken", "ttft", "max", float("nan"), "ms", outcome="error"),
]


def test_bencher_metric_format() -> None:
    # https://bencher.dev/docs/reference/bencher-metric-format/: {benchmark: {measure: {value, lower_value?, upper_value?}}}
    doc = bencher(VS)
    assert set(doc) == {"ttft", "tput", "acc", "e2e"}
    for measures in doc.values():
        assert isinstance(measures, dict) and len(measures) == 1
        for slug, m in measures.items():
            assert slug == slug.lower() and " " not in slug
            assert set(m) <= {"value", "lower_value", "upper_value"} and isinstance(m["value"], float)
            if "lower_value" in m:
                assert m["lower_value"] <= m["value"] <= m["upper_value"]
    assert doc["ttft"]["ttft-p99"]["value"] == 120.0  # in the gate's display unit
    assert doc["acc"]["acceptance-rate-p99"]["value"] == 72.0
    assert doc["tput"]["output-throughput-value"] == {"value": 1500.0}


def test_github_action_benchmark_custom_json() -> None:
    # github-action-benchmark customSmallerIsBetter / customBiggerIsBetter: [{name, unit, value, range?, extra?}]
    smaller = github_benchmark(VS, smaller_is_better=True)
    bigger = github_benchmark(VS, smaller_is_better=False)
    assert [x["name"] for x in smaller] == ["ttft (ttft p99)", "e2e (e2e p99)"]
    assert [x["name"] for x in bigger] == ["tput (output_throughput value)", "acc (acceptance_rate p99)"]
    for item in smaller + bigger:
        assert set(item) <= {"name", "unit", "value", "range", "extra"}
        assert isinstance(item["name"], str) and isinstance(item["unit"], str)
        assert isinstance(item["value"], (int, float)) and not isinstance(item["value"], bool)
        assert isinstance(item.get("range", ""), str) and isinstance(item.get("extra", ""), str)
    assert export("github-smaller", VS) == smaller and export("bencher", VS) == bencher(VS)

"""report.html's load-sweep plots (latency vs load, throughput vs P99 TTFT with its Pareto front)
from a capacity verdict's curve, rendered; and the exports of capacity, sweep and goodput verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from mm1_runs import mm1_run

from pytest_perfgate.config import parse_thresholds
from pytest_perfgate.load.sweep import Sweep
from pytest_perfgate.store import export
from pytest_perfgate.verdicts.verdict import evaluate
from pytest_perfgate.writers import html as html_writer
from pytest_perfgate.writers.sweep_plots import limits_of, pareto_front, sweep_figure

GATES = {
    "cap": {"phase": "phase1", "metric": "request_throughput", "statistic": "sustained", "min": "2 req/s",
            "slo": {"ttft_p50": "2 s", "tpot_p50": "100 ms"}},
    "good": {"phase": "phase1", "metric": "goodput", "statistic": "value", "min": "0.5 req/s",
             "slo": {"ttft": "2 s"}},
}


def _verdicts() -> tuple[dict[str, object], dict[str, object]]:
    th = parse_thresholds({"phases": {"phase1": {}}, "gates": GATES}, Path("thresholds.toml"))
    rng = np.random.default_rng(5)
    sw = Sweep("rate", {r: mm1_run(rng, r, 3.5) for r in (1.0, 2.0, 4.0)})
    cap = evaluate(th.gate("cap"), sw, thresholds=th).to_dict()
    good = evaluate(th.gate("good"), sw.results[1.0], thresholds=th).to_dict()
    return cap, good


def test_pareto_front_keeps_the_undominated_points() -> None:
    pts = [(1.0, 100.0), (2.0, 150.0), (1.5, 200.0), (3.0, 400.0), (math.nan, 5.0)]
    assert pareto_front(pts) == [0, 1, 3]


def test_report_html_draws_the_sweep(tmp_path: Path) -> None:
    cap, good = _verdicts()
    assert cap["outcome"] == "pass" and isinstance(cap["curve"], list) and len(cap["curve"]) == 3
    assert limits_of(cap) == pytest.approx({"ttft": 2.0, "tpot": 0.1})
    svg = sweep_figure(cap["curve"], limits=limits_of(cap))
    assert svg.startswith("<svg") and "latency vs load" in svg and "Pareto front" in svg
    entry = {"phase": "phase1", "title": "t", "outcome": "passed", "verdicts": [cap, good], "fallback_tests": [],
             "triggered_fallbacks": [], "not_evaluated": [], "required_not_evaluated": [], "depends_on": []}
    doc = json.loads(json.dumps({"schema": "x", "phases": {"phase1": entry}, "fallbacks": {}}, allow_nan=False))
    html = html_writer.render(doc)
    assert html.count('<h4>cap') == 1 and "latency vs load" in html and "throughput vs latency" in html and "load sweep:" in html
    assert sweep_figure([]) == "" and sweep_figure("junk") == ""


def test_exports_carry_capacity_sweep_and_goodput() -> None:
    cap, good = _verdicts()
    b = export.bencher([cap, good])
    assert b["cap"]["sustained"]["value"] == 2.0
    assert set(b["cap@1"]) >= {"achieved-req-s", "goodput-req-s", "ttft-p99-ms"}
    assert b["good"]["goodput-value"]["lower_value"] <= b["good"]["goodput-value"]["value"]
    bigger = export.github_benchmark([cap, good], smaller_is_better=False)
    smaller = export.github_benchmark([cap, good], smaller_is_better=True)
    assert any(i["name"] == "cap@4 achieved-req-s" and i["unit"] == "req/s" for i in bigger)
    assert any(i["name"] == "cap@2 ttft-p99-ms" and i["unit"] == "ms" for i in smaller)
    assert any(i["name"].startswith("good (goodput") for i in bigger)

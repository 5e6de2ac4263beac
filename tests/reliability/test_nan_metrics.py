"""A ``/metrics`` value that is NaN or +-Inf (issue 38, item 8): the counter is dropped with a note
naming it, and nothing measured is lost: every gate's samples and the run's records are stored (no
"Out of range float values are not JSON compliant"), and the report keeps its Runs section."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import one_gate

from pytest_perfgate.config.load import parse_thresholds
from pytest_perfgate.contract import Request, RequestRecord
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.store import records
from pytest_perfgate.verdicts.verdict import evaluate

pytest_plugins = ["pytester"]

ENGINE = '''
import math

class NanMetricsEngine:
    """Answers each request with two chunks at once; its /metrics gauge is NaN, a counter +Inf."""

    name, kind = "nanny", "fake"

    def __init__(self):
        self.reads = 0

    def start(self):
        pass

    def stop(self):
        pass

    async def generate(self, request, record, clock):
        record.sent_ns = clock()
        record.chunk_ns, record.chunk_tokens = [clock(), clock()], [1, 1]
        record.end_ns, record.output_tokens = clock(), 2

    async def counters(self):
        self.reads += 1
        return {"vllm:kv_cache_usage_perc": math.nan, "vllm:num_preemptions": -math.inf,
                "vllm:generation_tokens": 2.0 * self.reads}

    def info(self):
        return {"name": "nanny", "kind": "fake"}

    def count_tokens(self, text):
        return len(text.split())

    def tokenizer(self):
        return None
'''


def nan_engine() -> Any:
    ns: dict[str, Any] = {}
    exec(ENGINE, ns)  # the same engine the pytester session below defines
    return ns["NanMetricsEngine"]()


def test_the_runner_drops_a_nan_counter_with_a_note() -> None:
    run = run_load(nan_engine(), [Request("one two three", 2)], LoadConfig(num_requests=4, warmup=0))
    reads = 2 + len(run.request_counters)  # before, after, and after each request of a sequential run
    assert run.counters_after == {"vllm:generation_tokens": 2.0 * reads}  # the finite counters kept
    assert [n.split(" was ")[0] for n in run.counter_notes] == ["/metrics: vllm:kv_cache_usage_perc",
                                                        "/metrics: vllm:num_preemptions"]
    assert f"was nan in {reads} reading(s): dropped" in run.counter_notes[0]
    json.dumps(run.to_dict(), allow_nan=False)  # valid JSON: nothing of it is lost on the way to disk
    assert RunResult.from_dict(run.to_dict()).counter_notes == run.counter_notes


def test_the_store_keeps_a_run_whose_counters_hold_nan(tmp_path: Path) -> None:
    """A run made elsewhere (a user's engine, an imported file) with NaN counters: stored all the same."""
    th = parse_thresholds({"phases": {"p": {}}, "gates": {"g": {"phase": "p", "metric": "ttft", "statistic": "p50",
                                                                  "max": "1 s"}}}, tmp_path / "t.toml")
    recs = [RequestRecord(index=i, sent_ns=i, chunk_ns=[i + 10, i + 20], chunk_tokens=[1, 1], end_ns=i + 21,
                          output_tokens=2) for i in range(5)]
    run = RunResult(recs, counters_before={"vllm:kv_cache_usage_perc": math.nan, "ok": 1.0},
                    counters_after={"vllm:kv_cache_usage_perc": math.inf, "ok": 2.0},
                    gauges=[{"vllm:kv_cache_usage_perc": math.nan}], engine_info={"name": "e", "odd": math.nan})
    g = th.gate("g")
    rel = records.write(tmp_path, gate=g, verdict=evaluate(g, run), data=run, confidence=0.95, run_id="r")
    back = records.load(tmp_path / rel)
    (stored,) = back.runs
    assert len(stored.records) == 5 and stored.counters_after == {"ok": 2.0} and stored.gauges == [{}]
    assert stored.engine_info == {"name": "e", "odd": None}
    assert stored.counter_notes == ["/metrics: vllm:kv_cache_usage_perc was nan in 3 reading(s): dropped (a counter or "
                            "gauge is a finite number); the gates on it use the other readings"]


def test_through_the_plugin_nothing_measured_is_lost(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", thresholds=one_gate("ttft_p50") + """
[gates.kv]
phase = "p"
metric = "kv_cache_usage"
statistic = "value"
max = "90%"
""")
    pytester.makepyfile(test_nan=ENGINE + '''
import pytest
from pytest_perfgate.contract import Request
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig

@pytest.mark.gate("ttft_p50", "kv")
def test_nan(perfgate):
    run = run_load(NanMetricsEngine(), [Request("one two three", 2)], LoadConfig(num_requests=20, warmup=0))
    perfgate.check_all(run)
''')
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-W", "error::UserWarning")
    out = r.stdout.str()
    assert "not JSON compliant" not in out and "not stored" not in out, out
    r.assert_outcomes(failed=1)  # the kv gate: no finite gauge reading, its named error
    assert ("error kv: kv_cache_usage: no vllm:kv_cache_usage_perc gauge (/metrics: vllm:kv_cache_usage_perc was "
            "nan in ") in out
    res = pytester.path / "perfgate-results"
    verdicts = json.loads((res / "decisions.json").read_text())["phases"]["p"]["verdicts"]
    assert {v["gate"]: v["outcome"] for v in verdicts} == {"ttft_p50": "pass", "kv": "error"}
    assert all(v.get("samples") for v in verdicts)  # every gate's data stored
    assert len(list(res.glob("samples/*/runs/*.parquet"))) == 1  # the run's records, once
    html = (res / "report.html").read_text()
    assert "<h2>Runs</h2>" in html and "vllm:kv_cache_usage_perc was nan" in html

"""The suite-writing API (``from pytest_perfgate import ...``): markers parsed once, runs kept by
name, comparison gates fed by the names in ``runs = [...]``, ``check_all``, declared engine
variants, ``LoadConfig()`` sending each request once and warm-ups with prompts of their own,
typed workload parameters. Engine-free: a real OpenAI-compatible server (the scripted one)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate import ConfigError, LoadConfig, Request, Runs, load_thresholds, workload
from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.load.prompts import warmup_prompts
from pytest_perfgate.plugin.markers import MarkerError, parse
from pytest_perfgate.session.runs import RunNotKept

pytest_plugins = ["pytester"]


@dataclass
class _Mark:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass
class _Item:  # duck-typed like pytest.Item: markers.py never imports pytest
    nodeid: str
    marks: dict[str, list[_Mark]]

    def iter_markers(self, name: str) -> Iterator[_Mark]:
        return iter(self.marks.get(name, []))


def test_markers_parse_into_one_frozen_value() -> None:
    item = _Item("t.py::test", {"gate": [_Mark(("a", "b"), {})], "engine": [_Mark(("spec",), {})]})
    m = parse(item)
    assert (m.gates, m.fallbacks, m.engine) == (("a", "b"), (), "spec")
    with pytest.raises(AttributeError):
        m.gates = ()  # type: ignore[misc]
    with pytest.raises(MarkerError, match=r"t.py::test: @pytest.mark.gate takes names only, got \['x'\]"):
        parse(_Item("t.py::test", {"gate": [_Mark(("a",), {"x": 1})]}))
    with pytest.raises(MarkerError, match="takes names .strings., got 3"):
        parse(_Item("t.py::test", {"fallback": [_Mark((3,), {})]}))


def test_runs_by_name() -> None:
    from pytest_perfgate.load.result import RunResult

    runs = Runs()
    a, b, c = RunResult(records=[]), RunResult(records=[]), RunResult(records=[])
    runs.keep("spec", a, [Request("x", 4)])
    runs.keep("base", b)
    assert runs["spec"] is a and runs.requests("spec") == [Request("x", 4)] and set(runs) == {"spec", "base"}
    assert runs.pair(("spec", "base")) == (a, b)
    runs.keep("spec", c)
    runs.keep("base", c)
    assert runs["spec"] is c and runs.pair(("spec", "base")) == ([a, c], [b, c])  # interleaved: the lists
    with pytest.raises(RunNotKept, match=r"no run named 'cold' was kept in this session \(kept: spec, base\)"):
        runs.pair(("spec", "cold"))


@dataclass(frozen=True)
class _Params:
    prompt_tokens: int
    requests: int
    drafts: tuple[str, ...] = ()


def test_workload_is_a_typed_dataclass(tmp_path: Path) -> None:
    p = tmp_path / "thresholds.toml"
    p.write_text('[params.p1]\nprompt_tokens = 8000\nrequests = 100\ndrafts = ["a", "b"]\nother = 1\n'
                 "[params.p1.embedded]\nrequests = 4\n")
    th = load_thresholds(p)
    assert workload(_Params, th, "p1") == _Params(8000, 100, ("a", "b"))
    assert workload(_Params, th, "p1", embedded=True) == _Params(8000, 4, ("a", "b"))
    p.write_text("[params.p1]\nrequests = 4\n")
    with pytest.raises(ConfigError, match=r"thresholds.toml: \[params.p1\]: missing prompt_tokens \(needed by _Params\)"):
        workload(_Params, load_thresholds(p), "p1")


def test_default_load_config_and_warmup_prompts() -> None:
    assert LoadConfig().num_requests is None and LoadConfig().sized(3).num_requests == 3
    assert LoadConfig(num_requests=7).sized(3).num_requests == 7
    like = [Request("measured prompt", 16, api="chat", extra={"k": 1})]
    (w,) = warmup_prompts(like, 1)
    assert w.prompt != like[0].prompt and w.tag == "warm-up" and (w.api, w.extra, w.max_tokens) == ("chat", {"k": 1}, 16)


THRESHOLDS = """
[phases.p1]
[gates.fast_ttft]
phase = "p1"
metric = "ttft"
statistic = "p50"
max = "10 s"
engine = "fast"
[gates.speed_ratio]
phase = "p1"
metric = "output_throughput"
statistic = "value"
compare = "ratio"
runs = ["fast", "slow"]
min = 0.2
[engines.fast]
kind = "openai"
base_url = "{url}"
model = "scripted"
"""

SUITE = """
import pytest
from pytest_perfgate import Engines, LoadConfig, Perfgate, Request

PROMPTS = [Request(f"prompt {i}", 8) for i in range(5)]
# the slow run's server waits 50 ms between its 8 chunks: each request lasts >= 350 ms whatever the
# machine does, the fast ones ~10 ms, so the ratio is ~30 and its bound clears min 0.2 unless a fast
# request takes longer than a slow one's 350 ms five times over: the outcome is set by the script
SLOW = [Request(f"prompt {i}", 8, extra={"perfgate": {"itl": 0.05}}) for i in range(5)]


@pytest.mark.gate("fast_ttft", "speed_ratio")
def test_compare(perfgate: Perfgate, perfgate_engines: Engines) -> None:
    assert perfgate.engine == "fast"  # the gate's engine =
    slow = perfgate_engines.variant(perfgate.engine, "slow", timeout=30)
    assert perfgate_engines.variant(perfgate.engine, "slow", timeout=30) == slow  # the same declaration again
    with pytest.raises(ValueError, match="already declared with other arguments"):
        perfgate_engines.variant(perfgate.engine, "slow", timeout=31)
    run = perfgate_engines.run(perfgate.engine, PROMPTS, LoadConfig(warmup=2), keep_as="fast")
    assert len(run.measured) == 5 and [r.tag for r in run.records if r.warmup] == ["warm-up"] * 2
    perfgate_engines.run(slow, SLOW, keep_as="slow")
    verdicts = perfgate.check_all(run)
    assert [v.gate for v in verdicts] == ["fast_ttft", "speed_ratio"]
    perfgate.note("compared fast and slow")


@pytest.mark.gate("speed_ratio")
def test_later_test_reads_the_kept_runs(perfgate: Perfgate) -> None:
    assert len(perfgate.runs.all("fast")) == 1
    perfgate.check()
"""


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.002, itl=0.001)) as srv:
        yield srv


def test_suite_api_end_to_end(pytester: pytest.Pytester, server: ScriptedServer) -> None:
    pytester.makefile(".toml", thresholds=THRESHOLDS.format(url=server.base_url))
    pytester.makepyfile(test_suite=SUITE)
    r = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", "-s")
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(["*test_suite.py::test_compare: compared fast and slow*"])
    doc = json.loads((pytester.path / "perfgate-results" / "decisions.json").read_text())
    verdicts = doc["phases"]["p1"]["verdicts"]
    assert [(v["gate"], v["outcome"]) for v in verdicts] == [("fast_ttft", "pass"), ("speed_ratio", "pass"),
                                                            ("speed_ratio", "pass")]

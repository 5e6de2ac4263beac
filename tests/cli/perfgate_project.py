"""A small real perfgate project for the CLI and report tests: gate tests that measure load runs
against the scripted server (real sockets), run by pytest in a subprocess, twice (a baseline run,
then a regressed one compared with it)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StoredRuns:
    root: Path
    results: Path
    baseline: subprocess.CompletedProcess[str]  # scripted TTFT 5 ms: every gate passes
    regressed: subprocess.CompletedProcess[str]  # TTFT 150 ms, compared with the baseline run

THRESHOLDS = """
[phases.phase1]
title = "Speculative decoding <for> long context & more"
[fallbacks.tiered_kv_cache]
title = "Plan A: tiered KV cache (GPU hot, CPU warm tokens)"
cost = "2 engineer-weeks; page swaps 30-50 ms"
doc = "docs/fallbacks.md#plan-a-tiered-kv-cache"
[fallbacks.sequence_parallel]
title = "Plan B: sequence parallelism"
cost = "high complexity"
doc = "https://example.org/sp?a=1&b=<2>"
[gates.ttft]
phase = "phase1"
metric = "ttft"
# the median: a busy machine's contention bursts make sequential TTFTs cluster (7 requests carried
# one independent request's information in one CI run), and a p90 pass at zero exceedances needs
# >= 29 independent requests, a p50 one 5 (these tests are about the CLI, not about tail power)
statistic = "p50"
max = "1 s"
regression = "10%"
fallback = ["tiered_kv_cache"]
[gates.itl]
phase = "phase1"
metric = "itl"
statistic = "p90"
max = "200 ms"  # 20x the server's 10-ms gaps: a busy machine's delays never get there
regression = "50%"  # the gaps are the server's 10 ms, so a machine's noise moves their p90 little
fallback = ["sequence_parallel"]
[gates.acceptance]
phase = "phase1"
metric = "acceptance_rate"
statistic = "rate"
min = "40%"
[gates.spec_speedup]
phase = "phase1"
metric = "e2e"
statistic = "p50"
compare = "ratio"
runs = ["speculative", "plain"]
max = "1.5"
regression = "50%"  # vs the baseline run: flagged only when shown beyond 1.5x (noise does not get there)
"""

TESTS = '''
import os
import pytest
from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.contract import Request
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig

TTFT = float(os.environ.get("PG_TTFT", "0.005"))
HOSTILE = "</script><img src=x onerror=alert(1)> & \\x1b[31m"


@pytest.fixture(scope="module")
def engine():
    # gaps of 10 ms between chunks (the server's): ITL is the server's, not the machine's noise
    with ScriptedServer(Script(ttft=TTFT, itl=0.010, num_spec_tokens=2, tokens_per_chunk=2)) as srv:
        eng = OpenAIEngine("scripted-" + HOSTILE, {"base_url": srv.base_url, "model": "scripted", "timeout": 10})
        eng.start()
        yield eng
        eng.stop()


def reqs(n, ttft=None):
    out = []
    for i in range(n):
        over = {"id": f"r{i}"} if ttft is None else {"id": f"r{i}", "ttft": ttft}
        out.append(Request(prompt=tuple(range(1, 9)), max_tokens=12, tag="tag " + HOSTILE, extra={"perfgate": over}))
    return out


@pytest.mark.gate("ttft", "itl", "acceptance")
def test_latency(perfgate, engine):
    # 200: a busy machine's bursts make the TTFTs cluster (CI of stop 49: the regressed run's p50, 25x
    # the baseline's, was not shown worse from 100); 200 keep each run's own p50 bounds at 97.5% even
    # where ~25 requests carry one independent request's information (one at a time: 4 in flight
    # doubled the ITL gaps a busy machine adds, and the ITL gate compares at a 50% tolerance)
    run = run_load(engine, reqs(200), LoadConfig(num_requests=200, warmup=2))
    perfgate.evaluate(run, "itl")
    perfgate.evaluate(run, "acceptance")
    perfgate.check(run, "ttft")


@pytest.mark.gate("spec_speedup")
def test_speedup(perfgate, engine):
    # the server's own waits make most of each E2E (50 vs 60 ms before the first chunk, then 5 gaps
    # of 10 ms): every plain request lasts >= 110 ms whatever the machine does, so the ratio's upper
    # bound (spec p50 bound over plain p50 bound, max 1.5) passes unless 6 of the 20 spec requests
    # take > 165 ms; noise the machine adds to both runs of a session shifts the ratio little (and the
    # baseline comparison's tolerance is 50%). At 5 vs 6 ms (1-ms gaps) a busy machine's few ms
    # decided it (1.10, bounds 0.888 - 1.71: inconclusive)
    spec = run_load(engine, reqs(20, ttft=0.050), LoadConfig(num_requests=20))
    plain = run_load(engine, reqs(20, ttft=0.060), LoadConfig(num_requests=20))
    perfgate.check((spec, plain), "spec_speedup")


@pytest.mark.fallback("tiered_kv_cache")
def test_tiered_kv_cache():
    pass
'''


def make(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "thresholds.toml").write_text(THRESHOLDS)
    (root / "test_gates.py").write_text(TESTS)
    return root


def run_pytest(root: Path, *args: str, ttft: float = 0.005) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PG_TTFT": str(ttft)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:randomly",
                           "test_gates.py", *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)

"""Client worker processes (load/workers.py): the split schedule (seeded, no clock), sessions and
concurrency shares, and for real against the scripted server: records merged, a dead worker's
requests failed with the cause, and the starved-by-design workload valid with two workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hog_engine import HogEngine
from scipy import stats
from scripted_process import scripted_server_process

from pytest_perfgate.config.load import parse_thresholds
from pytest_perfgate.contract import Request
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig, LoadConfigError, send_offsets_ns
from pytest_perfgate.load.validity import apply
from pytest_perfgate.load.workers import WORKER_ENV, assign, plan, resolve_workers, usable_cores
from pytest_perfgate.verdicts.verdict import evaluate

LIVENESS_S = 60  # fails only when something never ends
LINUX = pytest.mark.skipif(sys.platform != "linux", reason="workers share CLOCK_MONOTONIC with the server on Linux")


def _reqs(n: int, **perfgate: Any) -> list[Request]:
    return [Request(prompt="a b c", max_tokens=6, extra={"perfgate": {"ttft": 0.005, "itl": 0.002, **perfgate}})
            for _ in range(n)]


def test_the_merged_schedule_is_the_global_poisson_process() -> None:
    cfg = LoadConfig(mode="poisson", rate=50.0, num_requests=4000, seed=7, workers=3, exact_rate=False)
    parts = plan(_reqs(10), cfg)
    assert len(parts) == 3 and sorted(i for p, _ in parts for i in p[0]) == list(range(4000))
    merged = sorted(off for p, _ in parts for off in p[1] or ())
    one_process = send_offsets_ns(cfg)
    assert one_process is not None and merged == one_process.tolist()  # the one-process schedule, to the nanosecond
    gaps = np.diff(np.asarray(merged)) / 1e9
    assert stats.kstest(gaps, "expon", args=(0, 1 / 50.0)).pvalue > 0.01  # seeded: exponential gaps at 50/s
    one = np.diff(np.asarray(parts[0][0][1])) / 1e9  # one worker's share alone is not Poisson
    assert stats.kstest(one, "expon", args=(0, 1 / 50.0)).pvalue < 1e-6


def test_a_session_stays_on_one_worker_and_concurrency_is_shared() -> None:
    reqs = [Request(prompt="x", max_tokens=2, session=f"s{k % 5}", turn=k // 5, arrival=k * 0.1) for k in range(20)]
    reqs += [Request(prompt="y", max_tokens=2, arrival=2.0 + k * 0.1) for k in range(7)]
    parts = assign(reqs, len(reqs), 3)
    for s in range(5):
        where = {w for w, idx in enumerate(parts) for i in idx if reqs[i].session == f"s{s}"}
        assert len(where) == 1
    cfg = LoadConfig(mode="trace", concurrency=5, workers=3).sized(len(reqs))
    shares = [c.concurrency for _, c in plan(reqs, cfg)]
    assert sum(s or 0 for s in shares) == 5 and sorted(s or 0 for s in shares) == [1, 2, 2]
    assert len(plan(_reqs(4), LoadConfig(mode="concurrency", concurrency=2, workers=4, num_requests=8))) == 2


def test_workers_setting() -> None:
    assert resolve_workers("auto") == max(1, usable_cores() - 1)
    assert resolve_workers(3) == 3 and resolve_workers("2") == 2
    for bad in (0, "many", -1, "1.5"):
        with pytest.raises(LoadConfigError, match="workers must be"):
            resolve_workers(bad)
    with pytest.raises(LoadConfigError, match="workers must be an integer"):
        LoadConfig(workers=0)
    th = parse_thresholds({"perfgate": {"workers": "auto"}}, Path("t.toml"))
    assert th.settings.workers == "auto"


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with scripted_server_process() as url:
        yield url


def _engine(url: str, hog_s: float = 0.0) -> HogEngine:
    eng = HogEngine("cal", {"base_url": url, "model": "scripted", "timeout": 10, "hog_s": hog_s})
    eng.start()
    return eng


@LINUX
def test_records_merge_and_progress_sees_every_request(server_url: str) -> None:
    eng = _engine(server_url)
    seen: list[int] = []
    try:
        res = run_load(eng, _reqs(10), LoadConfig(mode="poisson", rate=40.0, num_requests=30, warmup=2, workers=2),
                       progress=lambda d, n, e: seen.append(d))
    finally:
        eng.stop()
    assert [r.index for r in res.measured] == list(range(30)) and all(r.ok for r in res.measured)
    assert [r.warmup for r in res.records[:2]] == [True, True]
    assert seen[-1] == 30 and len(res.worker_health) == 2 and res.health is not None and res.health.workers == 2
    for r in res.measured:  # one clock: every send after the common start, every chunk after its send
        assert r.scheduled_ns is not None and r.sent_ns >= res.start_ns and r.chunk_ns[0] > r.sent_ns


@LINUX
def test_a_dead_worker_keeps_its_records_and_fails_the_rest(server_url: str) -> None:
    eng = _engine(server_url)
    killed: list[int] = []

    def progress(done: int, n: int, elapsed: float) -> None:
        if done >= 4 and not killed:  # one worker, SIGKILLed mid-run (records come in batches)
            pids = [p for p in _children() if p not in killed]
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    try:
        res = run_load(eng, _reqs(10), LoadConfig(mode="poisson", rate=10.0, num_requests=30, workers=2), progress=progress)
    finally:
        eng.stop()
    assert killed
    lost = [r for r in res.measured if not r.ok]
    assert lost and all("client worker" in (r.error or "") and "killed by signal 9" in (r.error or "") for r in lost)
    assert len(res.measured) == 30 and sum(r.ok for r in res.measured) >= 4
    assert not [p for p in _children() if p in killed]


def _children(of: int | None = None) -> list[int]:
    """The worker processes of session ``of`` (this one by default), by their environment."""
    mark = f"{WORKER_ENV}={of or os.getpid()}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                env = (d / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if mark in env:
                out.append(int(d.name))
    return out


SESSION = """
import sys
sys.path[:0] = {paths!r}
from hog_engine import HogEngine
from pytest_perfgate.contract import Request
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
eng = HogEngine("cal", {{"base_url": {url!r}, "model": "scripted", "timeout": 10}})
eng.start()
said = []
def progress(done, n, elapsed):  # records come in batches: the count may step over 3
    if done >= 3 and not said:
        said.append(1)
        print("running", flush=True)
reqs = [Request(prompt="a", max_tokens=4) for _ in range(5)]
run_load(eng, reqs, LoadConfig(mode="poisson", rate=5.0, num_requests=200, workers=2), progress=progress)
"""


@LINUX
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_no_worker_outlives_its_session(server_url: str, sig: int, tmp_path: Path) -> None:
    """... and the coordinator's spool has no name to leave behind (a SIGKILLed run left one
    perfgate-run-*.parquet in the temporary folder before)."""
    code = SESSION.format(paths=[p for p in sys.path if p], url=server_url)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        assert proc.stdout is not None
        while (line := proc.stdout.readline()) and line.strip() != b"running":  # after the engine's notes
            pass
        assert line.strip() == b"running"
        assert len(_children(proc.pid)) == 2
        proc.send_signal(sig)  # SIGKILL: nothing of the session runs; SIGINT: Ctrl-C
        proc.wait(LIVENESS_S)
        deadline = time.monotonic() + LIVENESS_S  # liveness only: they go at once (death signal, EOF)
        while _children(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _children(proc.pid) == []
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("perfgate-run-")] == []
    finally:
        if proc.poll() is None:
            proc.kill()


@LINUX
def test_the_starved_workload_is_valid_with_two_workers(server_url: str) -> None:
    """40 ms of loop per request at 35 req/s for 6 s: one loop is held 140% of the time (its lag grows
    by 0.4 s every second, to 2.4 s), two are held 70% each (a lag of a few requests' worth, ~0.25 s).
    The 20 s ITL P99 gate allows 1 s: one process is invalid by over a second, two are valid with
    room to spare."""
    doc = {"phases": {"p": {}}, "gates": {"itl": {"phase": "p", "metric": "itl", "statistic": "p99", "max": "20 s"}}}
    gate = parse_thresholds(doc, Path("t.toml")).gate("itl")
    eng = _engine(server_url, hog_s=0.04)
    cfg = LoadConfig(mode="poisson", rate=35.0, num_requests=210, seed=3)
    try:
        t0 = time.monotonic()
        one = run_load(eng, _reqs(10), cfg)
        two = run_load(eng, _reqs(10), LoadConfig(**{**cfg.to_dict(), "workers": 2}))
        print(f"{time.monotonic() - t0:.1f} s")
    finally:
        eng.stop()
    assert one.health is not None and two.health is not None
    print(f"one process: {one.health.text()}\ntwo workers: {two.health.text()}")
    assert apply(evaluate(gate, one), gate, one).outcome == "invalid"
    assert apply(evaluate(gate, two), gate, two).outcome != "invalid"


@LINUX
def test_budgets_and_stop_work_across_workers(server_url: str) -> None:
    eng = _engine(server_url)
    try:
        timed = run_load(eng, _reqs(10), LoadConfig(mode="poisson", rate=20.0, num_requests=2000, max_seconds=1.0, workers=2))
        stopped = run_load(eng, _reqs(10), LoadConfig(mode="concurrency", concurrency=2, num_requests=2000, workers=2),
                           stop=lambda partial: len(partial.records) >= 5)
    finally:
        eng.stop()
    # the time budget runs from the common start: nothing scheduled past it, none lost
    assert 0 < len(timed.measured) < 2000 and all(r.ok for r in timed.measured)
    assert all((r.scheduled_ns or 0) - timed.start_ns <= 1_000_000_000 for r in timed.measured)
    assert stopped.stopped_early and 5 <= len(stopped.measured) < 2000 and all(r.ok for r in stopped.measured)

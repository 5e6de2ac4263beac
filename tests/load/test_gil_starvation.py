"""A client starved by a thread of its own process (issue 38, item 13): a pure-Python thread holding
the GIL beside the load loop is told apart from other processes taking the CPU by the process's CPU
time against the loop thread's (each read by the probe: injected, scripted readings here), the fix
line says which, and a starved client is said once, during the run, as soon as a window shows it.
By design: scripted CPU and wall readings, scripted health windows, events; no timing comparison."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_perfgate.load.runner as runner
from pytest_perfgate.config import Thresholds
from pytest_perfgate.config.load import parse_thresholds
from pytest_perfgate.contract import Request, RequestRecord
from pytest_perfgate.load.health import ClientHealth, LoopProbe
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.load.validity import invalid_cause, starvation_notice
from pytest_perfgate.runtime.progress import progress_printer

MS = 1_000_000


def scripted(*values_ms: float) -> Any:
    it: Iterator[float] = iter(values_ms)
    return lambda: int(next(it) * MS)


def test_the_probe_reads_the_loop_threads_and_the_processs_cpu_time() -> None:
    probe = LoopProbe(thread_cpu=scripted(0, 20, 50), process_cpu=scripted(0, 1000, 2050), wall=scripted(0, 1000, 2000))

    async def run() -> tuple[ClientHealth, ClientHealth]:
        probe.start()
        first = probe.window()  # the first second: the loop thread 2% of a core, the process 100%
        return first, probe.stop([])

    first, whole = asyncio.run(run())
    assert first.cpu_share == pytest.approx(0.02) and first.process_cpu_share == pytest.approx(1.0)
    assert whole.cpu_share == pytest.approx(0.025) and whole.process_cpu_share == pytest.approx(1.025)
    assert "client process CPU 102%" in whole.text()
    assert ClientHealth.from_dict(whole.to_dict()).process_cpu_share == pytest.approx(1.025)
    assert ClientHealth.worst([whole, first]).process_cpu_share == pytest.approx(1.025)


@pytest.fixture
def th(tmp_path: Path) -> Thresholds:
    return parse_thresholds({"phases": {"p": {}}, "gates": {"itl_p99": {"phase": "p", "metric": "itl", "statistic": "p99",
                                                                          "max": "20 ms"}}}, tmp_path / "t.toml")


def starved(process_cpu_share: float) -> ClientHealth:
    """A loop lagging 50 ms that got 3% of a core; its process ``process_cpu_share`` of one."""
    return ClientHealth(loop_lag_p99=0.05, loop_lag_tail=0.05, loop_lag_max=0.08, probes=400, cpu_share=0.03,
                        process_cpu_share=process_cpu_share)


def test_the_fix_line_tells_gil_contention_from_other_processes(th: Thresholds) -> None:
    g = th.gate("itl_p99")
    own = invalid_cause(g, starved(1.02))
    assert own is not None and "GIL contention inside the client's process" in own
    assert "its other threads used 99% of a core while the loop thread got 3%" in own
    assert "set workers = 2 (separate processes, each its own GIL)" in own and "move the CPU-bound threads out" in own
    assert "other processes" not in own and "will not help" not in own
    others = invalid_cause(g, starved(0.05))  # the whole process barely ran: the machine was taken
    assert others is not None and "other processes starved the client of CPU (the client's process used 5% CPU)" in others
    assert "GIL" not in others
    unknown = invalid_cause(g, starved(math.nan))  # figures stored before the process's CPU was read
    assert unknown is not None and "other processes starved the client of CPU (more workers" in unknown
    busy = ClientHealth(loop_lag_p99=0.05, loop_lag_tail=0.05, probes=400, cpu_share=0.97, process_cpu_share=1.0)
    assert "set workers = 2 (or lower the load)" in (invalid_cause(g, busy) or "")  # its own work: workers


def test_the_notice_wants_an_evident_starvation() -> None:
    assert starvation_notice(starved(1.02), 2.0) is not None
    assert starvation_notice(ClientHealth(loop_lag_tail=0.05, probes=400, cpu_share=0.97), 2.0) is None  # busy, not starved
    assert starvation_notice(ClientHealth(loop_lag_tail=0.002, probes=400, cpu_share=0.03), 2.0) is None  # no lag to speak of
    assert starvation_notice(ClientHealth(loop_lag_tail=0.05, probes=3, cpu_share=0.03), 2.0) is None  # too few probes


class ScriptedProbe(LoopProbe):
    """The real probe, whose windows are scripted: healthy, then starved by a thread of its own process."""

    windows = [ClientHealth(loop_lag_tail=0.0002, probes=200, cpu_share=0.2, process_cpu_share=0.21)]

    def window(self) -> ClientHealth:
        return self.windows.pop(0) if self.windows else starved(1.02)


class WaitsForTheNotice:
    """Answers request 0 at once; request 1 only after the client said it is starved (an event)."""

    name, kind = "e", "fake"

    def __init__(self) -> None:
        self.said = asyncio.Event()
        self.waited: list[bool] = []

    async def generate(self, request: Request, record: RequestRecord, clock: Any) -> None:
        record.sent_ns = clock()
        if record.index == 1:
            try:
                await asyncio.wait_for(self.said.wait(), 120)
                self.waited.append(True)
            except TimeoutError:
                self.waited.append(False)
        record.chunk_ns, record.chunk_tokens = [clock(), clock()], [1, 1]
        record.end_ns, record.output_tokens = clock(), 2

    async def counters(self) -> dict[str, float]:
        return {}

    def info(self) -> dict[str, Any]:
        return {"name": "e"}


def test_a_starved_client_is_said_once_during_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "LoopProbe", ScriptedProbe)
    monkeypatch.setattr(runner, "WATCH_S", 0.001)
    eng = WaitsForTheNotice()
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        eng.said.set()  # on the run's loop: the watch task says it

    run = runner.run_load(eng, [Request("a b c", 2)], LoadConfig(num_requests=3), progress_printer(say, "e", every_s=1e9))  # type: ignore[arg-type]
    assert eng.waited == [True]  # request 1 finished after the line: it was said during the run
    starved_lines = [x for x in lines if "client starved" in x]
    assert len(starved_lines) == 1, lines  # once
    assert starved_lines[0].startswith("perfgate: [e] client starved at ")
    assert "GIL contention inside the client's process" in starved_lines[0]
    assert len(run.measured) == 3

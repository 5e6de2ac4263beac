"""Workers on a Ray cluster without Ray (load/clocks.py, load/ray_workers.py, the settings): the
clock-offset estimate on scripted clocks, records moved between clocks with their durations kept,
the frames of a fake actor, ``ray://`` / table settings and their errors, and the validity rule
for a host whose clock is known too loosely. The real two-host run: tests/distributed/test_ray_workers.py."""

from __future__ import annotations

import math
import queue
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_perfgate.config import ConfigError, load_thresholds
from pytest_perfgate.config.load import parse_thresholds
from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load.clocks import ClockOffset, estimate, to_coordinator, to_local
from pytest_perfgate.load.health import ClientHealth
from pytest_perfgate.load.parquet import records_of, to_batch
from pytest_perfgate.load.ray_workers import Host, _Link
from pytest_perfgate.load.schedule import LoadConfig, LoadConfigError, RayWorkers, parse_ray
from pytest_perfgate.load.validity import invalid_cause
from pytest_perfgate.load.workers import resolve_workers


class Net:
    """Scripted clocks: true time ``t`` (ns); the coordinator reads ``t``, the host ``t + offset``;
    each ping's two legs take the next scripted delays."""

    def __init__(self, offset: int, legs: list[tuple[int, int]]) -> None:
        self.t, self.offset, self.legs = 1_000_000_000, offset, list(legs)

    def local(self) -> int:
        self.t += 7  # a clock read costs a little
        return self.t

    def remote(self) -> int:
        out, back = self.legs.pop(0)
        self.t += out
        r = self.t + self.offset
        self.t += back
        return r


def test_the_offset_is_the_min_round_trip_sample_within_half_its_round_trip() -> None:
    net = Net(-3_000_000, [(5000, 9000), (300, 200), (40_000, 100), (250, 400)])
    off = estimate(net.remote, net.local, rounds=4)
    assert off.uncertainty_ns == (300 + 200 + 7 + 1) // 2  # the second round: 507 ns round trip
    assert abs(off.offset_ns - (-3_000_000)) <= off.uncertainty_ns
    assert off.offset_ns == -3_000_000 + (300 - 207) // 2  # the legs' asymmetry, inside the bound
    rng = np.random.default_rng(0)  # any asymmetry, any offset: the truth lies within the bound
    for _ in range(300):
        true = int(rng.integers(-10**12, 10**12))
        legs = [(int(a), int(b)) for a, b in rng.exponential(2e5, size=(16, 2))]
        n = Net(true, legs)
        got = estimate(n.remote, n.local, 16)
        assert abs(got.offset_ns - true) <= got.uncertainty_ns
        assert got.uncertainty_ns <= (min(a + b for a, b in legs) + 7 + 1) // 2
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        estimate(net.remote, net.local, rounds=0)
    backwards = iter([10, 5])
    with pytest.raises(ValueError, match="went backwards"):
        estimate(lambda: 0, lambda: next(backwards), rounds=1)


def test_records_move_between_clocks_with_their_durations_kept() -> None:
    off = ClockOffset(offset_ns=5_000_000_000, uncertainty_ns=300_000, rounds=16)
    assert to_local(1_000, off) == 5_000_001_000
    host = 5_000_000_000  # stamps taken on the host
    rec = RequestRecord(index=3, scheduled_ns=host + 10, sent_ns=host + 20, chunk_ns=[host + 500, host + 900],
                        end_ns=host + 950, connect_ns=40)
    before = (rec.chunk_ns[0] - rec.sent_ns, rec.chunk_ns[1] - rec.chunk_ns[0], rec.end_ns - rec.sent_ns)  # type: ignore[operator]
    to_coordinator(rec, off)
    assert (rec.scheduled_ns, rec.sent_ns, rec.chunk_ns, rec.end_ns, rec.connect_ns) == (10, 20, [500, 900], 950, 40)
    assert rec.end_ns is not None
    assert (rec.chunk_ns[0] - rec.sent_ns, rec.chunk_ns[1] - rec.chunk_ns[0], rec.end_ns - rec.sent_ns) == before
    failed = to_coordinator(RequestRecord(index=4, error="HTTP 500"), off)  # never sent: nothing to move
    assert (failed.sent_ns, failed.chunk_ns, failed.end_ns, failed.scheduled_ns) == (0, [], None, None)


class _Call:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *a: Any) -> Any:
        return self.fn(*a)


class FakeActor:
    """A Host in this process, its methods called as a Ray actor's (``.remote``; ``ray.get``: identity)."""

    def __init__(self, host: Host) -> None:
        self.told: list[Any] = []
        for name in ("now", "begin", "poll", "cause", "end"):
            setattr(self, name, _Call(getattr(host, name)))
        self.host = host
        self.tell = _Call(self._tell)

    def _tell(self, msg: Any) -> None:
        self.told.append(msg)
        self.host.tell(msg)


class FakeRay:
    def get(self, x: Any, timeout: float | None = None) -> Any:
        return x

    def kill(self, actor: Any) -> None:
        pass


def test_a_hosts_frames_reach_the_run_on_its_clock_and_named() -> None:
    inbox: queue.Queue[tuple[int, Any]] = queue.Queue()
    actor = FakeActor(Host())
    link = _Link(FakeRay(), 1, actor, "10.0.0.7", inbox)
    link.measure()  # the same clock: the offset is within its uncertainty of 0
    assert abs(link.offset.offset_ns) <= link.offset.uncertainty_ns and link.offset.rounds == 16
    link.offset = ClockOffset(2_000, 150_000, 16)
    link.tell(("start", 10_000))
    link.tell(("stop",))
    assert actor.told == [("start", 12_000), ("stop",)]
    batch = to_batch([RequestRecord(index=2, sent_ns=3_000, chunk_ns=[4_000], end_ns=5_000),
                      RequestRecord(index=3, error="HTTP 500")])  # never sent: nothing to move
    rec, failed = records_of(link._here(("batch", batch))[1])
    assert (rec.host, rec.sent_ns, rec.chunk_ns, rec.end_ns) == ("10.0.0.7", 1_000, [2_000], 3_000)
    assert (failed.host, failed.sent_ns, failed.chunk_ns, failed.end_ns) == ("10.0.0.7", 0, [], None)
    done = link._here(("done", ClientHealth(loop_lag_p99=0.001, probes=10)))[1]
    assert (done.host, done.clock_offset, done.clock_uncertainty) == ("10.0.0.7", 2e-6, 1.5e-4)
    assert link._here(("failed", "x")) == ("failed", "x") and link._here(None) is None
    assert Host().cause() == "its worker process never started" and Host().poll(0.0) == []


def test_host_health_is_kept_pooled_and_shown() -> None:
    a = ClientHealth(loop_lag_p99=0.001, probes=5, host="10.0.0.7", clock_offset=2e-6, clock_uncertainty=1.5e-4)
    b = ClientHealth(loop_lag_p99=0.002, probes=5, host="10.0.0.8", clock_offset=-1e-3, clock_uncertainty=4e-4)
    assert ClientHealth.from_dict(a.to_dict()) == a
    assert ClientHealth.worst([a, b]).clock_uncertainty == 4e-4
    assert "10.0.0.8: loop lag" in b.text() and "clock offset -1 ± 0.4 ms" in b.text()
    assert math.isnan(ClientHealth.from_dict({}).clock_uncertainty) and "clock" not in ClientHealth().text()


def test_ray_settings_and_their_errors(tmp_path: Path) -> None:
    assert parse_ray("ray://auto") == RayWorkers("auto", 1)
    assert parse_ray("ray://head.local:6379?per_node=4") == RayWorkers("head.local:6379", 4)
    assert resolve_workers("ray://10.0.0.1:6379") == RayWorkers("10.0.0.1:6379", 1)
    assert RayWorkers("auto", 2).url == "ray://auto?per_node=2"
    for bad, why in (("ray://", "a Ray cluster is"), ("ray://host", "a Ray cluster is"), ("ray://h:0", "port"),
                     ("ray://h:1?per_node=0", "per_node"), ("ray://h:1?per_node=x", "per_node")):
        with pytest.raises(LoadConfigError, match=why):
            resolve_workers(bad)
    assert LoadConfig(ray="h:1", per_node=2).per_node == 2
    with pytest.raises(LoadConfigError, match="per_node"):
        LoadConfig(ray="h:1", per_node=0)

    def workers(value: Any) -> Any:
        return parse_thresholds({"perfgate": {"workers": value}}, tmp_path / "t.toml").settings.workers

    assert workers({"ray": "auto", "per_node": 2}) == "ray://auto?per_node=2"
    assert workers({"ray": "10.0.0.1:6379"}) == "ray://10.0.0.1:6379?per_node=1"
    assert workers("ray://h:6379") == "ray://h:6379?per_node=1" and workers(3) == 3
    assert resolve_workers(workers({"ray": "auto", "per_node": 2})) == RayWorkers("auto", 2)
    for value, key in (({"ray": "auto", "per_node": 0}, "workers.per_node"), ({"ray": 5}, "workers.ray"),
                       ({"ray": "h:99999"}, "workers.ray"), ({"ray": "auto", "nodes": 2}, "workers.nodes"),
                       ({"per_node": 2}, "workers.ray"), ([1], "workers")):
        with pytest.raises(ConfigError) as e:
            workers(value)
        assert key in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_loosely_known_host_clock_makes_timing_gates_invalid(tmp_path: Path) -> None:
    p = tmp_path / "thresholds.toml"
    p.write_text('[phases.p]\n[gates.itl_p99]\nphase = "p"\nmetric = "itl"\nstatistic = "p99"\nmax = "20 ms"\n')
    g = load_thresholds(p).gate("itl_p99")
    tight = ClientHealth(loop_lag_p99=0.0001, probes=400, clock_uncertainty=0.0003)
    loose = ClientHealth(loop_lag_p99=0.0001, probes=400, clock_uncertainty=0.004)
    assert invalid_cause(g, tight) is None  # 0.3 ms < 1 ms allowed
    cause = invalid_cause(g, loose)
    assert cause is not None and "clock offset uncertainty 4 ms > 1 ms allowed for itl p99 at 20 ms" in cause
    assert "faster link" in cause and "set workers" not in cause


def test_the_session_setting_sends_runs_to_the_cluster_and_says_each_hosts_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_perfgate.load.runner as runner
    from pytest_perfgate.contract import Request
    from pytest_perfgate.load.result import RunResult
    from pytest_perfgate.plugin import _workers
    from pytest_perfgate.session.lab import Engines
    from pytest_perfgate.session.runs import Runs

    assert _workers("ray://h:6379", 1) == RayWorkers("h:6379", 1)
    assert _workers(None, "ray://auto?per_node=2") == RayWorkers("auto", 2)
    with pytest.raises(pytest.UsageError, match="--perfgate-workers ray://h: .*a Ray cluster is"):
        _workers("ray://h", 1)
    said: list[str] = []
    seen: list[LoadConfig] = []

    class Eng:
        name = "e"

        def worker_spec(self) -> Any:
            return None

    class Logged:
        def get(self, name: str) -> Any:
            return Eng()

        def say(self, msg: str) -> None:
            said.append(msg)

    def fake_run_load(engine: Any, requests: Any, config: LoadConfig, *a: Any, **k: Any) -> RunResult:
        seen.append(config)
        return RunResult(records=[], config=config, worker_health=[ClientHealth(probes=3, host="10.0.0.7", clock_offset=1e-5,
                                                                    clock_uncertainty=3e-4)])

    monkeypatch.setattr(runner, "run_load", fake_run_load)
    engines = Engines(Logged(), None, {}, Runs())  # type: ignore[arg-type]
    engines.workers = RayWorkers("auto", 2)
    engines.run("e", [Request(prompt="a", max_tokens=2)], LoadConfig(mode="concurrency", concurrency=4))
    assert (seen[-1].ray, seen[-1].per_node, seen[-1].workers) == ("auto", 2, 1)
    assert said == ["perfgate: [e] client worker on 10.0.0.7: loop lag P50/P99/max n/a/n/a/n/a ms (3 probes), "
                    "clock offset +0.01 ± 0.3 ms"]
    engines.run("e", [Request(prompt="a", max_tokens=2)], LoadConfig())  # one at a time: this process
    assert seen[-1].ray is None and len(said) == 1


def test_a_host_whose_actor_never_starts_fails_its_share_with_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake Ray whose actor on the second node cannot start (its package missing there): that
    node's requests fail naming it; the first node's worker (a real local worker process) runs."""
    import sys
    import types

    from pytest_perfgate.contract import Request
    from pytest_perfgate.load import ray_workers
    from pytest_perfgate.load.runner import run_load

    class Actor:
        def __init__(self, node: str) -> None:
            self.node = node

        def options(self, scheduling_strategy: Any) -> Any:
            return Actor(scheduling_strategy.node_id)

        def remote(self) -> Any:
            if self.node == "n2":
                return BrokenActor()
            return FakeActor(Host())

    class BrokenActor:
        def __getattr__(self, name: str) -> Any:
            def fail(*a: Any) -> Any:
                raise RuntimeError("ModuleNotFoundError: No module named 'pytest_perfgate'\nTraceback ...")
            return types.SimpleNamespace(remote=fail)

    class Ray(FakeRay):
        def is_initialized(self) -> bool:
            return True

        def nodes(self) -> list[dict[str, Any]]:
            return [{"NodeID": "n1", "NodeManagerAddress": "10.0.0.1", "Alive": True},
                    {"NodeID": "n2", "NodeManagerAddress": "10.0.0.2", "Alive": True},
                    {"NodeID": "n3", "NodeManagerAddress": "10.0.0.3", "Alive": False}]

        def remote(self, **kw: Any) -> Any:
            return lambda cls: Actor("")

    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.NodeAffinitySchedulingStrategy = lambda node_id, soft: types.SimpleNamespace(node_id=node_id)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)
    monkeypatch.setattr(ray_workers, "_ray", Ray)

    class Eng:
        name, kind = "e", "fake"

        def worker_spec(self) -> Any:
            return ("tests.load.test_ray_workers_unit:NullEngine", "e", {}, {"started": True})

        def info(self) -> dict[str, Any]:
            return {}

        async def counters(self) -> dict[str, float]:
            return {}

    res = run_load(Eng(), [Request(prompt="a", max_tokens=2)] * 6,  # type: ignore[arg-type]
                   LoadConfig(mode="concurrency", concurrency=2, ray="auto"))
    by_host = {r.index: (r.host, r.error) for r in res.measured}
    assert sorted(by_host) == list(range(6))
    assert all(h == "10.0.0.1" and e is None for i, (h, e) in by_host.items() if i % 2 == 0), by_host
    lost = [e for i, (_, e) in by_host.items() if i % 2 == 1]
    assert all(e and "Ray actor on 10.0.0.2 did not start: RuntimeError: ModuleNotFoundError" in e and "\n" not in e
               for e in lost), lost
    assert [h.host for h in res.worker_health] == ["10.0.0.1"]


class NullEngine:
    """Answers every request at once with one chunk (a worker process builds it from its spec)."""

    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name = name

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    async def generate(self, request: Any, record: RequestRecord, clock: Any) -> None:
        record.sent_ns = clock()
        record.chunk_ns, record.chunk_tokens = [clock()], [1]
        record.end_ns, record.output_tokens = clock(), 1

"""Is the instrument the bottleneck?  Our ``openai`` engine client vs vLLM's benchmark client.

Runs the scripted server (:mod:`pytest_perfgate.calib.scripted_server`) in a *separate process*
(no shared GIL) and measures, for our engine's measuring path and for vLLM's own
``vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions``:

* max chunk events/s the client consumes, chunks sent back-to-back (ttft = itl = 0);
* timestamp error = client's chunk arrival - server's ground-truth send time (both
  ``time.perf_counter_ns``, CLOCK_MONOTONIC, shared by all processes; checked at start-up),
  TTFT (first chunk) and ITL (every later chunk), at 50 chunks/s per stream; vLLM's arrivals are
  rebuilt from ``start_time + ttft + cumsum(itl)``;
* CPU time per chunk of the client process (``time.process_time`` / chunks);
* send lag (actual send - scheduled send) of a Poisson schedule at 100 and 1,000 req/s: our
  runner (``run_load``) vs a plain ``asyncio.sleep`` loop like vLLM bench's ``get_request``;
* gate evaluation time on 1,000,000 samples and the plugin's added ``pytest --help`` start-up.

One table, ratios ours / vLLM's. ``python benchmarks/bench_client.py [--quick] [--uvloop]``.
All client work runs on the engine loop thread (:func:`pytest_perfgate.contract.run_sync`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
NS = 1_000_000_000


# -- server process ---------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    def __init__(self, uvloop: bool, ttft: float = 0.0, itl: float = 0.0) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        code = ("import sys, uvloop; uvloop.install(); " if uvloop else "import sys; ") + (
            "from pytest_perfgate.calib.scripted_server import main; main(sys.argv[1:])")
        self.proc = subprocess.Popen(
            [PY, "-c", code, "--port", str(self.port), "--ttft", str(ttft), "--itl", str(itl)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT,
        )
        line = self.proc.stdout.readline().decode() if self.proc.stdout else ""
        if "scripted server on" not in line:
            raise RuntimeError(f"scripted server did not start: {line!r}")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base_url + path, timeout=60) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.base_url + "/reset", data=b"{}", method="POST"), timeout=10).read()

    def truth(self) -> dict[str, dict[str, Any]]:
        return {t["client_id"]: t for t in self.get("/ground_truth")["requests"] if t["client_id"]}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def check_clock() -> str:
    """perf_counter_ns must be CLOCK_MONOTONIC and agree across processes."""
    impl = time.get_clock_info("perf_counter").implementation
    same = abs(time.perf_counter_ns() - time.clock_gettime_ns(time.CLOCK_MONOTONIC)) < 1_000_000
    t0 = time.perf_counter_ns()
    child = int(subprocess.check_output([PY, "-c", "import time; print(time.perf_counter_ns())"]))
    t1 = time.perf_counter_ns()
    ok = "CLOCK_MONOTONIC" in impl and same and t0 < child < t1
    if not ok:
        raise SystemExit(f"clock check failed: {impl}, same={same}, {t0} < {child} < {t1}")
    return f"perf_counter = {impl}; child process stamp within parent's bracket ({(t1 - t0) / 1e6:.0f} ms)"


# -- clients ----------------------------------------------------------------------------------
class Run:
    """One batch of concurrent streams: per stream id, arrival times of the output chunks."""

    def __init__(self) -> None:
        self.arrivals: dict[str, list[int]] = {}
        self.errors: list[str] = []
        self.wall_ns = 0
        self.cpu_s = 0.0
        self.sent: dict[str, int] = {}


class OursClient:
    engine_file: str | None = None  # --engine-file: measure another version of openai.py

    def __init__(self, base_url: str, label: str = "ours", **args: Any) -> None:
        if self.engine_file:
            import importlib.util

            spec = importlib.util.spec_from_file_location("pytest_perfgate.engines.openai._bench_engine", self.engine_file)
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            spec.loader.exec_module(mod)
            OpenAIEngine = mod.OpenAIEngine
        else:
            from pytest_perfgate.engines.openai import OpenAIEngine

        self.label = label
        self.engine = OpenAIEngine("bench", {"base_url": base_url, "model": "scripted", "timeout": 300, **args})
        self.engine.start()

    async def batch(self, specs: Sequence[tuple[str, int, dict[str, Any]]]) -> Run:
        from pytest_perfgate.contract import Request, RequestRecord

        reqs = [Request(prompt="hello", max_tokens=m, extra={"perfgate": {**s, "id": i}}) for i, m, s in specs]
        recs = [RequestRecord(index=k) for k in range(len(reqs))]
        run = Run()
        c0, t0 = time.process_time(), time.perf_counter_ns()
        await asyncio.gather(*(self.engine.generate(r, rec, time.perf_counter_ns) for r, rec in zip(reqs, recs, strict=True)))
        run.wall_ns, run.cpu_s = time.perf_counter_ns() - t0, time.process_time() - c0
        for (i, _, _), rec in zip(specs, recs, strict=True):
            run.arrivals[i] = list(rec.chunk_ns)
            run.sent[i] = rec.sent_ns
            if rec.error:
                run.errors.append(rec.error)
        return run

    async def request_for_lag(self, i: int) -> int:
        """Send one short request; return the client's send stamp."""
        from pytest_perfgate.contract import Request, RequestRecord

        rec = RequestRecord(index=i)
        await self.engine.generate(Request(prompt="hi", max_tokens=2, extra={"perfgate": {"ttft": 0.001, "itl": 0.001}}),
                                   rec, time.perf_counter_ns)
        return rec.sent_ns

    def close(self) -> None:
        self.engine.stop()


class VllmClient:
    label = "vllm"

    def __init__(self, base_url: str) -> None:
        from vllm.benchmarks.lib import endpoint_request_func as erf

        os.environ.pop("OPENAI_API_KEY", None)
        self.erf = erf
        self.url = base_url + "/v1/completions"
        self.session: Any = None

    async def _session(self) -> Any:
        import aiohttp

        if self.session is None:  # as vllm/benchmarks/serve.py builds it
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300, use_dns_cache=True,
                                             keepalive_timeout=60, enable_cleanup_closed=True, force_close=False)
            self.session = aiohttp.ClientSession(connector=connector, trust_env=True,
                                                 timeout=aiohttp.ClientTimeout(total=6 * 60 * 60))
        return self.session

    def _input(self, i: str, m: int, s: dict[str, Any]) -> Any:
        return self.erf.RequestFuncInput(prompt="hello", api_url=self.url, prompt_len=1, output_len=m, model="scripted",
                                         ignore_eos=True, extra_body={"perfgate": {**s, "id": i}})

    async def batch(self, specs: Sequence[tuple[str, int, dict[str, Any]]]) -> Run:
        session = await self._session()
        run = Run()
        c0, t0 = time.process_time(), time.perf_counter_ns()
        outs = await asyncio.gather(*(self.erf.async_request_openai_completions(self._input(i, m, s), session)
                                      for i, m, s in specs))
        run.wall_ns, run.cpu_s = time.perf_counter_ns() - t0, time.process_time() - c0
        for (i, _, _), o in zip(specs, outs, strict=True):
            if not o.success:
                run.errors.append(o.error.strip().splitlines()[-1] if o.error else "failed")
                run.arrivals[i] = []
                continue
            t = o.start_time + o.ttft
            arr = [t]
            for g in o.itl:
                t += g
                arr.append(t)
            run.arrivals[i] = [int(round(x * 1e9)) for x in arr]
            run.sent[i] = int(round(o.start_time * 1e9))
        return run

    async def request_for_lag(self, i: int) -> int:
        session = await self._session()
        o = await self.erf.async_request_openai_completions(
            self._input(f"lag{i}", 2, {"ttft": 0.001, "itl": 0.001}), session)
        return int(round(o.start_time * 1e9))

    def close(self) -> None:
        from pytest_perfgate.contract import run_sync

        if self.session is not None:
            run_sync(self.session.close())


# -- measurements -----------------------------------------------------------------------------
def run_batch(client: Any, specs: Sequence[tuple[str, int, dict[str, Any]]]) -> Run:
    from pytest_perfgate.contract import run_sync

    return run_sync(client.batch(specs))


def throughput(client: Any, srv: ServerProcess, n: int, total_chunks: int) -> tuple[float, float, float, int]:
    """Chunks/s consumed with back-to-back chunks; CPU s per chunk; client CPU s / wall s; errors."""
    per = max(200, total_chunks // n)
    run_batch(client, [(f"w{k}", 4, {"ttft": 0, "itl": 0}) for k in range(n)])  # open the connections
    srv.reset()
    run = run_batch(client, [(f"t{k}", per, {"ttft": 0, "itl": 0}) for k in range(n)])
    chunks = sum(len(a) for a in run.arrivals.values())
    srv.reset()
    wall = run.wall_ns / NS
    if run.errors:  # a failed client consumed nothing usable
        print(f"  {client.label}, {n} streams: {len(run.errors)} failed: {run.errors[0][:100]}", flush=True)
        return float("nan"), float("nan"), float("nan"), len(run.errors)
    return chunks / wall, run.cpu_s / max(chunks, 1), run.cpu_s / wall, len(run.errors) + (chunks != per * n)


def timestamp_error(client: Any, srv: ServerProcess, n: int, chunks: int, itl: float = 0.02) -> dict[str, Any]:
    """Arrival - send for the first chunk (TTFT) and later chunks (ITL); streams phase-staggered."""
    run_batch(client, [(f"w{k}", 4, {"ttft": 0, "itl": 0}) for k in range(n)])
    srv.reset()
    tag = client.label
    specs = [(f"{tag}-e{k}", chunks, {"ttft": 0.01 + itl * k / n, "itl": itl}) for k in range(n)]
    run = run_batch(client, specs)
    truth = srv.truth()
    srv.reset()
    ttft_err: list[int] = []
    itl_err: list[int] = []
    mismatched = 0
    for i, _, _ in specs:
        got, sent = run.arrivals.get(i, []), truth.get(i, {}).get("chunk_ns", [])
        if len(got) != len(sent):
            mismatched += 1
            continue
        d = [a - s for a, s in zip(got, sent, strict=True)]
        ttft_err.append(d[0])
        itl_err.extend(d[1:])
    total = sum(len(a) for a in run.arrivals.values())
    return {"ttft": np.array(ttft_err, dtype=np.int64), "itl": np.array(itl_err, dtype=np.int64),
            "cpu_per_chunk": run.cpu_s / max(total, 1), "bad": mismatched + len(run.errors)}


def lag_ours_runner(client: OursClient, rate: float, n: int) -> np.ndarray:
    from pytest_perfgate.contract import Request
    from pytest_perfgate.load.runner import run_load
    from pytest_perfgate.load.schedule import LoadConfig

    req = Request(prompt="hi", max_tokens=2, extra={"perfgate": {"ttft": 0.001, "itl": 0.001}})
    res = run_load(client.engine, [req], LoadConfig(mode="poisson", rate=rate, num_requests=n, seed=1))
    return np.array([r.sent_ns - r.scheduled_ns for r in res.records if not r.warmup], dtype=np.int64)


def lag_sleep_loop(client: Any, rate: float, n: int, precise: bool = False) -> np.ndarray:
    """vLLM bench's get_request: precomputed gaps, ``asyncio.sleep(start + delay - now)``, create_task.

    ``precise``: sleep to 1 ms before the target, then yield (``sleep(0)``) until it is reached.
    """
    from pytest_perfgate.contract import run_sync

    rng = np.random.default_rng(1)
    offs = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])

    async def go() -> np.ndarray:
        tasks, sched = [], []
        start = time.perf_counter()
        for i, off in enumerate(offs.tolist()):
            target = start + off
            d = target - time.perf_counter()
            if precise:
                if d > 0.001:
                    await asyncio.sleep(d - 0.001)
                while time.perf_counter() < target:
                    await asyncio.sleep(0)
            elif d > 0:
                await asyncio.sleep(d)
            sched.append(int(round(target * 1e9)))
            tasks.append(asyncio.create_task(client.request_for_lag(i)))
        sent = await asyncio.gather(*tasks)
        return np.array(sent, dtype=np.int64) - np.array(sched, dtype=np.int64)

    return run_sync(go())


def gate_eval_time() -> float:
    from pytest_perfgate import evaluate, load_thresholds, make_samples

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "thresholds.toml"
        p.write_text('[phases.p]\n[gates.ttft_p99]\nphase = "p"\nmetric = "ttft"\nstatistic = "p99"\nmax = "150 ms"\n')
        th = load_thresholds(p)
    rng = np.random.default_rng(0)
    data = rng.lognormal(np.log(100.0), 0.2, 1_000_000)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        samples = make_samples(data, "ms")
        evaluate(th.gate("ttft_p99"), samples, thresholds=th)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def pytest_help_time(runs: int) -> tuple[float, float, str]:
    env = {**os.environ, "PYTEST_ADDOPTS": ""}
    env.pop("PYTEST_PLUGINS", None)
    with tempfile.TemporaryDirectory() as d:
        def t(extra: list[str]) -> float:
            t0 = time.perf_counter()
            subprocess.run([PY, "-m", "pytest", "--help", *extra], cwd=d, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return time.perf_counter() - t0

        t([]), t(["-p", "no:perfgate"])  # warm the file cache
        without, with_ = [], []
        for _ in range(runs):
            without.append(t(["-p", "no:perfgate"]))
            with_.append(t([]))
        r = subprocess.run([PY, "-X", "importtime", "-c", "import pytest_perfgate.plugin"], cwd=d, env=env,
                           capture_output=True, text=True, check=True)
    heavy = sorted({m.group(1).split(".")[0] for m in re.finditer(r"\|\s+(\S+)\s*$", r.stderr, re.M)}
                   & {"numpy", "scipy", "aiohttp", "torch", "vllm", "transformers"})
    return statistics.median(without), statistics.median(with_), ", ".join(heavy) or "none"


# -- table ------------------------------------------------------------------------------------
def us(ns: float) -> str:
    return f"{ns / 1e3:.0f}" if abs(ns) >= 1e4 else f"{ns / 1e3:.1f}"


def pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if len(a) else float("nan")


class Table:
    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)
        self.rows: list[tuple[str, list[str], str]] = []

    def add(self, name: str, values: Sequence[float], fmt: Callable[[float], str], note: str = "") -> None:
        cells = [fmt(v) if np.isfinite(v) else "-" for v in values]
        ok = len(values) > 1 and values[-1] and np.isfinite(values[-1]) and np.isfinite(values[0])
        ratio = f"{values[0] / values[-1]:.2f}" if ok else ""
        self.rows.append((name, cells + [ratio], note))

    def section(self, title: str) -> None:
        self.rows.append((f"-- {title}", [], ""))

    def render(self) -> str:
        heads = ["metric", *self.labels, f"{self.labels[0]}/{self.labels[-1]}", "target"]
        w0 = max(len(r[0]) for r in self.rows) + 1
        ws = [max(len(h), 10) for h in heads[1:-1]]
        out = [heads[0].ljust(w0) + "".join(h.rjust(w + 2) for h, w in zip(heads[1:-1], ws, strict=True)) + "  " + heads[-1]]
        out.append("-" * len(out[0]))
        for name, cells, note in self.rows:
            if not cells:
                out.append(name)
                continue
            out.append(name.ljust(w0) + "".join(c.rjust(w + 2) for c, w in zip(cells, ws, strict=True)) + ("  " + note if note else ""))
        return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="fewer chunks, shorter runs (~1-2 min)")
    p.add_argument("--streams", default="1,16,64,256")
    p.add_argument("--uvloop", action="store_true", help="run the client loop on uvloop")
    p.add_argument("--transports", default="auto",
                   help="our engine's transports to measure, comma-separated (auto, aiohttp, raw)")
    p.add_argument("--server-asyncio", action="store_true",
                   help="run the server on plain asyncio (default: uvloop, so that it outpaces the client)")
    p.add_argument("--engine-file", help="load OpenAIEngine from this file (e.g. the version before a change)")
    p.add_argument("--help-runs", type=int, default=7)
    a = p.parse_args(argv)
    streams = [int(x) for x in a.streams.split(",")]
    OursClient.engine_file = a.engine_file
    q = a.quick
    tp_total = 20_000 if q else 60_000
    err_chunks = 25 if q else 50
    lag_n = {100.0: 150 if q else 300, 1000.0: 1000 if q else 2000}
    if a.uvloop:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    t_start = time.perf_counter()
    print(check_clock(), flush=True)
    srv = ServerProcess(not a.server_asyncio)
    try:
        ours: list[Any] = []
        for tr in a.transports.split(","):
            args: dict[str, Any] = {} if tr == "auto" else {"transport": tr}
            label = "ours" if tr == "auto" else f"ours-{tr}"
            ours.append(OursClient(srv.base_url, label, **args))
        vllm = VllmClient(srv.base_url)
        clients = [*ours, vllm]
        labels = [c.label for c in clients]
        table = Table(labels)
        loop_name = "uvloop" if a.uvloop else "asyncio"

        table.section(f"max chunk events/s, back-to-back chunks ({tp_total} chunks per level, client loop: {loop_name})")
        cpu_tp: dict[int, list[float]] = {}
        busy: dict[int, list[float]] = {}
        for n in streams:
            vals, cpus, bad = [], [], 0
            busy[n] = []
            for c in clients:
                rate, cpu, use, b = throughput(c, srv, n, tp_total)
                vals.append(rate)
                cpus.append(cpu)
                busy[n].append(use)
                bad += b
            cpu_tp[n] = cpus
            table.add(f"chunks/s, {n} streams", vals, lambda v: f"{v:,.0f}",
                      (">= 3x vllm" if n == 64 else "") + (f"  [{bad} failed streams: '-']" if bad else ""))
            print(f"  throughput {n}: {vals}", flush=True)
        for n in streams:
            table.add(f"client CPU s / wall s, {n} streams", busy[n], lambda v: f"{v:.2f}",
                      "1.00 = client-bound; lower: the server was the limit" if n == streams[0] else "")
        for n in streams:
            table.add(f"client CPU us/chunk, {n} streams", [v * 1e6 for v in cpu_tp[n]], lambda v: f"{v:.1f}")
        for n in streams:
            table.add(f"capacity = chunks per client CPU-s, {n} streams", [1 / v for v in cpu_tp[n]],
                      lambda v: f"{v:,.0f}", ">= 3x vllm" if n == 64 else "")

        table.section(f"timestamp error = arrival - server send, us ({err_chunks} chunks/stream at 50 chunks/s, "
                      "streams phase-staggered)")
        cpu_err: dict[int, list[float]] = {}
        for n in streams:
            res = [timestamp_error(c, srv, n, err_chunks) for c in clients]
            cpu_err[n] = [r["cpu_per_chunk"] for r in res]
            bad = sum(r["bad"] for r in res)
            tgt = {64: "P99 <= 500 us", 256: "P99 <= 2000 us"}.get(n, "")
            for kind in ("ttft", "itl"):
                for qq, qn in ((50, "P50"), (99, "P99"), (100, "max")):
                    note = tgt if (qq == 99 and tgt) else ""
                    if qq == 50 and kind == "ttft" and bad:
                        note += f"  [{bad} bad streams]"
                    table.add(f"{kind.upper()} err {qn}, {n} streams", [pct(r[kind], qq) for r in res], us, note)
            print(f"  error {n}: done", flush=True)
        for n in streams:
            table.add(f"client CPU us/chunk at 50/s, {n} streams", [v * 1e6 for v in cpu_err[n]], lambda v: f"{v:.1f}")

        table.section("send lag = actual send - scheduled send, us (Poisson); ours: run_load; vllm: asyncio.sleep loop")
        for rate, n in lag_n.items():
            ours_lag = [lag_ours_runner(c, rate, n) for c in ours]
            v_lag = lag_sleep_loop(vllm, rate, n)
            for qq, qn in ((50, "P50"), (99, "P99")):
                table.add(f"send lag {qn}, {rate:,.0f} req/s", [pct(x, qq) for x in [*ours_lag, v_lag]], us,
                          "<= 1000 us" if (qq == 99 and rate == 100) else "")
            precise = lag_sleep_loop(ours[0], rate, n, precise=True)
            table.add(f"send lag P99, sleep-to-1ms-then-yield loop, {rate:,.0f} req/s",
                      [pct(precise, 99)] * len(ours) + [pct(v_lag, 99)], us, "reference: a runner fix")
            print(f"  lag {rate}: done", flush=True)

        table.section("gate evaluation and plugin start-up (not per client)")
        ge = gate_eval_time()
        table.add("evaluate() p99 gate, 1e6 samples, ms", [ge * 1e3] * len(ours) + [float("nan")], lambda v: f"{v:.0f}")
        without, with_, heavy = pytest_help_time(a.help_runs)
        table.add("pytest --help -p no:perfgate, ms (median)", [without * 1e3] * len(ours) + [float("nan")],
                  lambda v: f"{v:.0f}")
        table.add("pytest --help with plugin, ms (median)", [with_ * 1e3] * len(ours) + [float("nan")],
                  lambda v: f"{v:.0f}")
        table.add("plugin's added start-up, ms", [(with_ - without) * 1e3] * len(ours) + [float("nan")],
                  lambda v: f"{v:.0f}", f"< 50 ms; heavy modules imported by pytest_perfgate.plugin: {heavy}")
        for c in clients:
            c.close()
    finally:
        srv.stop()
    print()
    print(f"bench_client: load average {os.getloadavg()[0]:.1f} at the end; {os.cpu_count()} CPUs, python {sys.version.split()[0]}, client loop {loop_name}, "
          f"server in a separate process; {'--quick' if q else 'full'} run, {time.perf_counter() - t_start:.0f} s")
    print(table.render())


if __name__ == "__main__":
    main()

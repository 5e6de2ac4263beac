"""perfgate's client and ``vllm bench serve``'s request function against one real vLLM server.

One vLLM OpenAI server (the ``vllm-server`` engine; by default the embedded tiny target model on
this machine's CPU, prefix caching off, a fresh random-token prompt for every request). For each
scenario, each client in turn sends the same workload and the script reads the server's own TTFT
histogram (``vllm:time_to_first_token_seconds``, ``/metrics``) before and after. It prints, per
client, the client-side TTFT (mean, P50, P99), the server's mean TTFT over the same requests, and
the **offset** = client mean - server mean: what the client, HTTP and the API server's streaming
add on top of the engine's own figure. For perfgate it also prints how many requests opened a new
connection and the mean connect time (recorded apart, not in TTFT), and for both the offered rate.

Clients:

* ``perfgate``: ``run_load`` with the engine's ``openai`` client (raw HTTP/1.1 transport,
  ``continuous_usage_stats`` on unless ``--no-usage-stats``: the server then puts a usage block
  in every chunk), Poisson schedule rescaled to the exact rate (the default, ``exact_rate``);
* ``vllm``: ``vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions`` with an
  ``aiohttp.ClientSession`` built as ``vllm bench serve`` builds it, scheduled by
  ``vllm.benchmarks.serve.get_request`` (its own rescaled Poisson delays).

Scenarios (``--scenarios``): ``poisson:RATE:N`` (N requests at RATE req/s) and ``burst:N`` (N at
once). ``python benchmarks/bench_vs_vllm.py [--prompt-len 512] [--output-len 32]
[--scenarios poisson:2:32,burst:32,burst:64] [--rounds 2] [--model PATH]``. With ``--rounds 2``
the clients' order alternates (perfgate, vllm, vllm, perfgate) so that neither always runs on a
warmer server.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_perfgate.contract import Request, run_sync  # noqa: E402
from pytest_perfgate.engines.registry import create  # noqa: E402
from pytest_perfgate.load.runner import run_load  # noqa: E402
from pytest_perfgate.load.schedule import LoadConfig  # noqa: E402

TTFT_FAMILY = "vllm:time_to_first_token_seconds"


@dataclass
class Result:
    client: str
    scenario: str
    ttft_s: list[float] = field(default_factory=list)
    server_mean_s: float = float("nan")
    server_n: int = 0
    errors: int = 0
    offered_rate: float | None = None
    new_connections: int = 0
    send_spread_ms: float = float("nan")  # last send - first send
    connect_ms: list[float] = field(default_factory=list)


def server_ttft(base_url: str) -> tuple[float, float]:
    """(sum, count) of the server's TTFT histogram, summed over its label sets."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(base_url + "/metrics", timeout=60) as r:
        text = r.read().decode()
    total, count = 0.0, 0.0
    for fam in text_string_to_metric_families(text):
        if fam.name != TTFT_FAMILY:
            continue
        for s in fam.samples:
            if s.name == TTFT_FAMILY + "_sum":
                total += s.value
            elif s.name == TTFT_FAMILY + "_count":
                count += s.value
    return total, count


def prompts(n: int, length: int, rng: random.Random) -> list[list[int]]:
    """``n`` fresh prompts of ``length`` ordinary token ids (no prefix shared with any other)."""
    return [[rng.randrange(6, 500) for _ in range(length)] for _ in range(n)]


def run_perfgate(engine: Any, scenario: str, toks: list[list[int]], output_len: int, seed: int) -> Result:
    kind, *rest = scenario.split(":")
    n = len(toks)
    reqs = [Request(tuple(t), output_len, prompt_tokens=len(t)) for t in toks]
    if kind == "poisson":
        cfg = LoadConfig(mode="poisson", rate=float(rest[0]), num_requests=n, seed=seed)
    else:
        cfg = LoadConfig(mode="concurrency", concurrency=n, num_requests=n)
    run = run_load(engine, reqs, cfg)
    res = Result("perfgate", scenario)
    for r in run.measured:
        if not r.ok or not r.chunk_ns:
            res.errors += 1
            continue
        res.ttft_s.append((r.chunk_ns[0] - r.sent_ns) / 1e9)
        if r.connect_ns is not None:
            res.new_connections += 1
            res.connect_ms.append(r.connect_ns / 1e6)
    sent = sorted(r.sent_ns for r in run.measured)
    res.send_spread_ms = (sent[-1] - sent[0]) / 1e6
    if kind == "poisson" and len(sent) > 1:
        res.offered_rate = (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9)
    return res


def run_vllm(base_url: str, model: str, scenario: str, toks: list[list[int]], output_len: int, seed: int) -> Result:
    import aiohttp
    from vllm.benchmarks.lib import endpoint_request_func as erf
    from vllm.benchmarks.serve import get_request

    kind, *rest = scenario.split(":")
    url = base_url + "/v1/completions"

    async def go() -> tuple[list[Any], list[float]]:
        # as vllm/benchmarks/serve.py builds its session
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300, use_dns_cache=True,
                                         keepalive_timeout=60, enable_cleanup_closed=True, force_close=False)
        async with aiohttp.ClientSession(connector=connector, trust_env=True,
                                         timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)) as session:
            inputs = [erf.RequestFuncInput(prompt=t, api_url=url, prompt_len=len(t), output_len=output_len,
                                           model=model, ignore_eos=True) for t in toks]
            tasks = []
            if kind == "poisson":
                np.random.seed(seed)  # get_request draws from numpy's global generator
                async for inp, _ in get_request(inputs, float(rest[0]), 1.0):  # type: ignore[arg-type]
                    tasks.append(asyncio.create_task(erf.async_request_openai_completions(inp, session)))
            else:
                tasks = [asyncio.create_task(erf.async_request_openai_completions(inp, session)) for inp in inputs]
            outs = await asyncio.gather(*tasks)
            return outs, [o.start_time for o in outs]

    outs, starts = run_sync(go())
    res = Result("vllm", scenario)
    for o in outs:
        if not o.success:
            res.errors += 1
            continue
        res.ttft_s.append(o.ttft)
    starts = sorted(starts)
    res.send_spread_ms = (starts[-1] - starts[0]) * 1e3
    if kind == "poisson" and len(starts) > 1:
        res.offered_rate = (len(starts) - 1) / (starts[-1] - starts[0])
    return res


def measure(fn: Any, base_url: str) -> Result:
    s0, c0 = server_ttft(base_url)
    res: Result = fn()
    time.sleep(1.0)  # the server's last metrics update
    s1, c1 = server_ttft(base_url)
    res.server_n = int(c1 - c0)
    res.server_mean_s = (s1 - s0) / (c1 - c0) if c1 > c0 else float("nan")
    return res


def render(results: Sequence[Result]) -> str:
    head = (f"{'scenario':<16} {'client':<9} {'n':>4} {'err':>3} {'TTFT mean':>10} {'P50':>9} {'P99':>9} "
            f"{'server mean':>11} {'offset':>9} {'offered':>9} {'sends over':>10} {'new conn':>8} {'connect':>8}")
    lines = [head, "-" * len(head)]
    for r in results:
        t = np.array(r.ttft_s) * 1e3
        mean = float(t.mean()) if len(t) else float("nan")
        p50 = float(np.percentile(t, 50)) if len(t) else float("nan")
        p99 = float(np.percentile(t, 99)) if len(t) else float("nan")
        srv = r.server_mean_s * 1e3
        offered = f"{r.offered_rate:.2f}/s" if r.offered_rate else "-"
        conn = f"{np.mean(r.connect_ms):.2f} ms" if r.connect_ms else "-"
        newc = str(r.new_connections) if r.client == "perfgate" else "?"
        lines.append(f"{r.scenario:<16} {r.client:<9} {len(t):>4} {r.errors:>3} {mean:>7.1f} ms {p50:>6.1f} ms "
                     f"{p99:>6.1f} ms {srv:>8.1f} ms {mean - srv:>+6.1f} ms {offered:>9} {r.send_spread_ms:>7.1f} ms "
                     f"{newc:>8} {conn:>8}")
    lines.append("offset = client TTFT mean - the server's own TTFT mean (its /metrics histogram) over the same "
                 "requests; perfgate's connect time is recorded apart (RequestRecord.connect_ns), not in its TTFT")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--scenarios", default="poisson:2:32,burst:32,burst:64")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--model", default=None, help="model to serve (default: the embedded tiny target model)")
    ap.add_argument("--startup-timeout", type=float, default=900)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-usage-stats", action="store_true",
                    help="perfgate without continuous_usage_stats (as vLLM's client: usage in the last chunk only)")
    args = ap.parse_args(argv)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for s in scenarios:
        if not (s.startswith("poisson:") and len(s.split(":")) == 3) and not (s.startswith("burst:") and len(s.split(":")) == 2):
            ap.error(f"--scenarios: {s!r} is neither poisson:RATE:N nor burst:N")
    model = args.model
    if model is None:
        from pytest_perfgate.models import make_models

        model = str(make_models().target)
    most = max(int(s.split(":")[-1]) for s in scenarios)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    server = create("bench", "vllm-server", {
        "model": model, "dtype": "float32", "max_model_len": args.prompt_len + args.output_len + 16,
        "max_num_seqs": max(most, 8), "max_num_batched_tokens": max(2048, args.prompt_len + args.output_len + 16),
        "enable_prefix_caching": False, "gpu_memory_utilization": 0.3, "seed": 0,
        "startup_timeout": args.startup_timeout, "env": {"HF_HUB_OFFLINE": "1"},
        "continuous_usage_stats": not args.no_usage_stats,
    })
    t = time.monotonic()
    server.start()
    print(f"bench_vs_vllm: vLLM {server.info().get('vllm_version')} server up in {time.monotonic() - t:.0f} s "
          f"({model}); prompts {args.prompt_len} tokens, {args.output_len} output tokens", flush=True)
    base_url = str(server.base_url)
    rng = random.Random(args.seed)
    results: list[Result] = []
    try:
        # warm-up: one request per client (compilation, first-request paths), not measured
        run_perfgate(server, "burst:1", prompts(1, args.prompt_len, rng), args.output_len, args.seed)
        run_vllm(base_url, server.served_model_name(), "burst:1", prompts(1, args.prompt_len, rng), args.output_len,
                 args.seed)
        for rnd in range(args.rounds):
            for sc in scenarios:
                n = int(sc.split(":")[-1])
                order = ["perfgate", "vllm"] if rnd % 2 == 0 else ["vllm", "perfgate"]
                for who in order:
                    toks = prompts(n, args.prompt_len, rng)
                    if who == "perfgate":
                        fn = functools.partial(run_perfgate, server, sc, toks, args.output_len, args.seed)
                    else:
                        fn = functools.partial(run_vllm, base_url, server.served_model_name(), sc, toks,
                                               args.output_len, args.seed)
                    res = measure(fn, base_url)
                    results.append(res)
                    print(render([res]).splitlines()[2], flush=True)
    finally:
        server.stop()
    print()
    print(f"load average {os.getloadavg()[0]:.1f} at the end; {os.cpu_count()} CPUs")
    print(render(results))


if __name__ == "__main__":
    main()

"""perfgate, guidellm and AIPerf at the same streams against the same scripted server: events/s and
timestamp error (client arrival - server send) from each tool's own per-request export.

Part of ``benchmarks/bench_scale.py --peers`` (one run, one table). The peers are installed each in
a venv of its own by ``benchmarks/peers_setup.sh`` (``build/peers/guidellm``, ``build/peers/aiperf``;
git-ignored); a peer whose venv is missing gets a row saying so.

* **The server**: the scripted server in its own process, default script ``ttft`` 5 ms, ``itl``
  2 ms (500 chunks/s per stream), 50 chunks a request (``max_tokens`` 50, one token a chunk): a peer
  cannot send perfgate's per-request ``perfgate`` object, so every tool gets the server's defaults.
* **The load**: concurrency = streams, ``rounds`` requests per stream, the same for each tool.
* **Matching a request to its ground truth**: perfgate by its ``perfgate.id`` (sent in the body, no
  timing override); AIPerf by its ``X-Request-ID`` header (the server records it; the export has
  ``metadata.x_request_id``); guidellm by the server's response id (the export's ``response_id``).
  No matching by time.
* **Clocks**: the server stamps ``perf_counter_ns`` (CLOCK_MONOTONIC); perfgate too; the peers'
  exports are wall clock (AIPerf ``time.time_ns``, guidellm Unix seconds). Wall minus monotonic is
  read in this process before and after each peer run (same machine, same clocks) and the peer's
  stamps are moved by the mean; the drift between the two reads is printed (microseconds).
* **What each export has**: AIPerf rebuilds every chunk (``start + TTFT + cumsum(inter_chunk_latency)``:
  ``pytest_perfgate/imports/aiperf.py``); guidellm keeps the first and the last token's times only
  (``imports/guidellm.py``), so its TTFT error is exact, its ITL error is **not measurable** from its
  export, and the table shows its last token's error instead, marked so.
* **events/s**: the chunks a tool read over its own span (first send to last chunk, its stamps).
* **client CPU s**: perfgate's process CPU during its run and its worker processes' (reaped, so in
  ``RUSAGE_CHILDREN``; their start-up included); a peer's is its process tree's (``RUSAGE_CHILDREN``
  around it), start-up included.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from bench_client import ROOT, ServerProcess

from pytest_perfgate.contract import Request, RequestRecord
from pytest_perfgate.engines.openai import OpenAIEngine
from pytest_perfgate.imports import aiperf as aiperf_import
from pytest_perfgate.imports import guidellm as guidellm_import
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig

PEERS = ROOT / "build" / "peers"
TTFT_S, ITL_S, CHUNKS = 0.005, 0.002, 50
PEER_TIMEOUT_S = 600


@dataclass
class Row:
    tool: str
    streams: int
    workers: str = "1"
    events_s: float = math.nan
    ttft: tuple[float, float] = (math.nan, math.nan)  # error P50, P99, ms
    itl: tuple[float, float] = (math.nan, math.nan)
    itl_note: str = ""  # "last token" when the export has no per-chunk times
    matched: int = 0
    requests: int = 0
    cpu_s: float = math.nan
    wall_s: float = math.nan
    note: str = ""
    drift_us: float = math.nan
    extra: dict[str, Any] = field(default_factory=dict)


def _pcts(xs: list[float]) -> tuple[float, float]:
    return (float(np.percentile(xs, 50)), float(np.percentile(xs, 99))) if xs else (math.nan, math.nan)


def _offset_ns() -> int:
    """Wall clock minus CLOCK_MONOTONIC, now (the tighter of three reads)."""
    best = None
    for _ in range(3):
        m0 = time.perf_counter_ns()
        w = time.time_ns()
        m1 = time.perf_counter_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, w - (m0 + m1) // 2)
    assert best is not None
    return best[1]


def _errors(row: Row, pairs: list[tuple[RequestRecord, dict[str, Any]]], shift_ns: int, per_chunk: bool) -> Row:
    """TTFT / ITL errors (ms) of matched (record, truth) pairs, the record's stamps moved by ``shift_ns``."""
    ttft, itl = [], []
    for rec, truth in pairs:
        got = np.asarray(rec.chunk_ns, dtype=np.int64) - shift_ns
        sent = np.asarray(truth["chunk_ns"], dtype=np.int64)
        if not got.size or not sent.size:
            continue
        ttft.append((got[0] - sent[0]) / 1e6)
        if per_chunk and got.size == sent.size:
            itl.extend(((got[1:] - sent[1:]) / 1e6).tolist())
        elif not per_chunk and got.size > 1:
            itl.append((got[-1] - sent[-1]) / 1e6)  # the last token's error: all the export has
    row.ttft, row.itl, row.matched = _pcts(ttft), _pcts(itl), len(pairs)
    ok = [r for r, _ in pairs if r.chunk_ns]
    span = (max(r.chunk_ns[-1] for r in ok) - min(r.sent_ns for r in ok)) / 1e9 if ok else math.nan
    events = sum(len(t["chunk_ns"]) for _, t in pairs)  # the chunks it read (a guidellm record has two stamps)
    row.events_s = events / span if span > 0 else math.nan
    return row


def perfgate(srv: ServerProcess, streams: int, rounds: int, workers: int) -> Row:
    n = streams * rounds
    ids = [f"pg{streams}w{workers}-{i}" for i in range(n)]
    reqs = [Request(prompt="hello", max_tokens=CHUNKS, extra={"perfgate": {"id": ids[i]}}) for i in range(n)]
    eng = OpenAIEngine("peers", {"base_url": srv.base_url, "model": "scripted", "timeout": 300})
    srv.reset()
    eng.start()
    try:
        c0, k0, t0 = time.process_time(), _children_cpu(), time.perf_counter()
        res = run_load(eng, reqs, LoadConfig(mode="concurrency", concurrency=streams, num_requests=n, workers=workers))
        # this process (its loop thread) and the worker processes it reaped (the server is not reaped)
        cpu, wall = time.process_time() - c0 + _children_cpu() - k0, time.perf_counter() - t0
    finally:
        eng.stop()
    truth = srv.truth()
    pairs = [(r, truth[ids[r.index]]) for r in res.measured if r.ok and ids[r.index] in truth]
    row = Row("perfgate", streams, str(workers), requests=n, cpu_s=cpu, wall_s=wall)
    return _errors(row, pairs, 0, per_chunk=True)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_peer(cmd: Sequence[str], log: Path) -> tuple[int, float, float, int, float]:
    """(exit status, CPU s of its process tree, wall s, wall-to-monotonic shift ns, its drift us)
    of one peer run."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    c0 = _children_cpu()
    off0, t0 = _offset_ns(), time.perf_counter()
    with log.open("wb") as out:
        p = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log.parent,
                             start_new_session=True)
        try:
            rc = p.wait(PEER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
    wall, off1 = time.perf_counter() - t0, _offset_ns()
    try:  # services it started and did not end (AIPerf's) go with their session
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return rc, _children_cpu() - c0, wall, (off0 + off1) // 2, abs(off1 - off0) / 1e3


def _tail(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return (lines[-1] if lines else "no output")[:160]


def aiperf(srv: ServerProcess, streams: int, rounds: int, tokenizer: Path, work: Path) -> Row:
    exe = PEERS / "aiperf" / "bin" / "aiperf"
    row = Row("AIPerf", streams, "auto", requests=streams * rounds)
    if not exe.exists():
        row.note = "not installed: bash benchmarks/peers_setup.sh aiperf"
        return row
    out = work / f"aiperf-{streams}"
    out.mkdir(parents=True, exist_ok=True)
    srv.reset()
    rc, row.cpu_s, row.wall_s, shift, row.drift_us = _run_peer(
        [str(exe), "profile", "--model", "scripted", "--url", srv.base_url, "--endpoint-type", "completions",
         "--streaming", "--tokenizer", str(tokenizer), "--concurrency", str(streams),
         "--request-count", str(streams * rounds), "--synthetic-input-tokens-mean", "16",
         "--output-tokens-mean", str(CHUNKS), "--output-tokens-stddev", "0", "--artifact-dir", str(out),
         "--export-level", "records", "--ui", "none"], out / "log.txt")
    export = out / "profile_export.jsonl"
    if rc != 0 or not export.exists():
        row.note = f"failed (exit {rc}): {_tail(out / 'log.txt')}"
        return row
    truth = {t["request_id"]: t for t in srv.get("/ground_truth")["requests"] if t.get("request_id")}
    tokens = aiperf_import.token_counts(export)
    pairs = []
    for no, doc in enumerate(export.read_text().splitlines(), 1):
        d = json.loads(doc)
        t = truth.get(str((d.get("metadata") or {}).get("x_request_id")))
        rec = aiperf_import._record(export, no, d, tokens)
        if t is not None and rec.ok and not rec.warmup:
            pairs.append((rec, t))
    return _errors(row, pairs, shift, per_chunk=True)


def guidellm(srv: ServerProcess, streams: int, rounds: int, tokenizer: Path, work: Path) -> Row:
    exe = PEERS / "guidellm" / "bin" / "guidellm"
    row = Row("guidellm", streams, "auto", requests=streams * rounds, itl_note="last token")
    if not exe.exists():
        row.note = "not installed: bash benchmarks/peers_setup.sh guidellm"
        return row
    out = work / f"guidellm-{streams}"
    out.mkdir(parents=True, exist_ok=True)
    srv.reset()
    export = out / "benchmarks.json"
    rc, row.cpu_s, row.wall_s, shift, row.drift_us = _run_peer(
        [str(exe), "run", "--backend",
         f"kind=openai_http,target={srv.base_url},model=scripted,request_format=/v1/completions,validate_backend=false",
         "--profile", f"kind=concurrent,streams={streams}", "--data",
         f"kind=synthetic_text,prompt_tokens=16,output_tokens={CHUNKS}", "--tokenizer", f"kind=hf_auto,model={tokenizer}",
         "--constraint", f"kind=max_requests,count={streams * rounds}", "--output", f"kind=json,path={export}",
         "--disable-console-interactive"], out / "log.txt")
    if rc != 0 or not export.exists():
        row.note = f"failed (exit {rc}): {_tail(out / 'log.txt')}"
        return row
    truth = {t["id"]: t for t in srv.get("/ground_truth")["requests"]}
    doc = json.loads(export.read_text())
    pairs = []
    for b in doc.get("benchmarks") or []:
        for i, q in enumerate((b.get("requests") or {}).get("successful") or []):
            t = truth.get(str(q.get("response_id")))
            rec = guidellm_import._record(export, q, i, f"successful[{i}]", False)
            if t is not None and rec.chunk_ns:
                pairs.append((rec, t))
    return _errors(row, pairs, shift, per_chunk=False)


def _ratio(x: float, base: float) -> str:
    if not (math.isfinite(x) and math.isfinite(base) and base > 0):
        return "-"
    r = x / base
    return f"{r:,.0f}" if r >= 100 else f"{r:.2f}"


def table(rows: list[Row]) -> list[str]:
    """One markdown table; ratios to perfgate with 1 worker at the same streams."""
    head = ("tool", "streams", "workers", "events/s", "x perfgate", "TTFT err P50/P99 ms", "x perfgate P99",
            "ITL err P50/P99 ms", "x perfgate P99", "matched / sent", "client CPU s", "wall s")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = {r.streams: r for r in rows if r.tool == "perfgate" and r.workers == "1"}
    for r in rows:
        b = base.get(r.streams)
        if r.note.startswith(("not installed", "failed")):
            out.append(f"| {r.tool} | {r.streams} | {r.workers} | {r.note} |" + " |" * (len(head) - 4))
            continue
        itl = f"{r.itl[0]:.2f} / {r.itl[1]:.2f}"
        itl_ratio = _ratio(r.itl[1], b.itl[1]) if b else "-"
        if r.itl_note:
            itl = f"n/a: no per-chunk times (last token: {itl})"
            itl_ratio = "n/a"
        cpu = f"{r.cpu_s:.2f}" if math.isfinite(r.cpu_s) else "-"
        out.append(f"| {r.tool} | {r.streams} | {r.workers} | {r.events_s:,.0f} | "
                   f"{_ratio(r.events_s, b.events_s) if b else '-'} | {r.ttft[0]:.2f} / {r.ttft[1]:.2f} | "
                   f"{_ratio(r.ttft[1], b.ttft[1]) if b else '-'} | {itl} | {itl_ratio} | {r.matched} / {r.requests} | "
                   f"{cpu} | {r.wall_s:.1f} |")
    return out


def run(streams: Sequence[int], rounds: int, workers: Sequence[int]) -> list[str]:
    """Every tool at every streams count, one server; the table's lines and notes."""
    from pytest_perfgate.models.make import make_models

    tokenizer = make_models().target  # a local tokenizer (and config) both peers load without a hub
    srv = ServerProcess(uvloop=False, ttft=TTFT_S, itl=ITL_S)
    rows: list[Row] = []
    try:
        with tempfile.TemporaryDirectory(prefix="perfgate-peers-") as tmp:
            for s in streams:
                for w in workers:
                    rows.append(perfgate(srv, s, rounds, w))
                rows.append(guidellm(srv, s, rounds, tokenizer, Path(tmp)))
                rows.append(aiperf(srv, s, rounds, tokenizer, Path(tmp)))
                print(f"  streams {s}: done", flush=True)
    finally:
        srv.stop()
    drift = max((r.drift_us for r in rows if math.isfinite(r.drift_us)), default=math.nan)
    notes = [f"(server script: ttft {TTFT_S * 1e3:g} ms, itl {ITL_S * 1e3:g} ms, {CHUNKS} chunks a request; "
             f"{rounds} requests per stream; ratios to perfgate with 1 worker at the same streams; "
             f"wall-to-monotonic drift over a peer run <= {drift:.1f} us; workers 'auto': the peer's own default)"]
    notes += [f"{r.tool} at {r.streams}: {r.note}" for r in rows if r.note and not r.note.startswith(("not installed", "failed"))]
    return table(rows) + notes


if __name__ == "__main__":  # the peers alone: python benchmarks/bench_peers.py [streams ...]
    import sys

    print("\n".join(run([int(x) for x in sys.argv[1:]] or [64], rounds=2, workers=[1])))

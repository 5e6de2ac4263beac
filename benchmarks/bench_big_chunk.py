"""One huge SSE event (issue 31): the ``openai`` client's CPU time and peak RSS for a server that
sends a single 5 / 10 / 20 / 40 / 50 MB event in one HTTP chunk (``data: {"choices": [{"text": "xxx..."}]}``).

Each size runs in a fresh process (peak RSS is per process): a loopback server thread writes the
response (chunked, as vLLM does; ``--framing length`` for Content-Length) and the client's
``generate`` reads it on the engine loop. Printed: the client's CPU time (``time.process_time``
around ``generate``; the server thread's ``sendall`` is in it too, a few ms), the peak RSS, and the
cause the record got. ``python benchmarks/bench_big_chunk.py [--sizes 5,10,20,40,50]
[--transport raw|aiohttp] [--framing chunked|length] [--no-limit]`` (``--no-limit``: the 8-MiB event
limit lifted, to time the framing itself).
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _serve(sock: socket.socket, body: bytes, framing: str) -> None:
    conn, _ = sock.accept()
    with conn:
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += conn.recv(65536)
        if framing == "chunked":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            done = b"data: [DONE]\n\n"
            conn.sendall(head + b"%x\r\n" % len(body) + body + b"\r\n" + b"%x\r\n" % len(done) + done + b"\r\n0\r\n\r\n")
        else:
            payload = body + b"data: [DONE]\n\n"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"
                         % len(payload) + payload)
        try:
            conn.recv(1)  # until the client closes
        except OSError:
            pass


def one(mb: float, transport: str, framing: str, no_limit: bool) -> dict[str, object]:
    from pytest_perfgate.contract import Request, RequestRecord, clock, run_sync
    from pytest_perfgate.engines.openai import OpenAIEngine

    if no_limit:  # the framing's own cost, past the 8-MiB event limit
        from pytest_perfgate.engines.openai import http1, sse

        sse.EVENT_LIMIT = 1 << 40
        setattr(http1, "EVENT_LIMIT", 1 << 40)  # noqa: B010 - imported by name there

    text = "x" * int(mb * 1_000_000)
    body = b"data: " + json.dumps({"choices": [{"text": text, "finish_reason": "length"}]}).encode() + b"\n\n"
    del text
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    threading.Thread(target=_serve, args=(sock, body, framing), daemon=True).start()
    eng = OpenAIEngine("b", {"base_url": f"http://127.0.0.1:{sock.getsockname()[1]}", "model": "m",
                             "transport": transport, "dialect": "openai", "timeout": 600})
    rec = RequestRecord(index=0)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu, wall = time.process_time(), time.perf_counter()
    run_sync(eng.generate(Request(prompt="p", max_tokens=1), rec, clock))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"mb": mb, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "peak_rss_mb": round(rss / 1024),
            "rss_before_mb": round(rss0 / 1024), "error": rec.error, "chunks": len(rec.chunk_ns)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5,10,20,40,50")
    ap.add_argument("--transport", default="raw")
    ap.add_argument("--framing", default="chunked", choices=["chunked", "length"])
    ap.add_argument("--no-limit", action="store_true", help="lift the 8-MiB SSE event limit (the framing's own cost)")
    ap.add_argument("--one", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.one, a.transport, a.framing, a.no_limit)))
        return
    limit = ", event limit lifted" if a.no_limit else ""
    print(f"one SSE event in one response ({a.transport} transport, {a.framing} body{limit})")
    print(f"{'MB':>4} {'client CPU s':>12} {'wall s':>7} {'peak RSS MB':>11}  cause")
    for mb in [float(s) for s in a.sizes.split(",")]:
        out = subprocess.run([sys.executable, __file__, "--one", str(mb), "--transport", a.transport,
                              "--framing", a.framing, *(["--no-limit"] if a.no_limit else [])],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{mb:>4g} {r['cpu_s']:>12.2f} {r['wall_s']:>7.2f} {r['peak_rss_mb']:>11}  {r['error'] or 'ok'}")


if __name__ == "__main__":
    main()

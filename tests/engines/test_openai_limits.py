"""Big and endless SSE events (issue 31): the raw transport's framing keeps a big chunk's reads as
they came (linear: no re-join or re-split per read), the event splitter is linear too, and an SSE
event over 8 MiB or a body over the body limit ends the request with a named cause, on both
transports and all framings. Timing is in ``benchmarks/bench_big_chunk.py`` (printed, not asserted)."""

from __future__ import annotations

import itertools
import json
import random
import socket
import threading
from collections.abc import Iterator

import pytest

from pytest_perfgate.contract import Request, RequestRecord, clock, run_sync
from pytest_perfgate.engines.openai import OpenAIEngine, http1
from pytest_perfgate.engines.openai.http1 import Connection, Exchange
from pytest_perfgate.engines.openai.sse import ChunkEvents, EventSplitter
from pytest_perfgate.engines.openai.transport import Response

HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def _event(n_bytes: int) -> bytes:
    return b"data: " + json.dumps({"choices": [{"text": "x" * n_bytes, "finish_reason": "length"}]}).encode() + b"\n\n"


def test_a_big_chunk_arriving_in_many_reads_is_kept_not_rejoined() -> None:
    ev, done = _event(3_000_000), b"data: [DONE]\n\n"
    data = HEAD + b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(ev), ev, len(done), done)
    conn, ex = Connection(), Exchange()
    sink = ex.sink = ChunkEvents("completions")
    conn.begin(ex, itertools.count(1).__next__, "POST", None)  # type: ignore[arg-type]
    size = 64 * 1024
    reads = [data[i:i + size] for i in range(0, len(data), size)]
    for k, r in enumerate(reads, 1):
        conn.data_received(r)
        if len(sink.times) == 0 and k > 1:  # the chunk is incomplete: its reads are kept as they came
            assert len(ex._pend) == k and ex._need > 0
    assert ex.complete and ex.bulk
    last = next(k for k, r in enumerate(reads, 1) if sum(map(len, reads[:k])) >= len(HEAD) + len(ev) + 10)
    assert sink.times == [last] and b"".join(sink.data) == ev and sink.done_ns is not None


def _split_events(body: bytes, cuts: list[int]) -> list[tuple[int, bytes]]:
    sp = EventSplitter()
    edges = [0, *cuts, len(body)]
    for t, (a, b) in enumerate(itertools.pairwise(edges)):
        if sp.feed(body[a:b], t):
            break
    sp.close(99)
    return sp.events


@pytest.mark.parametrize("crlf", [False, True])
def test_the_splitter_gives_the_same_events_however_the_reads_fall(crlf: bool) -> None:
    body = b"".join(_event(k) for k in (0, 3, 7)) + b": keep-alive\n\nevent: x\ndata: {}\n\n" + b"data: [DONE]\n\n"
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    whole = [ev for _, ev in _split_events(body, [])]
    assert len(whole) == 5
    for cut in range(1, len(body)):  # every 2-read split, then random many-read splits
        assert [ev for _, ev in _split_events(body, [cut])] == whole, cut
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(body)), rng.randint(2, 40)))
        assert [ev for _, ev in _split_events(body, cuts)] == whole, cuts


def test_chunked_framing_gives_the_same_events_however_the_reads_fall() -> None:
    evs = [_event(k) for k in (1, 300, 5, 70_000, 2)] + [b"data: [DONE]\n\n"]
    data = HEAD + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in evs) + b"0\r\n\r\n"
    rng = random.Random(11)
    for _ in range(60):
        cuts = sorted(set(rng.sample(range(len(HEAD) + 1, len(data)), rng.randint(1, 30))))
        conn, ex = Connection(), Exchange()
        response = Response("completions")
        response.chunks = ex.sink = ChunkEvents("completions")
        conn.begin(ex, itertools.count(1).__next__, "POST", None)  # type: ignore[arg-type]
        for a, b in itertools.pairwise([0, *cuts, len(data)]):
            conn.data_received(data[a:b])
        assert ex.complete
        rec = RequestRecord(index=0)
        response.decode(rec)
        assert rec.error is None and len(rec.chunk_ns) == 5 and rec.chunk_ns == sorted(rec.chunk_ns), cuts


class _OneBody:
    """Answers every POST with ``body`` (chunked or Content-Length) and closes."""

    def __init__(self, body: bytes, framing: str) -> None:
        self.body, self.framing = body, framing
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += conn.recv(65536)
                if self.framing == "chunked":
                    msg = HEAD + b"%x\r\n%s\r\n0\r\n\r\n" % (len(self.body), self.body)
                else:
                    msg = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(self.body), self.body)
                try:
                    conn.sendall(msg)
                    conn.recv(1)
                except OSError:
                    pass


@pytest.fixture(params=[("raw", "chunked"), ("raw", "length"), ("aiohttp", "chunked")], ids=lambda p: "-".join(p))
def transport_framing(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    yield request.param


def _generate(body: bytes, transport: str, framing: str) -> RequestRecord:
    server = _OneBody(body, framing)
    eng = OpenAIEngine("b", {"base_url": server.base_url, "model": "m", "transport": transport, "dialect": "openai",
                             "timeout": 60})
    rec = RequestRecord(index=0)
    try:
        run_sync(eng.generate(Request(prompt="p", max_tokens=1), rec, clock))
    finally:
        eng.stop()
        server.sock.close()
    return rec


def test_an_sse_event_over_8_mib_is_a_named_cause(transport_framing: tuple[str, str]) -> None:
    transport, framing = transport_framing
    ok = _generate(_event(2_000_000) + b"data: [DONE]\n\n", transport, framing)
    assert ok.error is None and ok.output_tokens == 1
    big = _generate(_event(9 << 20) + b"data: [DONE]\n\n", transport, framing)
    assert big.error is not None and big.error.startswith("SSE event over 8 MiB: "), big.error


def test_a_body_over_the_limit_is_a_named_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "BODY_LIMIT", 1 << 20)
    many = b"".join(_event(100) for _ in range(10_000)) + b"data: [DONE]\n\n"  # ~1.4 MB of small events
    rec = _generate(many, "raw", "length")
    assert rec.error == "response body over 1 MiB (not read further)", rec.error

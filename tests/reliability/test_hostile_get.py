"""A hostile server's GET bodies (/metrics, /version) are bounded: an endless /metrics body is read
up to 8 MiB and then given up as unreadable (None), on both transports, never read into memory whole.
Before: the aiohttp transport read any GET body whole (``r.read()``), the raw one up to 256 MiB."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest

from pytest_perfgate.engines.openai.sse import EVENT_LIMIT
from pytest_perfgate.engines.openai.transport_aiohttp import AiohttpTransport
from pytest_perfgate.engines.openai.transport_raw import RawTransport

CHUNK = b"x" * 65536 + b"\n\n"  # blank lines: the raw transport's SSE event bound does not stop it


@pytest.fixture
def endless() -> Iterator[tuple[int, list[int]]]:
    """A loopback server answering every request with a 1 GiB body it streams until the client goes;
    yields (port, [bytes sent per connection])."""
    srv = socket.create_server(("127.0.0.1", 0))
    sent: list[int] = []
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        total = 0
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % (1 << 30))
            try:
                while not stop.is_set() and total < (1 << 30):
                    conn.sendall(CHUNK)
                    total += len(CHUNK)
            except OSError:
                pass
        sent.append(total)

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1], sent
    stop.set()
    t.join(10)
    srv.close()


@pytest.mark.parametrize("kind", ["raw", "aiohttp"])
def test_an_endless_metrics_body_is_given_up_after_its_bound(endless: tuple[int, list[int]], kind: str) -> None:
    port, sent = endless

    async def get() -> object:
        tr = (RawTransport("127.0.0.1", port, {}, "") if kind == "raw"
              else AiohttpTransport(f"http://127.0.0.1:{port}", {}, trust_env=False))
        try:
            return await tr.get("/metrics", 600)
        finally:
            await tr.close()

    assert asyncio.run(get()) is None  # unreadable, not a 1 GiB bytes object
    # the client stopped reading near the bound (socket buffers hold a few MiB more), far from 1 GiB
    for _ in range(100):
        if sent:
            break
        threading.Event().wait(0.1)
    assert sent and sent[0] < EVENT_LIMIT + (64 << 20), sent

"""Transport ``raw``: our own HTTP/1.1 client (:mod:`.http1` framing) for plain ``http://``.

Keep-alive with a pool of idle connections per client (LIFO, unlimited), no compression (we never
ask for it), one retry on a fresh connection when a reused idle connection turns out to be closed
before any byte of the answer arrived. No TLS: the ``openai`` engine keeps aiohttp for ``https``
and proxies. The send stamp (:attr:`.http1.Exchange.sent_t`) is taken at the socket write, after
the connection is open; opening a new one is timed apart (:attr:`.http1.Exchange.connect_ns`), so
that TCP setup never lands in TTFT or E2E.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from ...contract import Clock
from .http1 import RECV_SIZE, ConnectError, Connection, Exchange, RawHTTPError, TooLargeError
from .sse import ChunkEvents, TooLarge
from .transport import Response, TransportError

_DNS_TTL_S = 300.0


class RawClient:
    """Connections to one ``host:port``; use from one event loop (the engine loop)."""

    def __init__(self, host: str, port: int, headers: Mapping[str, str]) -> None:
        self.host, self.port = host, port
        hostport = host if port == 80 else f"{host}:{port}"
        if ":" in host and not host.startswith("["):
            hostport = f"[{host}]" if port == 80 else f"[{host}]:{port}"
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in {"Host": hostport, "Accept": "*/*", **headers}.items()
                              if k.lower() != "content-length").encode("latin-1")
        self._idle: list[Connection] = []
        self._recv_buf = memoryview(bytearray(RECV_SIZE))  # shared by this client's connections
        self._loop: asyncio.AbstractEventLoop | None = None
        self._addr: tuple[Any, ...] | None = None
        self._addr_at = 0.0

    async def _resolve(self) -> tuple[Any, ...]:
        now = time.monotonic()
        if self._addr is None or now - self._addr_at > _DNS_TTL_S:
            loop = asyncio.get_running_loop()
            infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            if not infos:
                raise OSError(f"cannot resolve {self.host}")
            self._addr, self._addr_at = infos[0], now
        return self._addr

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            family, _, proto, _, sockaddr = await self._resolve()
            buf = self._recv_buf
            _, conn = await loop.create_connection(lambda: Connection(buf), sockaddr[0], sockaddr[1], family=family,
                                                   proto=proto)
        except ConnectionRefusedError as e:
            raise ConnectError(self.host, self.port, True, e) from None
        except OSError as e:
            raise ConnectError(self.host, self.port, False, e) from None
        return conn

    def _take(self) -> Connection | None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new loop: connections of the old one are unusable
            self._idle.clear()
            self._loop = loop
        while self._idle:
            c = self._idle.pop()
            if not c.closed and c.transport is not None and not c.transport.is_closing():
                c.reused = True
                return c
        return None

    def _release(self, conn: Connection, ex: Exchange) -> None:
        conn.ex = None
        conn.waiter = None
        if ex.complete and ex.keep_alive and not conn.closed and conn.transport is not None \
                and not conn.transport.is_closing():
            self._idle.append(conn)
        elif conn.transport is not None:
            conn.closed = True
            conn.transport.close()

    async def request(self, method: str, path: str, body: bytes | None, clock: Clock,
                      extra_headers: Mapping[str, str] | None = None, on_exchange: Callable[[Exchange], None] | None = None,
                      ) -> Exchange:
        """Send one request and return when its response is complete (or the connection ended).

        ``on_exchange`` is called with the live :class:`Exchange` as soon as it exists, so that a
        caller whose wait is cancelled (timeout) can still inspect what arrived. The exchange's
        ``sent_t`` is ``clock()`` right before the socket write and ``connect_ns`` the time spent
        opening a new connection first (None when a kept-alive connection was reused).
        Raises :class:`ConnectError` and :class:`ProtocolError`; a connection that ends early gives
        an exchange with ``lost`` set. Cancellation closes the connection.
        """
        head = b"%s %s HTTP/1.1\r\n" % (method.encode(), path.encode("latin-1")) + self._fixed
        if extra_headers:
            head += "".join(f"{k}: {v}\r\n" for k, v in extra_headers.items()).encode("latin-1")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head += b"Content-Length: %d\r\n" % len(body or b"")
        msg = head + b"\r\n" + (body or b"")
        for attempt in (0, 1):
            conn = self._take()
            connect_ns: int | None = None
            if conn is None:
                t0 = clock()
                conn = await self._connect()
                connect_ns = clock() - t0
                self._loop = asyncio.get_running_loop()
            ex = Exchange()
            ex.connect_ns = connect_ns
            if on_exchange is not None:
                on_exchange(ex)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            conn.begin(ex, clock, method, waiter)
            assert conn.transport is not None
            try:
                ex.sent_t = clock()  # the send stamp: at the socket write, connection setup excluded
                conn.transport.write(msg)
                await waiter
            except BaseException:
                conn.closed = True
                if conn.transport is not None:
                    conn.transport.abort()
                conn.ex = None
                raise
            if ex.lost and conn.reused and attempt == 0 and not ex.head_done and ex.received_body_bytes() == 0:
                conn.ex = None
                continue  # a stale keep-alive connection: retry once on a fresh one
            self._release(conn, ex)
            return ex
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close idle connections (call on the loop that owns them)."""
        for c in self._idle:
            if c.transport is not None:
                c.transport.close()
        self._idle.clear()


class RawTransport:
    """:class:`.transport.Transport` over :class:`RawClient`: one future per request; the common
    stream shape is checked and decoded read by read (:class:`.sse.ChunkEvents`), any other is
    split into events after the response is complete."""

    kind = "raw"

    def __init__(self, host: str, port: int, headers: Mapping[str, str], path_prefix: str) -> None:
        self._client = RawClient(host, port, headers)
        self._prefix = path_prefix

    async def get(self, path: str, timeout: float) -> tuple[int, bytes] | None:
        try:
            async with asyncio.timeout(timeout):
                ex = await self._client.request("GET", self._prefix + path, None, time.perf_counter_ns)
        except (TimeoutError, RawHTTPError):
            return None
        if ex.lost or not ex.head_done:
            return None
        return ex.status, ex.body()

    async def stream(self, path: str, payload: bytes, clock: Clock, response: Response) -> None:
        live: list[Exchange] = []

        def on_exchange(ex: Exchange) -> None:
            live.append(ex)
            response.chunks = ChunkEvents(response.api)
            ex.sink = response.chunks

        try:
            ex = await self._client.request("POST", self._prefix + path, payload, clock, on_exchange=on_exchange)
        except ConnectError as e:
            raise TransportError(f"{'connection refused' if e.refused else 'cannot connect'}: {e.host}:{e.port}") from None
        except TooLargeError as e:
            raise TransportError(str(e)) from None
        except RawHTTPError as e:
            raise TransportError(f"connection error: {type(e).__name__}: {e}") from None
        except BaseException:  # cancelled (a timeout): keep what arrived
            if live and live[-1].head_done:
                response.status = live[-1].status
                if response.status < 300:
                    with contextlib.suppress(TooLarge):
                        split_events(live[-1], response)
            raise
        finally:
            if live:
                response.sent_ns, response.connect_ns = live[-1].sent_t, live[-1].connect_ns
        if not ex.head_done:
            raise TransportError("connection closed mid-stream: server disconnected after 0 events")
        response.status = ex.status
        if ex.status >= 400:
            response.body = ex.body()
            return
        if 300 <= ex.status < 400:  # a redirect: never followed (the key goes to base_url's host only)
            response.location = ex.headers.get("location")
            return
        if ex.bulk and ex.complete:  # the common case: every event already went to response.chunks
            return
        try:
            split_events(ex, response)
        except TooLarge as e:
            raise TransportError(str(e), keep_events=True) from None
        if response.splitter.done_ns is None and ex.lost:
            raise TransportError(f"connection closed mid-stream: after {len(response.splitter.events)} events",
                                 keep_events=True)

    async def close(self) -> None:
        self._client.close()


def split_events(ex: Exchange, response: Response) -> None:
    """The events of ``ex``'s payload, each stamped with the read that completed it."""
    response.chunks = None
    splitter = response.splitter
    for t, piece in ex.payload_reads():
        if splitter.feed(piece, t):
            return
    splitter.close(ex.times[-1] if ex.times else 0)

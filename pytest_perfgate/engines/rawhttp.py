"""A minimal streaming HTTP/1.1 client over :class:`asyncio.Protocol`, built to be a clock.

Why not aiohttp on the measuring path: every network read there passes through a stream reader,
a future and a task switch before the caller can take a timestamp, and the caller's task is woken
once per read. Here ``clock()`` is read first thing in :meth:`_Conn.data_received`, the bytes are
stored as they are (one ``list.append``), and the only other work per read is stepping over the
chunked-transfer framing (a ``find`` and an ``int`` per HTTP chunk, no copying). Nobody is woken
until the whole response is in: the caller awaits one future per request. Splitting the body into
SSE events, and mapping each event to the read that completed it, happens afterwards
(:meth:`Exchange.sse_events`).

Scope: plain ``http://`` (no TLS: the ``openai`` engine keeps aiohttp for ``https`` and proxies),
keep-alive with a pool of idle connections per client (LIFO, unlimited), ``Content-Length``,
``Transfer-Encoding: chunked`` and close-delimited bodies, no compression (we never ask for it), one
retry on a fresh connection when a reused idle connection turns out to be closed before any byte
of the answer arrived.
"""

from __future__ import annotations

import asyncio
import operator
import socket
import time
from bisect import bisect_right
from collections.abc import Callable, Mapping
from itertools import accumulate, repeat
from typing import Any

Clock = Callable[[], int]

_HEAD_LIMIT = 64 * 1024
_LAST_CHUNK = b"0\r\n\r\n"
_DNS_TTL_S = 300.0


class RawHTTPError(Exception):
    """A transport-level failure; ``str()`` is short and carries no secrets."""


class ConnectError(RawHTTPError):
    def __init__(self, host: str, port: int, refused: bool, cause: BaseException) -> None:
        super().__init__(f"{'connection refused' if refused else 'cannot connect'}: {host}:{port} ({cause})")
        self.host, self.port, self.refused = host, port, refused


class ProtocolError(RawHTTPError):
    """The server's bytes are not HTTP/1.x as we understand it."""


class Exchange:
    """One request and its response as received: raw body reads with their arrival times."""

    __slots__ = ("status", "reason", "headers", "times", "reads", "spans", "complete", "lost", "keep_alive",
                 "head_t", "_body_len", "lazy", "fast")

    def __init__(self) -> None:
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.times: list[int] = []  # arrival of each body read (clock at data_received)
        self.reads: list[bytes] = []  # the body bytes of each read, framing included
        self.spans: list[list[int]] = []  # payload [start, end) in body coordinates (chunked framing removed)
        self.complete = False
        self.lost = False  # the connection ended before the response was complete
        self.keep_alive = True
        self.head_t: int | None = None  # arrival of the read that completed the head
        self._body_len = 0
        self.lazy = False  # chunked body whose framing was not walked yet (``spans`` not filled)
        # the common case, checked in bulk at the end: (arrival of each event before [DONE], those
        # events as received, each b"data: <one line>\n\n", arrival of [DONE] or None)
        self.fast: tuple[list[int], bytes, int | None] | None = None

    @property
    def head_done(self) -> bool:
        return self.head_t is not None

    def received_body_bytes(self) -> int:
        return self._body_len

    def body(self) -> bytes:
        """The payload (chunked framing removed) received so far."""
        self._materialize()
        raw = b"".join(self.reads)
        if len(self.spans) == 1:
            s, e = self.spans[0]
            return raw[s:min(e, len(raw))]
        return b"".join(raw[s:min(e, len(raw))] for s, e in self.spans)

    def sse_events(self) -> tuple[list[tuple[int, bytes]], int | None]:
        """``([(arrival_ns, event), ...], done_ns)``: SSE events up to ``data: [DONE]`` (excluded).

        An event's arrival is the arrival of the read that carried its terminating blank line.
        Lines are normalised to ``\\n``. Bytes after the last separator that are not blank become
        a last event (stamped with the last read), as the aiohttp path does.
        """
        if self.fast is not None:
            times, data, done_ns = self.fast
            return list(zip(times, data.split(b"\n\n")[:-1], strict=True)), done_ns
        if not self.reads:
            return [], None
        self._materialize()
        raw = b"".join(self.reads)
        total = len(raw)
        if len(self.spans) > 1:
            fast = self._one_event_per_chunk(raw)
            if fast is not None:
                return fast
        # payload start of each span, and read ends, for mapping payload offsets to read times
        pstarts: list[int] = []
        parts: list[bytes] = []
        acc = 0
        for s, e in self.spans:
            e = min(e, total)
            if e <= s:
                continue
            pstarts.append(acc)
            parts.append(raw[s:e])
            acc += e - s
        payload = parts[0] if len(parts) == 1 else b"".join(parts)
        spans = [(s, e) for s, e in self.spans if min(e, total) > s]
        ends: list[int] = []
        acc = 0
        for r in self.reads:
            acc += len(r)
            ends.append(acc)
        times = self.times
        simple = len(spans) == 1 and spans[0][0] == 0  # payload offset == body offset

        def stamp(p: int) -> int:
            if simple:
                off = p
            else:
                k = bisect_right(pstarts, p) - 1
                off = spans[k][0] + (p - pstarts[k])
            return times[bisect_right(ends, off)] if off < total else times[-1]

        events: list[tuple[int, bytes]] = []
        append = events.append
        done: int | None = None
        if b"\r" not in payload:
            start = 0
            find = payload.find
            while True:
                i = find(b"\n\n", start)
                if i < 0:
                    break
                ev = payload[start:i]
                start = i + 2
                t = stamp(i + 1)
                if ev == b"data: [DONE]" or ev == b"data:[DONE]":
                    return events, t
                append((t, ev))
            rest = payload[start:]
        else:
            import re

            start = 0
            for m in re.finditer(rb"\r?\n\r?\n", payload):
                ev = payload[start:m.start()].replace(b"\r\n", b"\n")
                start = m.end()
                t = stamp(m.end() - 1)
                if ev == b"data: [DONE]" or ev == b"data:[DONE]":
                    return events, t
                append((t, ev))
            rest = payload[start:].replace(b"\r\n", b"\n")
        if rest.strip():
            append((times[-1], rest))
        return events, done


    def _bulk(self) -> bool:
        """The whole chunked body is one ``data: `` line per HTTP chunk and the last chunk: set ``fast``.

        Everything runs in C (``split``, ``count``, ``map``/``accumulate``/``bisect``), no Python
        bytecode per chunk. Every chunk's declared size must equal the bytes between its CRLFs, so
        this is a full check of the framing; False (nothing set) when the body has any other shape.
        """
        raw = b"".join(self.reads)
        if not raw.endswith(_LAST_CHUNK):
            return False
        parts = raw.split(b"\r\n")  # size, payload, size, payload, ..., "0", "", ""
        if len(parts) % 2 == 0 or parts[-3:] != [b"0", b"", b""]:
            return False
        hexes, payloads = parts[0:-3:2], parts[1:-3:2]
        lens = list(map(len, payloads))
        try:
            if list(map(int, hexes, repeat(16))) != lens:
                return False
        except ValueError:  # chunk extensions, ...
            return False
        n = len(payloads)
        if n == 0:
            self.fast = ([], b"", None)
            return True
        done_ns: int | None = None
        ndata = n
        if payloads[-1] == b"data: [DONE]\n\n":
            ndata -= 1
        data = b"".join(payloads[:ndata])
        # each payload is exactly one event: "data: " + a line + a blank line
        if ndata and (not data.startswith(b"data: ") or data.count(b"\n") != 2 * ndata
                      or data.count(b"\n\ndata: ") != ndata - 1
                      or not all(map(bytes.endswith, payloads[:ndata], repeat(b"\n\n")))):
            return False
        read_ends = list(accumulate(map(len, self.reads)))
        # chunk = size CRLF payload CRLF; an event arrives with the read holding its last payload byte
        ends = accumulate(map(operator.add, map(operator.add, map(len, hexes), lens), repeat(4)))
        last = map(operator.sub, ends, repeat(3))
        times = list(map(self.times.__getitem__, map(bisect_right, repeat(read_ends), last)))
        if ndata < n:
            done_ns = times.pop()
        self.fast = (times, data, done_ns)
        return True

    def _materialize(self) -> None:
        """Walk the chunked framing of a lazily received body (fills ``spans``)."""
        if not self.lazy:
            return
        self.lazy = False
        w = _Conn()
        w.ex, w._mode = self, 1
        try:
            w._chunked(b"".join(self.reads), 0)
        except (ProtocolError, ValueError):
            self.lost = True

    def _one_event_per_chunk(self, raw: bytes) -> tuple[list[tuple[int, bytes]], int | None] | None:
        """The common case (vLLM, SGLang, ...): every HTTP chunk is exactly one ``\\n\\n`` event.

        Then an event's time is the time of the read holding its chunk's last byte: one merge walk
        over chunks and reads, no payload copy. None when the case does not apply.
        """
        total = len(raw)
        reads, times = self.reads, self.times
        r, end_r = 0, len(reads[0])
        nreads = len(reads)
        events: list[tuple[int, bytes]] = []
        append = events.append
        for s, e in self.spans:
            if e > total:
                return None  # a partial last chunk: let the general path handle it
            piece = raw[s:e]
            if piece.find(b"\n\n") != e - s - 2 or b"\r" in piece:
                return None
            while end_r < e and r + 1 < nreads:
                r += 1
                end_r += len(reads[r])
            ev = piece[:-2]
            if ev == b"data: [DONE]" or ev == b"data:[DONE]":
                return events, times[r]
            append((times[r], ev))
        return events, None


class _Conn(asyncio.Protocol):
    """One keep-alive connection; parses the response head and steps over the body framing."""

    _request_method = "GET"

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.clock: Clock = time.perf_counter_ns
        self.ex: Exchange | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.reused = False
        self._head = b""
        self._mode = 0  # 0 head, 1 chunked, 2 content-length, 3 until close
        self._left = 0  # content-length bytes left
        self._skip = 0  # chunked: bytes to step over (payload + CRLF)
        self._line = b""  # chunked: partial size line / trailer carried to the next read
        self._pos = 0  # body bytes received (body coordinates of the next read)
        self._tail = b""  # chunked, lazy: the body's last bytes

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not TCP
                pass

    def data_received(self, data: bytes) -> None:
        t = self.clock()  # first: before any parsing
        ex = self.ex
        if ex is None or ex.complete:  # bytes nobody asked for: the connection can't be trusted
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            return
        try:
            if self._mode == 0:
                buf = self._head + data if self._head else data
                while True:
                    i = buf.find(b"\r\n\r\n")
                    if i < 0:
                        if len(buf) > _HEAD_LIMIT:
                            raise ProtocolError("response head too long")
                        self._head = buf
                        return
                    head, buf = buf[:i], buf[i + 4:]
                    if self._parse_head(head, t):
                        break  # else 1xx: the real head follows
                self._head = b""
                data = buf
                if ex.complete:
                    self._finish()
                    return
                if not data:
                    return
            ex.times.append(t)
            ex.reads.append(data)
            base = self._pos
            self._pos += len(data)
            ex._body_len = self._pos
            mode = self._mode
            if mode == 1:
                if ex.lazy:
                    # nothing per chunk while the stream runs: only look whether the body may have
                    # ended; then check the whole framing at once (C loops), or walk it in Python
                    tail = data[-5:] if len(data) >= 5 else (self._tail + data)[-5:]
                    self._tail = tail
                    if tail == _LAST_CHUNK:
                        if ex._bulk():
                            ex.lazy = False
                            ex.complete = True
                            self._finish()
                            return
                        ex.lazy = False
                        self._chunked(b"".join(ex.reads), 0)
                    return
                self._chunked(data, base)
            elif mode == 2:
                self._left -= len(data)
                if self._left <= 0:
                    if self._left < 0:
                        raise ProtocolError("more body bytes than Content-Length")
                    ex.complete = True
                    self._finish()
        except (ProtocolError, ValueError) as e:
            self._fail(e)

    def eof_received(self) -> bool | None:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.ex
        if ex is not None and not ex.complete:
            if self._mode == 3 and ex.head_done:
                ex.complete = True
                ex.keep_alive = False
            else:
                ex.lost = True
        self._wake()

    # -- framing ---------------------------------------------------------------------------
    def _parse_head(self, head: bytes, t: int) -> bool:
        ex = self.ex
        assert ex is not None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # informational: another head follows
            return False
        headers: dict[str, str] = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(":")
            if sep:
                k = k.strip().lower()
                headers[k] = f"{headers[k]}, {v.strip()}" if k in headers else v.strip()
        ex.status, ex.reason, ex.headers, ex.head_t = status, parts[2] if len(parts) > 2 else "", headers, t
        conn = headers.get("connection", "").lower()
        ex.keep_alive = ("close" not in conn) if parts[0] == "HTTP/1.1" else ("keep-alive" in conn)
        te = headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
            self._mode = 1
            ex.lazy = True
        elif "content-length" in headers:
            self._mode = 2
            self._left = int(headers["content-length"])
            ex.spans.append([0, self._left])
            if self._left == 0 or self._request_method == "HEAD" or status in (204, 304):
                ex.complete = True
        elif status in (204, 304) or self._request_method == "HEAD":
            ex.complete = True
        else:
            self._mode = 3
            ex.keep_alive = False
            ex.spans.append([0, 1 << 62])
        return True

    def _chunked(self, data: bytes, base: int) -> None:
        ex = self.ex
        assert ex is not None
        if self._line:
            data = self._line + data
            base -= len(self._line)
            self._line = b""
        n = len(data)
        i = 0
        skip = self._skip
        spans = ex.spans
        find = data.find
        while True:
            if skip:
                if skip >= n - i:
                    self._skip = skip - (n - i)
                    return
                i += skip
                skip = 0
            j = find(b"\r\n", i)
            if j < 0:
                self._line = data[i:]
                self._skip = 0
                if len(self._line) > 4096:
                    raise ProtocolError("chunk size line too long")
                return
            size = int(data[i:j].split(b";", 1)[0], 16)
            if size == 0:  # last chunk: empty line or trailers, then the end
                rest = data[j + 2:]
                if rest[:2] == b"\r\n":
                    extra = rest[2:]
                else:
                    k = rest.find(b"\r\n\r\n")
                    if k < 0:
                        self._line = data[i:]
                        self._skip = 0
                        return
                    extra = rest[k + 4:]
                if extra.strip():
                    ex.keep_alive = False  # pipelined junk: don't reuse
                ex.complete = True
                self._skip = 0
                self._finish()
                return
            start = base + j + 2
            spans.append([start, start + size])
            i = j + 2
            skip = size + 2

    # -- exchange control ------------------------------------------------------------------
    def begin(self, ex: Exchange, clock: Clock, method: str, waiter: asyncio.Future[None]) -> None:
        self.ex, self.clock, self.waiter = ex, clock, waiter
        self._request_method = method
        self._mode, self._head, self._left, self._skip, self._line, self._pos = 0, b"", 0, 0, b"", 0
        self._tail = b""

    def _finish(self) -> None:
        self._wake()

    def _fail(self, e: BaseException) -> None:
        ex = self.ex
        if ex is not None:
            ex.lost = True
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        w = self.waiter
        if w is not None and not w.done():
            w.set_exception(e if isinstance(e, RawHTTPError) else ProtocolError(str(e)))

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)


class RawClient:
    """Connections to one ``host:port``; use from one event loop (the engine loop)."""

    def __init__(self, host: str, port: int, headers: Mapping[str, str]) -> None:
        self.host, self.port = host, port
        hostport = host if port == 80 else f"{host}:{port}"
        if ":" in host and not host.startswith("["):
            hostport = f"[{host}]" if port == 80 else f"[{host}]:{port}"
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in {"Host": hostport, "Accept": "*/*", **headers}.items()
                              if k.lower() != "content-length").encode("latin-1")
        self._idle: list[_Conn] = []
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

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            family, _, proto, _, sockaddr = await self._resolve()
            _, conn = await loop.create_connection(_Conn, sockaddr[0], sockaddr[1], family=family, proto=proto)
        except ConnectionRefusedError as e:
            raise ConnectError(self.host, self.port, True, e) from None
        except OSError as e:
            raise ConnectError(self.host, self.port, False, e) from None
        return conn

    def _take(self) -> _Conn | None:
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

    def _release(self, conn: _Conn, ex: Exchange) -> None:
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
        caller whose wait is cancelled (timeout) can still inspect what arrived.
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
            if conn is None:
                conn = await self._connect()
                self._loop = asyncio.get_running_loop()
            ex = Exchange()
            if on_exchange is not None:
                on_exchange(ex)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            conn.begin(ex, clock, method, waiter)
            assert conn.transport is not None
            try:
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

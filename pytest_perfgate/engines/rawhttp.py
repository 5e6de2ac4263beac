"""A minimal streaming HTTP/1.1 client over :class:`asyncio.Protocol`, built to be a clock.

Why not aiohttp on the measuring path: every network read there passes through a stream reader,
a future and a task switch before the caller can take a timestamp, and the caller's task is woken
once per read. Here ``clock()`` is read first thing in :meth:`_Conn.data_received`, the bytes are
stored as they are (one ``list.append``), and nobody is woken until the whole response is in: the
caller awaits one future per request. A chunked body is first taken to be the common SSE shape
(one ``data: <line>`` event per HTTP chunk): each read's complete chunks are checked and split in
bulk, with C loops only (:meth:`Exchange._feed`), and handed to ``Exchange.sink``. At the first
byte that does not fit, the framing is walked in Python from the start (a ``find`` and an ``int``
per HTTP chunk, from then on per read), and splitting the body into SSE events, mapping each
event to the read that completed it, happens afterwards (:meth:`Exchange.sse_events`).

Scope: plain ``http://`` (no TLS: the ``openai`` engine keeps aiohttp for ``https`` and proxies),
keep-alive with a pool of idle connections per client (LIFO, unlimited), ``Content-Length``,
``Transfer-Encoding: chunked`` and close-delimited bodies, no compression (we never ask for it), one
retry on a fresh connection when a reused idle connection turns out to be closed before any byte
of the answer arrived.

The send stamp (:attr:`Exchange.sent_t`) is taken at the socket write, after the connection is
open; opening a new one is timed apart (:attr:`Exchange.connect_ns`), so that TCP setup never
lands in TTFT or E2E.
"""

from __future__ import annotations

import asyncio
import socket
import time
from bisect import bisect_right
from collections.abc import Callable, Mapping
from itertools import repeat
from typing import Any

Clock = Callable[[], int]

_HEAD_LIMIT = 64 * 1024
_LAST_CHUNK = b"0\r\n\r\n"
_RECV_SIZE = 256 * 1024  # as asyncio's own reads
_NO_BUF = memoryview(b"")
_DONE, _DONE_NOSP = b"data: [DONE]\n\n", b"data:[DONE]\n\n"
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
                 "head_t", "_body_len", "lazy", "fast", "fast_times", "fast_data", "sink", "_done_ns", "_pend",
                 "_pend_ends", "_pend_times", "sent_t", "connect_ns")

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
        self.fast_times: list[int] = []  # while it streams: the events so far, as in ``fast``
        self.fast_data: list[bytes] = []
        # called from data_received (after the clock was read) with each batch of new events
        self.sink: Callable[[list[int], bytes], None] | None = None
        self._done_ns: int | None = None
        self._pend = b""
        self._pend_ends: list[int] = []
        self._pend_times: list[int] = []
        # the clock just before the request's bytes were handed to the socket (after any connect),
        # and the time spent opening a new connection for it (None: a kept-alive one was reused)
        self.sent_t: int | None = None
        self.connect_ns: int | None = None

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


    def _feed(self, data: bytes, t: int) -> int:
        """Step over the chunks completed by this read, in bulk: 1 body complete, 0 more to come,
        -1 the body is not one ``data: <line>`` SSE event per HTTP chunk (walk it in Python).

        All in C (``split``, ``count``, ``map``, ``join``), no Python bytecode per
        chunk. ``self._pend`` (bytes after the last complete chunk) always starts at a chunk
        boundary, so every complete (size line, payload) pair must satisfy ``int(size, 16) ==
        len(payload)``: a full check of the framing. The new events go to ``fast_times`` /
        ``fast_data`` and to ``sink(times, data)`` (``data``: the events as received, each
        ``b"data: <line>\\n\\n"``), so that nothing is left to do when the body ends.
        """
        pend = self._pend
        if not pend and self._done_ns is None:  # paced streams: a read is exactly one chunk, one event
            i = data.find(b"\r\n")
            if 0 < i < 9 and data.endswith(b"\n\n\r\n"):
                try:
                    size = int(data[:i], 16)
                except ValueError:
                    return -1
                if i + size + 4 == len(data):
                    payload = data[i + 2:-2]
                    if payload.count(b"\n") == 2:
                        if payload == _DONE or payload == _DONE_NOSP:
                            self._done_ns = t
                        else:
                            self.fast_times.append(t)
                            self.fast_data.append(payload)
                            if self.sink is not None:
                                self.sink([t], payload)
                        return 0
        if pend:
            buf = pend + data
            ends = [*self._pend_ends, len(buf)]
            times = [*self._pend_times, t]
        else:
            buf, ends, times = data, [len(data)], [t]
        parts = buf.split(b"\r\n")
        parts.pop()  # after the last CRLF: incomplete
        if len(parts) % 2:
            parts.pop()  # a size line whose payload is not complete yet
        hexes, payloads = parts[0::2], parts[1::2]
        lens = list(map(len, payloads))
        try:
            if list(map(int, hexes, repeat(16))) != lens:
                return -1
        except ValueError:  # chunk extensions, ...
            return -1
        n = len(payloads)
        complete = False
        if n and lens[-1] == 0:  # the last chunk: nothing may follow it
            if hexes[-1] != b"0" or buf[-5:] != _LAST_CHUNK or (n > 1 and not all(lens[:-1])) \
                    or sum(lens) + sum(map(len, hexes)) + 4 * n != len(buf):
                return -1
            complete = True
            n -= 1
            payloads.pop()
        elif 0 in lens:
            return -1
        consumed = sum(lens) + sum(map(len, hexes)) + 4 * len(hexes) if not complete else len(buf)
        if n:
            if self._done_ns is not None:
                return -1  # events after [DONE]
            # an event arrives with the read holding its chunk's last payload byte (size CRLF payload
            # CRLF). Only the first chunk can have started in an earlier read (``_pend``); the others
            # end after it, in this read.
            new_t = [t] * n
            if pend:
                new_t[0] = times[bisect_right(ends, len(hexes[0]) + lens[0] + 1)]
            if payloads[-1] == _DONE or payloads[-1] == _DONE_NOSP:
                self._done_ns = new_t.pop()
                payloads.pop()
                n -= 1
            if n:
                got = b"".join(payloads)
                # each payload is exactly one event: its only newlines are the blank line that ends it
                if got.count(b"\n") != 2 * n or not all(map(bytes.endswith, payloads, repeat(b"\n\n"))) \
                        or _DONE in payloads or _DONE_NOSP in payloads:
                    return -1  # [DONE] before the end: the general path drops what follows
                self.fast_times += new_t
                self.fast_data.append(got)
                if self.sink is not None:
                    self.sink(new_t, got)
        if complete:
            self.fast = (self.fast_times, b"".join(self.fast_data), self._done_ns)
            return 1
        if consumed < len(buf):
            self._pend = buf[consumed:]
            keep = [k for k, e in enumerate(ends) if e > consumed]  # the reads that carried it
            self._pend_ends = [ends[k] - consumed for k in keep]
            self._pend_times = [times[k] for k in keep]
        elif pend:
            self._pend, self._pend_ends, self._pend_times = b"", [], []
        return 0

    def _materialize(self) -> None:
        """Walk the chunked framing of a lazily received body (fills ``spans``)."""
        if not self.lazy:
            return
        self.lazy = False
        w = _Conn(_NO_BUF)
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


class _Conn(asyncio.BufferedProtocol):
    """One keep-alive connection; parses the response head and steps over the body framing.

    A :class:`asyncio.BufferedProtocol`: the loop ``recv_into``\\s the client's one receive buffer
    (reads of one loop never overlap), and :meth:`buffer_updated` copies out just the bytes that
    came. With :class:`asyncio.Protocol` every read allocated a fresh 256 KiB ``bytes`` (above
    glibc's mmap threshold: an ``mmap``, page faults and a shrink per read, several microseconds
    of kernel time).
    """

    _request_method = "GET"

    def __init__(self, buf: memoryview | None = None) -> None:
        self._buf = buf if buf is not None else memoryview(bytearray(_RECV_SIZE))
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

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not TCP
                pass

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buf

    def buffer_updated(self, nbytes: int) -> None:
        t = self.clock()  # first: before any copying or parsing
        self.data_received(bytes(self._buf[:nbytes]), t)

    def data_received(self, data: bytes, t: int | None = None) -> None:
        if t is None:
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
                if ex.lazy:  # the common case, in bulk; else walk the framing in Python from the start
                    got = ex._feed(data, t)
                    if got == 1:  # (still lazy: body() walks the framing if it is ever asked for)
                        ex.complete = True
                        self._finish()
                    elif got < 0:
                        ex.lazy = False
                        ex.fast_times, ex.fast_data = [], []
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
        self._recv_buf = memoryview(bytearray(_RECV_SIZE))  # shared by this client's connections
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
            buf = self._recv_buf
            _, conn = await loop.create_connection(lambda: _Conn(buf), sockaddr[0], sockaddr[1], family=family,
                                                   proto=proto)
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

"""HTTP/1.1 response framing for the ``raw`` transport, built to be a clock: framing only, what the
body means is :mod:`.sse`'s business.

Why not aiohttp on the measuring path: every network read there passes through a stream reader,
a future and a task switch before the caller can take a timestamp, and the caller's task is woken
once per read. Here ``clock()`` is read first thing in :meth:`Connection.buffer_updated`, the bytes are
stored as they are (one ``list.append``), and nobody is woken until the whole response is in: the
caller awaits one future per request. A chunked body is first stepped over in bulk, with C loops
only (:meth:`Exchange._feed`), and each read's complete chunk payloads go to ``Exchange.sink``
(:class:`.sse.ChunkEvents`). At the first byte that does not fit, or when the sink declines, the
framing is walked in Python from the start (a ``find`` and an ``int`` per HTTP chunk, from then on
per read), and the payload is handed over read by read afterwards (:meth:`Exchange.payload_reads`).
``Content-Length``, ``Transfer-Encoding: chunked`` and close-delimited bodies; 1xx heads skipped.
"""

from __future__ import annotations

import asyncio
import socket
import time
from bisect import bisect_right
from enum import IntEnum
from itertools import repeat
from typing import Protocol

from ...contract import Clock
from .sse import BODY_LIMIT, EVENT_LIMIT, event_too_large

_HEAD_LIMIT = 64 * 1024
_LAST_CHUNK = b"0\r\n\r\n"
RECV_SIZE = 256 * 1024  # as asyncio's own reads
_NO_BUF = memoryview(b"")


class Body(IntEnum):
    """What the connection is reading."""

    HEAD = 0  # the response head
    CHUNKED = 1  # Transfer-Encoding: chunked
    LENGTH = 2  # Content-Length
    UNTIL_CLOSE = 3  # the body ends when the server closes the connection


class Feed(IntEnum):
    """What one read did to a chunked body stepped over in bulk (:meth:`Exchange._feed`)."""

    MORE = 0  # more to come
    COMPLETE = 1  # the last chunk arrived
    WALK = 2  # not plain chunks, or the sink declined them: walk the framing in Python


_HEAD, _CHUNKED, _LENGTH, _UNTIL_CLOSE = Body.HEAD, Body.CHUNKED, Body.LENGTH, Body.UNTIL_CLOSE
_MORE, _COMPLETE, _WALK = Feed.MORE, Feed.COMPLETE, Feed.WALK


class RawHTTPError(Exception):
    """A transport-level failure; ``str()`` is short and carries no secrets."""


class ConnectError(RawHTTPError):
    def __init__(self, host: str, port: int, refused: bool, cause: BaseException) -> None:
        super().__init__(f"{'connection refused' if refused else 'cannot connect'}: {host}:{port} ({cause})")
        self.host, self.port, self.refused = host, port, refused


class ProtocolError(RawHTTPError):
    """The server's bytes are not HTTP/1.x as we understand it."""


class TooLargeError(ProtocolError):
    """A body or SSE event over its limit; ``str()`` is the record's cause."""


class ChunkSink(Protocol):
    """Takes a chunked body's payloads as they complete; False: not the shape it expects."""

    def chunk(self, t: int, payload: bytes) -> bool: ...

    def chunks(self, times: list[int], payloads: list[bytes]) -> bool: ...


class Exchange:
    """One request and its response as received: raw body reads with their arrival times."""

    __slots__ = ("status", "reason", "headers", "times", "reads", "spans", "complete", "lost", "keep_alive",
                 "head_t", "_body_len", "lazy", "bulk", "sink", "_pend", "_pend_len", "_pend_ends", "_pend_times",
                 "_need", "sent_t", "connect_ns")

    def __init__(self) -> None:
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.times: list[int] = []  # arrival of each body read (clock at buffer_updated)
        self.reads: list[bytes] = []  # the body bytes of each read, framing included
        self.spans: list[list[int]] = []  # payload [start, end) in body coordinates (chunked framing removed)
        self.complete = False
        self.lost = False  # the connection ended before the response was complete
        self.keep_alive = True
        self.head_t: int | None = None  # arrival of the read that completed the head
        self._body_len = 0
        self.lazy = False  # chunked body whose framing was not walked yet (``spans`` not filled)
        self.bulk = False  # chunked body stepped over in bulk so far: every payload went to ``sink``
        # called from buffer_updated (after the clock was read) with each read's completed chunks
        self.sink: ChunkSink | None = None
        self._pend: list[bytes] = []  # the reads (pieces) after the last complete chunk (from a chunk boundary)
        self._pend_len = 0
        self._pend_ends: list[int] = []  # where each of those reads ends in them, and when it arrived
        self._pend_times: list[int] = []
        self._need = 0  # bytes the pending chunk still needs before it completes (0: not known)
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

    def payload_reads(self) -> list[tuple[int, bytes]]:
        """The payload received so far, read by read: ``[(arrival, payload bytes of that read)]``
        (reads that carried framing only are left out)."""
        self._materialize()
        out: list[tuple[int, bytes]] = []
        spans, k, pos = self.spans, 0, 0
        for t, r in zip(self.times, self.reads, strict=True):
            end = pos + len(r)
            pieces: list[bytes] = []
            while k < len(spans) and spans[k][0] < end:
                s, e = spans[k]
                a, b = max(s, pos), min(e, end)
                if b > a:
                    pieces.append(r[a - pos:b - pos])
                if e > end:
                    break  # the span goes on in the next read
                k += 1
            if pieces:
                out.append((t, pieces[0] if len(pieces) == 1 else b"".join(pieces)))
            pos = end
        return out

    def _feed(self, data: bytes, t: int) -> Feed:
        """Step over the chunks completed by this read, in bulk, and hand their payloads to ``sink``.

        All in C (``split``, ``map``, ``join``), no Python bytecode per chunk. ``self._pend`` (bytes
        after the last complete chunk) always starts at a chunk boundary, so every complete (size
        line, payload) pair must satisfy ``int(size, 16) == len(payload)``: a full check of the
        framing (a payload holding CRLF fails it, and the framing is walked instead).
        """
        if self._need > len(data):  # a big chunk still incomplete: keep the read, look at nothing (linear)
            self._pend.append(data)
            self._pend_len += len(data)
            self._pend_ends.append(self._pend_len)
            self._pend_times.append(t)
            self._need -= len(data)
            return _MORE
        sink = self.sink
        pend = self._pend
        if not pend:  # paced streams: a read is exactly one chunk
            i = data.find(b"\r\n")
            if 0 < i < 9 and data.endswith(b"\r\n"):
                try:
                    size = int(data[:i], 16)
                except ValueError:
                    return _WALK
                if size and i + size + 4 == len(data):
                    return _MORE if sink is None or sink.chunk(t, data[i + 2:-2]) else _WALK
        if pend:
            buf = b"".join([*pend, data])
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
                return _WALK
        except ValueError:  # chunk extensions, ...
            return _WALK
        n = len(payloads)
        complete = False
        if n and lens[-1] == 0:  # the last chunk: nothing may follow it
            if hexes[-1] != b"0" or buf[-5:] != _LAST_CHUNK or (n > 1 and not all(lens[:-1])) \
                    or sum(lens) + sum(map(len, hexes)) + 4 * n != len(buf):
                return _WALK
            complete = True
            n -= 1
            payloads.pop()
        elif 0 in lens:
            return _WALK
        if n:
            # a chunk arrives with the read holding its last payload byte (size CRLF payload CRLF).
            # Only the first chunk can have started in an earlier read (``_pend``).
            new_t = [t] * n
            if pend:
                new_t[0] = times[bisect_right(ends, len(hexes[0]) + lens[0] + 1)]
            if sink is not None and not sink.chunks(new_t, payloads):
                return _WALK
        if complete:
            return _COMPLETE
        consumed = sum(lens) + sum(map(len, hexes)) + 4 * len(hexes)
        if consumed < len(buf):
            rest = buf[consumed:]
            self._pend, self._pend_len = [rest], len(rest)
            keep = [k for k, e in enumerate(ends) if e > consumed]  # the reads that carried it
            self._pend_ends = [ends[k] - consumed for k in keep]
            self._pend_times = [times[k] for k in keep]
            self._need = _missing(rest)
        elif pend:
            self._pend, self._pend_len, self._pend_ends, self._pend_times, self._need = [], 0, [], [], 0
        return _MORE

    def _materialize(self) -> None:
        """Walk the chunked framing of a lazily received body (fills ``spans``)."""
        if not self.lazy:
            return
        self.lazy = False
        w = Connection(_NO_BUF)
        w.ex, w._mode = self, _CHUNKED
        try:
            w._chunked(b"".join(self.reads), 0)
        except (ProtocolError, ValueError):
            self.lost = True


def _missing(rest: bytes) -> int:
    """Bytes still to come before the chunk that ``rest`` starts (size line, payload, CRLF) is
    complete; 0 when its size line is not complete (or not a size: the next read walks it)."""
    i = rest.find(b"\r\n", 0, 18)
    if i <= 0:
        return 0
    try:
        size = int(rest[:i], 16)
    except ValueError:
        return 0
    return max(0, i + 2 + size + 2 - len(rest))


class Connection(asyncio.BufferedProtocol):
    """One keep-alive connection; parses the response head and steps over the body framing.

    A :class:`asyncio.BufferedProtocol`: the loop ``recv_into``\\s the client's one receive buffer
    (reads of one loop never overlap), and :meth:`buffer_updated` copies out just the bytes that
    came. With :class:`asyncio.Protocol` every read allocated a fresh 256 KiB ``bytes`` (above
    glibc's mmap threshold: an ``mmap``, page faults and a shrink per read, several microseconds
    of kernel time).
    """

    _request_method = "GET"

    def __init__(self, buf: memoryview | None = None) -> None:
        self._buf = buf if buf is not None else memoryview(bytearray(RECV_SIZE))
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.clock: Clock = time.perf_counter_ns
        self.ex: Exchange | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.reused = False
        self._head = b""
        self._mode = _HEAD
        self._left = 0  # content-length bytes left
        self._skip = 0  # chunked: bytes to step over (payload + CRLF)
        self._line = b""  # chunked: partial size line / trailer carried to the next read
        self._pos = 0  # body bytes received (body coordinates of the next read)
        self._open = 0  # bytes of a success body since its last blank line (the SSE event being received)

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
            if self._mode is _HEAD:
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
                    self._wake()
                    return
                if not data:
                    return
            ex.times.append(t)
            ex.reads.append(data)
            base = self._pos
            self._pos += len(data)
            ex._body_len = self._pos
            self._bound(data, ex.status)
            mode = self._mode
            if mode is _CHUNKED:
                if ex.bulk:  # the common case, in bulk; else walk the framing in Python from the start
                    got = ex._feed(data, t)
                    if got is _COMPLETE:  # (still lazy: body() walks the framing if it is ever asked for)
                        ex.complete = True
                        self._wake()
                    elif got is _WALK:
                        ex.bulk = ex.lazy = False
                        self._chunked(b"".join(ex.reads), 0)
                    return
                self._chunked(data, base)
            elif mode is _LENGTH:
                self._left -= len(data)
                if self._left <= 0:
                    if self._left < 0:
                        raise ProtocolError("more body bytes than Content-Length")
                    ex.complete = True
                    self._wake()
        except (ProtocolError, ValueError) as e:
            self._fail(e)

    def _bound(self, data: bytes, status: int) -> None:
        """Bodies over :data:`.sse.BODY_LIMIT` (a GET's over :data:`.sse.EVENT_LIMIT`) and SSE events over :data:`.sse.EVENT_LIMIT` end the
        exchange (:class:`TooLargeError`, its cause named). An event's end is a blank line found in
        this read; a blank line cut by a read boundary counts the event on, a bound not an exact size."""
        limit = EVENT_LIMIT if self._request_method == "GET" else BODY_LIMIT  # a GET: /metrics, /version
        if self._pos > limit:
            raise TooLargeError(f"response body over {limit >> 20} MiB (not read further)")
        if status < 300:
            j = max(data.rfind(b"\n\n"), data.rfind(b"\n\r\n"))
            self._open = self._open + len(data) if j < 0 else len(data) - j
            if self._open > EVENT_LIMIT:
                raise TooLargeError(str(event_too_large(self._open)))

    def eof_received(self) -> bool | None:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.ex
        if ex is not None and not ex.complete:
            if self._mode is _UNTIL_CLOSE and ex.head_done:
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
            self._mode = _CHUNKED
            ex.lazy = ex.bulk = True
        elif "content-length" in headers:
            self._mode = _LENGTH
            self._left = int(headers["content-length"])
            ex.spans.append([0, self._left])
            if self._left == 0 or self._request_method == "HEAD" or status in (204, 304):
                ex.complete = True
        elif status in (204, 304) or self._request_method == "HEAD":
            ex.complete = True
        else:
            self._mode = _UNTIL_CLOSE
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
                self._wake()
                return
            start = base + j + 2
            spans.append([start, start + size])
            i = j + 2
            skip = size + 2

    # -- exchange control ------------------------------------------------------------------
    def begin(self, ex: Exchange, clock: Clock, method: str, waiter: asyncio.Future[None]) -> None:
        self.ex, self.clock, self.waiter = ex, clock, waiter
        self._request_method = method
        self._mode, self._head, self._left, self._skip, self._line, self._pos = _HEAD, b"", 0, 0, b"", 0
        self._open = 0

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

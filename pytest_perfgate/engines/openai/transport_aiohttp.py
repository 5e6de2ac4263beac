"""Transport ``aiohttp``: the aiohttp client, for ``https://`` and for hosts behind an environment
proxy. Every read is stamped as soon as ``readany`` returns and split into SSE events as it comes;
events are decoded after the stream (:meth:`.transport.Response.decode`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp

from ...contract import Clock
from .sse import BODY_LIMIT, EVENT_LIMIT, TooLarge
from .transport import Response, TransportError

GET_LIMIT = EVENT_LIMIT  # bytes of a GET body (/metrics, /version); over it: not readable (None), as the raw transport
_ERROR_BODY_LIMIT = 1 << 16  # bytes of an HTTP error body read (the cause shows 200 characters)


class AiohttpTransport:
    """:class:`.transport.Transport` over one aiohttp session, created lazily on the engine loop."""

    kind = "aiohttp"

    def __init__(self, base_url: str, headers: Mapping[str, str], trust_env: bool) -> None:
        self._base = base_url
        self._headers = dict(headers)
        self._trust_env = trust_env
        self._session: aiohttp.ClientSession | None = None

    async def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=aiohttp.ClientTimeout(total=None),
                auto_decompress=False, read_bufsize=2**18, trust_env=self._trust_env,
                trace_configs=[_send_trace()],
            )
        return self._session

    async def get(self, path: str, timeout: float) -> tuple[int, bytes] | None:
        session = await self._ensure_session()
        try:
            async with session.get(self._base + path, timeout=aiohttp.ClientTimeout(total=timeout),
                                   allow_redirects=False) as r:
                parts: list[bytes] = []
                size = 0  # a server's /metrics or /version: read up to the bound, never whole
                while size <= GET_LIMIT:
                    got = await r.content.read(GET_LIMIT + 1 - size)
                    if not got:
                        return r.status, b"".join(parts)
                    parts.append(got)
                    size += len(got)
                return None
        except (TimeoutError, aiohttp.ClientError):
            return None

    async def stream(self, path: str, payload: bytes, clock: Clock, response: Response) -> None:
        session = await self._ensure_session()
        stamps = _Stamps(clock)
        splitter = response.splitter
        try:
            async with session.post(self._base + path, data=payload, trace_request_ctx=stamps,
                                    allow_redirects=False) as resp:  # the key goes to base_url's host only
                stamps.into(response)
                response.status = resp.status
                if resp.status >= 400:
                    response.body = await resp.content.read(_ERROR_BODY_LIMIT)
                    return
                if 300 <= resp.status < 400:
                    response.location = resp.headers.get("Location")
                    return
                readany = resp.content.readany
                total = 0
                while True:
                    data = await readany()
                    t = clock()  # first: before any parsing
                    if not data:
                        break
                    total += len(data)
                    if total > BODY_LIMIT:
                        raise TooLarge(f"response body over {BODY_LIMIT >> 20} MiB (not read further)")
                    if splitter.feed(data, t):
                        await _drain(resp.content)
                        return
                splitter.close(clock())
        except TooLarge as e:
            raise TransportError(str(e), keep_events=True) from None
        except aiohttp.ClientConnectorError as e:
            cause = "connection refused" if isinstance(e.os_error, ConnectionRefusedError) else "cannot connect"
            raise TransportError(f"{cause}: {e.host}:{e.port}") from None
        except aiohttp.ClientPayloadError:
            raise TransportError(f"connection closed mid-stream: after {len(splitter.events)} events", True) from None
        except aiohttp.ServerDisconnectedError:
            raise TransportError(f"connection closed mid-stream: server disconnected after {len(splitter.events)} events",
                                 True) from None
        except aiohttp.ClientError as e:
            raise TransportError(f"connection error: {type(e).__name__}: {e}", True) from None
        finally:
            stamps.into(response)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


async def _drain(content: aiohttp.StreamReader) -> None:
    """Consume the body's end after [DONE] so that the connection can be reused."""
    if not content.is_eof():
        try:
            await asyncio.wait_for(content.read(), 1.0)
        except TimeoutError:
            pass


class _Stamps:
    """The send stamp and connect time, filled by :func:`_send_trace`'s hooks."""

    __slots__ = ("clock", "connect_start", "connect_ns", "sent")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.connect_start: int | None = None
        self.connect_ns: int | None = None
        self.sent: int | None = None

    def into(self, response: Response) -> None:
        response.sent_ns, response.connect_ns = self.sent, self.connect_ns


def _send_trace() -> aiohttp.TraceConfig:
    """aiohttp hooks: the time spent opening a new connection, and the send stamp right before
    the request head is written (after the connection is ready)."""

    def stamps(ctx: Any) -> _Stamps | None:
        st = getattr(ctx, "trace_request_ctx", None)
        return st if isinstance(st, _Stamps) else None

    async def create_start(session: Any, ctx: Any, params: Any) -> None:
        st = stamps(ctx)
        if st is not None:
            st.connect_start = st.clock()

    async def create_end(session: Any, ctx: Any, params: Any) -> None:
        st = stamps(ctx)
        if st is not None and st.connect_start is not None:
            st.connect_ns = st.clock() - st.connect_start

    async def headers_sent(session: Any, ctx: Any, params: Any) -> None:
        st = stamps(ctx)
        if st is not None:
            st.sent = st.clock()

    tc = aiohttp.TraceConfig()
    tc.on_connection_create_start.append(create_start)
    tc.on_connection_create_end.append(create_end)
    tc.on_request_headers_sent.append(headers_sent)
    return tc

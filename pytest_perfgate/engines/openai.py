"""Engine kind ``openai``: any OpenAI-compatible streaming server (vLLM, SGLang, TGI, llama.cpp).

Arguments (``[engines.NAME]`` table): ``base_url`` (``http://127.0.0.1:8000``), ``model``,
``api`` (``"completions"`` | ``"chat"``; a request's own ``api`` wins), ``api_key_env`` (the *name*
of an environment variable holding the key; the key is never stored in :meth:`info`, logs or
errors), ``timeout`` (seconds per request, default 600), ``metrics_path`` (``"/metrics"``),
``tokenizer`` (path or name for exact-length prompts; default: ``model``) and
``continuous_usage_stats`` (default true: ask vLLM/SGLang for cumulative usage in every chunk, which
gives exact tokens per chunk under speculative decoding; servers that do not know the option
ignore it).

``transport`` (default ``"auto"``): ``"raw"`` is our own HTTP/1.1 client over
:class:`asyncio.Protocol` (:mod:`.rawhttp`), ``"aiohttp"`` the aiohttp client; ``"auto"`` takes
``raw`` for ``http://`` URLs and aiohttp for ``https://`` and for hosts reached through a proxy
from the environment (``HTTP_PROXY``/``NO_PROXY``; loopback hosts never are).

The send stamp (``RequestRecord.sent_ns``, the start of TTFT and E2E) is taken right before the
request is written to the socket, after the connection is ready; a request that had to open a new
connection first records that time apart in ``RequestRecord.connect_ns`` (None when it reused a
kept-alive one), so connection setup shows up in ``queue_time`` and ``connect_ns``, never in TTFT.

The measuring path: ``clock()`` is read as soon as a network read returns, *before* anything is
parsed (with ``raw``, first thing in ``data_received``; nothing else is woken per read). With
``raw``, in the common case (one ``data: <line>`` SSE event per HTTP chunk: vLLM, SGLang), each
read's complete chunks are then checked and decoded in bulk, in C loops (one ``split``, one
msgspec call for all of the read's events, see :meth:`.rawhttp.Exchange._feed`): a few
microseconds per read, spread over the stream, so that a run's ending streams do not pile their
parsing onto the other streams' last chunks. Any other body shape is kept as raw reads with their
arrival times and split into SSE events on ``b"\\n\\n"`` after the response is complete, each
event stamped with the read that completed it, then parsed (msgspec when installed, else orjson);
the aiohttp path parses after the stream too. Token counts per chunk come from the
server when it says (cumulative ``usage.completion_tokens``), else one per non-empty delta,
corrected by the final usage block (``RequestRecord.token_count_source``: ``"server"`` when the
output-token count came from the server's usage, ``"chunks"`` when only the chunks were counted).
"""

from __future__ import annotations

import asyncio
import os
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from ..contract import Clock, EngineError, Request, RequestRecord, run_sync
from .rawhttp import ConnectError, Exchange, RawClient, RawHTTPError

try:  # optional: a typed decoder is ~2x faster than orjson + dict lookups per chunk
    import msgspec
except ImportError:  # pragma: no cover - msgspec not installed
    msgspec = None  # type: ignore[assignment]

_EAGER_EVENTS = 8  # a read with at most this many events is decoded in data_received (see _Counter.feed)
_BODY_LIMIT = 200  # characters of an HTTP error body kept in record.error
_SUMMED_LABELS = frozenset({"model_name", "engine"})


class OpenAIEngine:
    """Client of one OpenAI-compatible server; one aiohttp session, created lazily on the loop."""

    kind = "openai"

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        self.name = name
        known = {"base_url", "model", "api", "api_key_env", "timeout", "metrics_path", "tokenizer",
                 "continuous_usage_stats", "transport"}
        unknown = set(args) - known
        if unknown:
            raise EngineError(f"engine {name!r}: unknown arguments {sorted(unknown)} (known: {sorted(known)})")
        if "base_url" not in args or "model" not in args:
            raise EngineError(f"engine {name!r} (openai): 'base_url' and 'model' are required")
        self.base_url = str(args["base_url"]).rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.model = str(args["model"])
        self.api = str(args.get("api", "completions"))
        if self.api not in ("completions", "chat"):
            raise EngineError(f"engine {name!r}: api must be 'completions' or 'chat', got {self.api!r}")
        self.api_key_env: str | None = args.get("api_key_env")
        try:
            self.timeout = float(args.get("timeout", 600.0))
        except (TypeError, ValueError):
            raise EngineError(f"[engines.{name}] timeout: must be a number of seconds, got {args.get('timeout')!r}") from None
        if not self.timeout > 0:
            raise EngineError(f"[engines.{name}] timeout: must be > 0, got {self.timeout}")
        self.metrics_path = str(args.get("metrics_path", "/metrics"))
        self.tokenizer_name = str(args.get("tokenizer") or self.model)
        self.continuous_usage_stats = bool(args.get("continuous_usage_stats", True))
        self._session: aiohttp.ClientSession | None = None
        self._headers: dict[str, str] = {"Content-Type": "application/json"}
        self._key: str | None = None
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if key is None:
                raise EngineError(f"engine {name!r}: environment variable {self.api_key_env} (api_key_env) is not set")
            self._key = key
            self._headers["Authorization"] = f"Bearer {key}"
        self._version: str | None = None
        self._tokenizer: Any = None
        self.transport = str(args.get("transport", "auto"))
        if self.transport not in ("auto", "raw", "aiohttp"):
            raise EngineError(f"engine {name!r}: transport must be 'auto', 'raw' or 'aiohttp', got {self.transport!r}")
        try:
            url = urlsplit(self.base_url)
            url.port  # noqa: B018 - raises for a bad port
        except ValueError as e:
            raise EngineError(f"[engines.{name}] base_url: cannot parse {self.base_url!r}: {e}") from None
        if url.scheme not in ("http", "https") or not url.hostname:
            raise EngineError(f"[engines.{name}] base_url: need http(s)://host[:port], got {self.base_url!r}")
        self._path_prefix = url.path.rstrip("/")
        self._raw: RawClient | None = None
        self._trust_env = False
        if url.scheme == "http" and url.hostname:
            proxied = self.transport == "auto" and _proxied(url.hostname)
            if self.transport == "raw" or (self.transport == "auto" and not proxied):
                self._raw = RawClient(url.hostname, url.port or 80, self._headers)
            self._trust_env = proxied
        elif self.transport == "raw":
            raise EngineError(f"engine {name!r}: transport 'raw' needs an http:// base_url, got {self.base_url!r}")

    # -- lifecycle ---------------------------------------------------------------------------
    async def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=aiohttp.ClientTimeout(total=None),
                auto_decompress=False, read_bufsize=2**18, trust_env=self._trust_env,
                trace_configs=[_send_trace()],
            )
        return self._session

    def start(self) -> None:
        """Open the session and read the server version (if ``/version`` exists)."""
        run_sync(self._start())

    async def _start(self) -> None:
        if self._raw is not None:
            if self._version is None:
                got = await self._raw_get("/version", 5)
                if got is not None and got[0] == 200:
                    try:
                        data = orjson.loads(got[1])
                    except orjson.JSONDecodeError:
                        data = None
                    if isinstance(data, dict) and "version" in data:
                        self._version = str(data["version"])
            return
        session = await self._ensure_session()
        if self._version is None:
            try:
                async with session.get(self.base_url + "/version", timeout=aiohttp.ClientTimeout(total=5)) as r:
                    if r.status == 200:
                        data = orjson.loads(await r.read())
                        if isinstance(data, dict) and "version" in data:
                            self._version = str(data["version"])
            except (TimeoutError, aiohttp.ClientError, orjson.JSONDecodeError):
                pass

    def stop(self) -> None:
        if self._raw is not None:
            raw = self._raw

            async def close() -> None:
                raw.close()

            run_sync(close())
        if self._session is not None and not self._session.closed:
            run_sync(self._session.close())
        self._session = None

    async def _raw_get(self, path: str, timeout: float) -> tuple[int, bytes] | None:
        """GET over the raw client: (status, body), or None when the server can't be reached."""
        assert self._raw is not None
        try:
            async with asyncio.timeout(timeout):
                ex = await self._raw.request("GET", self._path_prefix + path, None, _now)
        except (TimeoutError, RawHTTPError):
            return None
        if ex.lost or not ex.head_done:
            return None
        return ex.status, ex.body()

    # -- counters ----------------------------------------------------------------------------
    async def counters(self) -> dict[str, float]:
        """Counters and gauges of ``metrics_path``, flattened (see :func:`parse_prometheus`)."""
        if self._raw is not None:
            got = await self._raw_get(self.metrics_path, 30)
            if got is None or got[0] != 200:
                return {}
            return parse_prometheus(got[1].decode("utf-8", "replace"))
        session = await self._ensure_session()
        try:
            async with session.get(self.base_url + self.metrics_path, timeout=aiohttp.ClientTimeout(total=30)) as r:
                if r.status != 200:
                    return {}
                text = (await r.read()).decode("utf-8", "replace")
        except (TimeoutError, aiohttp.ClientError):
            return {}
        return parse_prometheus(text)

    # -- metadata ----------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """Kind, base URL, model, API, server version; the key's variable name, never the key."""
        return {
            "name": self.name, "kind": self.kind, "base_url": self.base_url, "model": self.model, "api": self.api,
            "api_key_env": self.api_key_env, "timeout": self.timeout, "metrics_path": self.metrics_path,
            "tokenizer": self.tokenizer_name, "continuous_usage_stats": self.continuous_usage_stats,
            "server_version": self._version, "transport": "raw" if self._raw is not None else "aiohttp",
        }

    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer  # lazy: heavy import

            self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_name)
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer().encode(text, add_special_tokens=False))

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    # -- generation --------------------------------------------------------------------------
    def _payload(self, request: Request, api: str) -> bytes:
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": request.max_tokens, "temperature": request.temperature,
            "stream": True, "ignore_eos": request.ignore_eos,
            "stream_options": {"include_usage": True, "continuous_usage_stats": self.continuous_usage_stats}
            if self.continuous_usage_stats else {"include_usage": True},
        }
        if api == "chat":
            if not isinstance(request.prompt, str):
                raise ValueError("the chat API needs a text prompt, got token ids")
            body["messages"] = [{"role": "user", "content": request.prompt}]
        else:
            body["prompt"] = request.prompt if isinstance(request.prompt, str) else list(request.prompt)
        body.update(request.extra)
        return orjson.dumps(body)

    async def generate(self, request: Request, record: RequestRecord, clock: Clock) -> None:
        """Stream one request; fill ``record``; faults become ``record.error`` (never raised)."""
        api = request.api or self.api
        record.tag = record.tag or request.tag
        record.expected_prompt_tokens = request.prompt_tokens
        try:
            payload = self._payload(request, api)
        except (ValueError, TypeError) as e:
            record.error = f"bad request: {e}"
            return
        endpoint = "/v1/chat/completions" if api == "chat" else "/v1/completions"
        if self._raw is not None:
            await self._generate_raw(self._path_prefix + endpoint, payload, record, clock, api)
            return
        url = self.base_url + endpoint
        session = await self._ensure_session()
        events: list[tuple[int, bytes]] = []
        stamps = _Stamps(clock)
        try:
            async with asyncio.timeout(self.timeout):
                record.sent_ns = clock()  # replaced by the stamp at the headers' write (after any connect)
                async with session.post(url, data=payload, trace_request_ctx=stamps) as resp:
                    stamps.into(record)
                    if resp.status >= 400:
                        body = (await resp.read()).decode("utf-8", "replace")
                        body = " ".join(self._redact(body).translate(_CONTROL).split())
                        if len(body) > _BODY_LIMIT:
                            body = body[:_BODY_LIMIT] + "..."
                        record.error = f"HTTP {resp.status}: {body}"
                        return
                    await _read_events(resp.content, events, clock, record)
        except TimeoutError:
            record.error = f"timeout: no complete answer within {self.timeout:g} s ({len(events)} events received)"
        except aiohttp.ClientConnectorError as e:
            cause = "connection refused" if isinstance(e.os_error, ConnectionRefusedError) else "cannot connect"
            record.error = f"{cause}: {e.host}:{e.port}"
        except aiohttp.ClientPayloadError:
            record.error = f"connection closed mid-stream: after {len(events)} events"
        except aiohttp.ServerDisconnectedError:
            record.error = f"connection closed mid-stream: server disconnected after {len(events)} events"
        except aiohttp.ClientError as e:
            record.error = self._redact(f"connection error: {type(e).__name__}: {e}")
        stamps.into(record)
        if record.error is None or events:
            _parse_events(events, record, api)

    async def _generate_raw(self, path: str, payload: bytes, record: RequestRecord, clock: Clock, api: str) -> None:
        """The raw-transport path: one future per request, events split and parsed afterwards."""
        assert self._raw is not None
        live: list[Exchange] = []
        counters: list[_Counter] = []

        def on_exchange(ex: Exchange) -> None:
            # parse each read's events as they come (after the read's clock): no burst at the end
            live.append(ex)
            counters.append(_Counter(api))
            ex.sink = counters[-1].feed

        try:
            async with asyncio.timeout(self.timeout):
                record.sent_ns = clock()  # replaced by the socket-write stamp once the request is out
                try:
                    ex = await self._raw.request("POST", path, payload, clock, on_exchange=on_exchange)
                finally:
                    _send_stamps(record, live)
        except TimeoutError:
            events: list[tuple[int, bytes]] = []
            if live and live[-1].head_done and live[-1].status < 400:
                events = live[-1].sse_events()[0]
            record.error = f"timeout: no complete answer within {self.timeout:g} s ({len(events)} events received)"
            if events:
                _parse_events(events, record, api)
            return
        except asyncio.CancelledError:
            # cancelled from outside (run budget, Ctrl-C): keep the chunks already received
            if live and live[-1].head_done and live[-1].status < 400:
                events = live[-1].sse_events()[0]
                record.error = f"cancelled: the run ended this request after {len(events)} events"
                if events:
                    _parse_events(events, record, api)
            else:
                record.error = "cancelled: the run ended this request before an answer"
            raise
        except ConnectError as e:
            record.error = f"{'connection refused' if e.refused else 'cannot connect'}: {e.host}:{e.port}"
            return
        except RawHTTPError as e:
            record.error = self._redact(f"connection error: {type(e).__name__}: {e}")
            return
        if not ex.head_done:
            record.error = "connection closed mid-stream: server disconnected after 0 events"
            return
        if ex.status >= 400:
            body = " ".join(self._redact(ex.body().decode("utf-8", "replace")).translate(_CONTROL).split())
            if len(body) > _BODY_LIMIT:
                body = body[:_BODY_LIMIT] + "..."
            record.error = f"HTTP {ex.status}: {body}"
            return
        if ex.fast is not None:  # the common case, checked and split in bulk by the client
            times, data, done_ns = ex.fast
            if done_ns is not None:
                record.end_ns = done_ns
            if not (counters and counters[-1].finish(record, len(times))):
                _parse_data(times, data, record, api)
            return
        events, done_ns = ex.sse_events()
        if done_ns is not None:
            record.end_ns = done_ns
        elif ex.lost:
            record.error = f"connection closed mid-stream: after {len(events)} events"
        if record.error is None or events:
            _parse_events(events, record, api)


class _Stamps:
    """The aiohttp path's send stamp and connect time, filled by :func:`_send_trace`'s hooks."""

    __slots__ = ("clock", "connect_start", "connect_ns", "sent")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.connect_start: int | None = None
        self.connect_ns: int | None = None
        self.sent: int | None = None

    def into(self, record: RequestRecord) -> None:
        if self.sent is not None:
            record.sent_ns = self.sent
        record.connect_ns = self.connect_ns


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


def _send_stamps(record: RequestRecord, live: list[Exchange]) -> None:
    """The raw client's send stamp (at the socket write) and connect time, into ``record``."""
    if live:
        ex = live[-1]
        if ex.sent_t is not None:
            record.sent_ns = ex.sent_t
        record.connect_ns = ex.connect_ns


def _now() -> int:
    import time

    return time.perf_counter_ns()


def _proxied(host: str) -> bool:
    """Would an environment proxy be used for ``http://host``? Loopback never is."""
    if host in ("localhost", "::1") or host.startswith("127."):
        return False
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get("http") or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass_environment(host, proxies)  # type: ignore[attr-defined]


async def _read_events(
    content: aiohttp.StreamReader, events: list[tuple[int, bytes]], clock: Clock, record: RequestRecord
) -> None:
    """Read the body; stamp every read before touching it; split into SSE events."""
    buf = b""
    readany = content.readany
    while True:
        data = await readany()
        t = clock()
        if not data:
            break
        buf = buf + data if buf else data
        if b"\r" in data:
            buf = buf.replace(b"\r\n", b"\n")
        start = 0
        while True:
            i = buf.find(b"\n\n", start)
            if i < 0:
                break
            ev = buf[start:i]
            start = i + 2
            if ev == b"data: [DONE]" or ev == b"data:[DONE]":
                record.end_ns = t
                await _drain(content)
                return
            events.append((t, ev))
        buf = buf[start:]
    if buf.strip():
        events.append((clock(), buf))


async def _drain(content: aiohttp.StreamReader) -> None:
    """Consume the body's end after [DONE] so that the connection can be reused."""
    if not content.is_eof():
        try:
            await asyncio.wait_for(content.read(), 1.0)
        except TimeoutError:
            pass


if msgspec is not None:
    class _Delta(msgspec.Struct, gc=False):
        content: str | None = None
        reasoning_content: str | None = None
        reasoning: str | None = None

    class _Choice(msgspec.Struct, gc=False):
        text: str | None = None
        delta: _Delta | None = None
        token_ids: list[int] | None = None
        finish_reason: str | None = None

    class _Usage(msgspec.Struct, gc=False):
        completion_tokens: int | None = None
        prompt_tokens: int | None = None

    class _Chunk(msgspec.Struct, gc=False):
        choices: list[_Choice] | None = None
        usage: _Usage | None = None
        error: Any = msgspec.UNSET

    _DECODE_MANY = msgspec.json.Decoder(list[_Chunk]).decode
    _DECODE_ERRORS: tuple[type[Exception], ...] = (msgspec.DecodeError,)
else:  # pragma: no cover
    _DECODE_MANY = None
    _DECODE_ERRORS = ()


def _parse_events(events: list[tuple[int, bytes]], record: RequestRecord, api: str) -> None:
    """Turn raw (arrival, event) pairs into chunks, counts, usage; set an error on bad streams.

    Fast path: when every event is one ``data: {...}`` line, the events are glued into one JSON
    array (``b"\\n\\ndata: "`` -> ``b","``, all in C) and decoded by one call of a typed msgspec
    decoder that reads only the fields used here. Anything else (other SSE shapes, JSON the
    decoder's types don't fit, no msgspec) falls to :func:`_parse_events_generic`, which gives the
    same answer.
    """
    n = len(events)
    if _DECODE_MANY is None or n == 0:
        _parse_events_generic(events, record, api)
        return
    times, evs = zip(*events, strict=True)
    joined = b"\n\n".join(evs)
    # every event starts with "data: " and holds no other newline: the separators are the only ones
    if not joined.startswith(b"data: ") or joined.count(b"\n") != 2 * (n - 1) \
            or joined.count(b"\n\ndata: ") != n - 1:
        _parse_events_generic(events, record, api)
        return
    if not _parse_array(times, b"[" + joined[6:].replace(b"\n\ndata: ", b",") + b"]", n, record, api):
        _parse_events_generic(events, record, api)


def _parse_data(times: list[int], data: bytes, record: RequestRecord, api: str) -> None:
    """:func:`_parse_events` for :attr:`.rawhttp.Exchange.fast`: ``data`` is the events as received,
    each ``b"data: <one line>\\n\\n"``, checked by the client."""
    if _DECODE_MANY is None or not times:
        _parse_events_generic(list(zip(times, data.split(b"\n\n")[:-1], strict=True)), record, api)
        return
    c = _Counter(api)
    c._decode(times, data)
    if not c.finish(record):
        _parse_events_generic(list(zip(times, data.split(b"\n\n")[:-1], strict=True)), record, api)


def _parse_array(times: Any, array: bytes, n: int, record: RequestRecord, api: str) -> bool:
    """Decode ``array`` (the ``n`` events' JSON as one array) and fill ``record``; False: not the fast case."""
    c = _Counter(api)
    c.feed_array(times, array, n)
    return c.finish(record)


class _Counter:
    """The fast parse, fed batch by batch while the stream runs (the raw client's ``sink``).

    Each batch is decoded by one call of a typed msgspec decoder (the events glued into one JSON
    array) that reads only the fields used here. ``ok`` turns False at the first batch that is not
    the fast case (other SSE shapes, JSON the decoder's types don't fit, an error event, no
    msgspec); then :meth:`finish` declines and the caller runs :func:`_parse_events_generic`, which
    gives the same answer.
    """

    __slots__ = ("chat", "chunk_ns", "chunk_tokens", "exact", "cumulative", "usage_out", "usage_in", "finish_reason",
                 "n", "ok", "pending")

    def __init__(self, api: str) -> None:
        self.chat = api == "chat"
        self.chunk_ns: list[int] = []
        self.chunk_tokens: list[int] = []
        self.exact = True
        self.cumulative = 0
        self.usage_out: int | None = None
        self.usage_in: int | None = None
        self.finish_reason: str | None = None
        self.n = 0
        self.ok = _DECODE_MANY is not None
        self.pending: list[tuple[list[int], bytes]] = []  # big batches, decoded in :meth:`finish`

    def feed(self, times: list[int], data: bytes) -> None:
        """``data``: ``len(times)`` events, each ``b"data: <one line>\\n\\n"`` (checked by the client).

        A read of a few events (a paced stream) is decoded at once, so that nothing piles up for
        the end of the stream; bigger batches (chunks arriving back-to-back) wait for
        :meth:`finish`, which keeps the client's reads few and large when it is the bottleneck.
        """
        if self.pending or len(times) > _EAGER_EVENTS:
            self.pending.append((times, data))
            return
        self._decode(times, data)

    def _decode(self, times: list[int], data: bytes) -> None:
        if self.ok:
            try:  # called from the client's data_received: never raise there
                self.feed_array(times, b"[" + data[6:-2].replace(b"\n\ndata: ", b",") + b"]", len(times))
            except Exception:  # noqa: BLE001 - the generic path will word whatever this is
                self.ok = False

    def feed_array(self, times: Any, array: bytes, n: int) -> None:
        if not self.ok:
            return
        assert _DECODE_MANY is not None
        try:
            chunks = _DECODE_MANY(array)
        except _DECODE_ERRORS:
            self.ok = False
            return
        if len(chunks) != n:  # an event held more than one JSON value
            self.ok = False
            return
        self.n += n
        chat = self.chat
        add_ns, add_tok = self.chunk_ns.append, self.chunk_tokens.append
        cumulative, usage_out, usage_in, finish = self.cumulative, self.usage_out, self.usage_in, self.finish_reason
        unset = msgspec.UNSET
        for t, c in zip(times, chunks, strict=True):
            choices = c.choices
            if c.error is not unset and not choices:
                self.ok = False  # the generic path words the error
                return
            cum: int | None = None
            u = c.usage
            if u is not None:
                cum = u.completion_tokens
                if u.prompt_tokens is not None:
                    usage_in = u.prompt_tokens
            has_text = False
            if choices:
                for ch in choices:
                    if chat:
                        d = ch.delta
                        text = (d.content or d.reasoning_content or d.reasoning) if d is not None else None
                    else:
                        text = ch.text
                    if text or ch.token_ids:
                        has_text = True
                    if ch.finish_reason:
                        finish = ch.finish_reason
                # vLLM holds back text of incomplete UTF-8 bytes: an empty delta whose cumulative
                # completion_tokens grew still carried tokens (the first chunk may be one of them)
                if not has_text and cum is not None and cum > cumulative:
                    has_text = True
            if has_text:
                add_ns(t)
                if cum is not None and cum >= cumulative:
                    add_tok(cum - cumulative)
                    cumulative = cum
                else:
                    self.exact = False
                    add_tok(1)
                if cum is not None:
                    usage_out = cum
            elif cum is not None:
                usage_out = cum
        self.cumulative, self.usage_out, self.usage_in, self.finish_reason = cumulative, usage_out, usage_in, finish

    def finish(self, record: RequestRecord, n_events: int | None = None) -> bool:
        """Fill ``record``; False (record untouched) when the stream was not the fast case or, with
        ``n_events``, when this counter did not see that many events."""
        for times, data in self.pending:
            self._decode(times, data)
        self.pending = []
        if not self.ok or (n_events is not None and self.n != n_events):
            return False
        _finish_record(record, self.n, self.chunk_ns, self.chunk_tokens, self.exact, self.usage_out, self.usage_in,
                       self.finish_reason)
        return True


def _parse_events_generic(events: list[tuple[int, bytes]], record: RequestRecord, api: str) -> None:
    """Any SSE shape, orjson, exact error messages (the reference for the fast path)."""
    chunk_ns: list[int] = []
    chunk_tokens: list[int] = []
    exact = True  # every chunk's token count came from the server
    cumulative = 0
    usage_out: int | None = None
    usage_in: int | None = None
    finish: str | None = None
    for t, ev in events:
        data_lines = [ln[5:].lstrip(b" ") for ln in ev.split(b"\n") if ln.startswith(b"data:")]
        if not data_lines:
            if all(ln.startswith(b":") or ln.startswith((b"event:", b"id:", b"retry:")) or not ln.strip()
                   for ln in ev.split(b"\n")):
                continue  # comment / keep-alive
            record.error = record.error or f"malformed SSE: event without data: {_short(ev)}"
            break
        raw = b"\n".join(data_lines)
        if raw == b"[DONE]":
            record.end_ns = record.end_ns or t
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            record.error = record.error or f"invalid JSON in SSE event: {_short(raw)}"
            break
        if not isinstance(obj, dict):
            record.error = record.error or f"invalid JSON in SSE event: not an object: {_short(raw)}"
            break
        if "error" in obj and not obj.get("choices"):
            err = obj["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            record.error = record.error or f"server error in stream: {_short(str(msg).encode())}"
            break
        usage = obj.get("usage")
        cum: int | None = None
        if isinstance(usage, dict):
            if usage.get("completion_tokens") is not None:
                cum = int(usage["completion_tokens"])
            if usage.get("prompt_tokens") is not None:
                usage_in = int(usage["prompt_tokens"])
        has_text = False
        for choice in obj.get("choices") or ():
            if api == "chat":
                delta = choice.get("delta") or {}
                text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
            else:
                text = choice.get("text")
            if text or choice.get("token_ids"):
                has_text = True
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
        if not has_text and obj.get("choices") and cum is not None and cum > cumulative:
            has_text = True  # tokens whose text vLLM holds back (incomplete UTF-8)
        if has_text:
            chunk_ns.append(t)
            if cum is not None and cum >= cumulative:
                chunk_tokens.append(cum - cumulative)
                cumulative = cum
            else:
                exact = False
                chunk_tokens.append(1)
        elif cum is not None:
            usage_out = cum  # the final usage-only chunk
        if cum is not None and has_text:
            usage_out = cum
    _finish_record(record, len(events), chunk_ns, chunk_tokens, exact, usage_out, usage_in, finish)


def _finish_record(
    record: RequestRecord, n_events: int, chunk_ns: list[int], chunk_tokens: list[int],
    exact: bool, usage_out: int | None, usage_in: int | None, finish: str | None,
) -> None:
    record.chunk_ns = chunk_ns
    record.chunk_tokens = chunk_tokens
    record.finish_reason = finish
    record.prompt_tokens = usage_in
    streamed = sum(chunk_tokens)
    if usage_out is not None:
        record.output_tokens = usage_out
        record.token_count_source = "server"
        # Without per-chunk counts, usage above the chunk count means multi-token chunks (the
        # surplus per chunk is unknown, chunk_tokens stay 1 each); below it is impossible.
        if record.error is None and (usage_out < len(chunk_ns) or (exact and usage_out != streamed)):
            record.error = f"usage disagrees: usage says {usage_out} output tokens, stream carried {streamed}"
    else:
        record.output_tokens = streamed
        record.token_count_source = "chunks"
    if record.error is None:
        if not chunk_ns:
            done = "[DONE]" if record.end_ns is not None else "no [DONE]"
            record.error = f"empty stream: no chunk carried output ({n_events} events, {done})"
        elif record.end_ns is None:
            record.error = f"stream ended without [DONE]: after {n_events} events"


def parse_prometheus(text: str) -> dict[str, float]:
    """Flatten Prometheus text: ``{name[{labels}]: value}`` for counters and gauges.

    Counter names lose ``_total`` (``_created`` samples are dropped); the ``model_name`` and
    ``engine`` labels are summed over; other labels stay, sorted, as ``name{k="v",...}``.
    Unparseable text gives ``{}``.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    try:
        for fam in text_string_to_metric_families(text):
            if fam.type not in ("counter", "gauge", "unknown"):
                continue
            for s in fam.samples:
                name = s.name
                if name.endswith("_created"):
                    continue
                if fam.type != "gauge" and name.endswith("_total"):
                    name = name[: -len("_total")]
                labels = sorted((k, v) for k, v in s.labels.items() if k not in _SUMMED_LABELS)
                if labels:
                    name += "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
                out[name] = out.get(name, 0.0) + float(s.value)
    except ValueError:
        return {}
    return out


_CONTROL = {c: " " for c in [*range(0x00, 0x20), 0x7F]}


def _short(b: bytes, limit: int = 80) -> str:
    """One printable line: control characters (ESC, NUL, ...) become spaces, whitespace folds."""
    s = " ".join(b.decode("utf-8", "replace").translate(_CONTROL).split())
    return s if len(s) <= limit else s[:limit] + "..."


def create(name: str, args: Mapping[str, Any]) -> OpenAIEngine:
    """Factory registered for kind ``openai``."""
    return OpenAIEngine(name, args)

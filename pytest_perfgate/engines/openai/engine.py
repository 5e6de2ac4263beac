"""Engine kind ``openai``: any OpenAI-compatible streaming server (vLLM, SGLang, TGI, llama.cpp,
``transformers serve``, a strict OpenAI-spec server).

Arguments (``[engines.NAME]`` table): ``base_url`` (``http://127.0.0.1:8000``), ``model``,
``api`` (``"completions"`` | ``"chat"``; a request's own ``api`` wins), ``api_key_env`` (the *name*
of an environment variable holding the key; the key is never stored in :meth:`info`, logs or
errors), ``timeout`` (seconds per request, default 600), ``metrics_path`` (``"/metrics"``),
``tokenizer`` (path or name for exact-length prompts; default: ``model``) and
``continuous_usage_stats`` (default true: ask vLLM/SGLang for cumulative usage in every chunk, which
gives exact tokens per chunk under speculative decoding; sent only where the server takes it, see
``dialect``).

``dialect`` (default ``"auto"``): which of vLLM's extensions to send (``ignore_eos``,
``stream_options.continuous_usage_stats``, token-id prompts; :mod:`.dialect`). ``"vllm"`` sends them
all, ``"openai"`` none (token-id prompts are detokenized by the engine's tokenizer and sent as
text), ``"auto"`` probes the server at start with one-token requests and drops each field a 400/422
names (at start or on any later request, then remembered for the session). Without ``ignore_eos``
output lengths are not forced: a request may stop at end-of-sequence before ``max_tokens``, TPOT and
throughput use the tokens that came, and :meth:`info` says ``output_lengths``. ``ready_timeout``
(seconds, default 30): :meth:`start` waits this long for the server to answer (``GET /health``,
``GET /v1/models``) and otherwise fails naming the URL (:mod:`.ready`). What the start learned
(dialect, a stream without ``data: [DONE]``, no counters at ``metrics_path``) is in
:attr:`OpenAIEngine.start_notes`, said once when the engine is ready, and in :meth:`info`.

A stream that ends with a ``finish_reason`` and the end of the body is complete, ``data: [DONE]``
or not (``transformers serve`` sends none).

``transport`` (default ``"auto"``): ``"raw"`` is our own HTTP/1.1 client
(:mod:`.transport_raw`), ``"aiohttp"`` the aiohttp client (:mod:`.transport_aiohttp`); ``"auto"``
takes ``raw`` for ``http://`` URLs and aiohttp for ``https://`` and for hosts reached through a
proxy from the environment (``HTTP_PROXY``/``NO_PROXY``; loopback hosts never are).

The send stamp (``RequestRecord.sent_ns``, the start of TTFT and E2E) is taken right before the
request is written to the socket, after the connection is ready; a request that had to open a new
connection first records that time apart in ``RequestRecord.connect_ns`` (None when it reused a
kept-alive one), so connection setup shows up in ``queue_time`` and ``connect_ns``, never in TTFT.
Every network read is stamped by ``clock()`` before anything is parsed (:mod:`.http1`,
:mod:`.transport_aiohttp`); :mod:`.sse` turns the stamped events into chunks and token counts.
"""

from __future__ import annotations

import asyncio
import os
import sys
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from ...contract import Clock, EngineError, Request, RequestRecord, run_sync
from ...runtime.redaction import add_secret, clean
from ..prometheus import parse_prometheus
from . import ready
from .dialect import SETTINGS, Dialect, reason, rejected
from .transport import Response, Transport, TransportError

_BODY_LIMIT = 200  # characters of an HTTP error body kept in record.error
_ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_KNOWN = frozenset({"base_url", "model", "api", "api_key_env", "timeout", "metrics_path", "tokenizer",
                    "continuous_usage_stats", "transport", "dialect", "ready_timeout"})
_TEXT_CACHE = 4096  # token-id prompts kept as detokenized text (prompts cycle through a run)
# (base_url, model, api, server version) -> the dialect learned there ("remembered for the session":
# an engine stopped for another and started again neither probes nor says it all again)
_LEARNED: dict[tuple[str, str, str, str | None], Dialect] = {}


class OpenAIEngine:
    """Client of one OpenAI-compatible server through one :class:`.transport.Transport`."""

    kind = "openai"

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        self.name = name
        self._args = dict(args)  # a client worker process rebuilds this engine from them (worker_spec)
        unknown = set(args) - _KNOWN
        if unknown:
            raise EngineError(f"engine {name!r}: unknown arguments {sorted(unknown)} (known: {sorted(_KNOWN)})")
        if "base_url" not in args or "model" not in args:
            raise EngineError(f"engine {name!r} (openai): 'base_url' and 'model' are required")
        self.base_url = str(args["base_url"]).rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.model = str(args["model"])
        self.api = str(args.get("api", "completions"))
        if self.api not in _ENDPOINTS:
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
        setting = str(args.get("dialect", "auto"))
        if setting not in SETTINGS:
            raise EngineError(f"[engines.{name}] dialect: must be one of {', '.join(map(repr, SETTINGS))}, got {setting!r}")
        self.dialect = Dialect.of(setting)
        try:
            self.ready_timeout = float(args.get("ready_timeout", 30.0))
        except (TypeError, ValueError):
            raise EngineError(f"[engines.{name}] ready_timeout: must be a number of seconds, got {args.get('ready_timeout')!r}") from None
        if not self.ready_timeout > 0:
            raise EngineError(f"[engines.{name}] ready_timeout: must be > 0, got {self.ready_timeout}")
        # a server that answers readiness but hangs on completions holds the start and each warm-up
        # request this long, not the request timeout (issue 31)
        self.probe_timeout = min(self.timeout, self.ready_timeout)
        self.warmup_timeout = min(self.timeout, 2 * self.ready_timeout)
        self.waiting_for = ""  # what the start waits for now (the engine manager's progress line)
        self.start_notes: list[str] = []  # what start() learned, said once by the engine manager
        self.no_counters = False  # metrics_path did not answer at start: counters() asks no more
        self._texts: dict[tuple[int, ...], str] = {}
        self._started = False
        headers: dict[str, str] = {"Content-Type": "application/json"}
        self._key: str | None = None
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if key is None:
                raise EngineError(f"engine {name!r}: environment variable {self.api_key_env} (api_key_env) is not set")
            self._key = key
            add_secret(key)  # masked in every cause and note from now on (runtime.redaction.clean)
            headers["Authorization"] = f"Bearer {key}"
        self._version: str | None = None
        self._tokenizer: Any = None
        self.transport = self._make_transport(str(args.get("transport", "auto")), headers)

    def _make_transport(self, choice: str, headers: Mapping[str, str]) -> Transport:
        if choice not in ("auto", "raw", "aiohttp"):
            raise EngineError(f"engine {self.name!r}: transport must be 'auto', 'raw' or 'aiohttp', got {choice!r}")
        try:
            url = urlsplit(self.base_url)
            url.port  # noqa: B018 - raises for a bad port
        except ValueError as e:
            raise EngineError(f"[engines.{self.name}] base_url: cannot parse {self.base_url!r}: {e}") from None
        if url.scheme not in ("http", "https") or not url.hostname:
            raise EngineError(f"[engines.{self.name}] base_url: need http(s)://host[:port], got {self.base_url!r}")
        if url.scheme != "http" and choice == "raw":
            raise EngineError(f"engine {self.name!r}: transport 'raw' needs an http:// base_url, got {self.base_url!r}")
        proxied = url.scheme == "http" and choice == "auto" and _proxied(url.hostname)
        if url.scheme == "http" and (choice == "raw" or (choice == "auto" and not proxied)):
            from .transport_raw import RawTransport

            return RawTransport(url.hostname, url.port or 80, headers, url.path.rstrip("/"))
        from .transport_aiohttp import AiohttpTransport  # lazy: aiohttp only where it is used

        return AiohttpTransport(self.base_url, headers, trust_env=proxied)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Wait for the server to answer, read its version (``/version``), learn its dialect
        (``dialect = "auto"``) and whether it has counters; the findings go to :attr:`start_notes`."""
        run_sync(self._start())
        for note in self.start_notes:
            print(f"perfgate: engine {self.name!r}: {clean(note)}", flush=True)  # the engine log

    async def _start(self) -> None:
        if self._started:
            return
        await ready.wait_ready(self)
        got = await self.transport.get("/version", 5)
        if got is not None and got[0] == 200:
            try:
                data = orjson.loads(got[1])
            except orjson.JSONDecodeError:
                data = None
            if isinstance(data, dict) and "version" in data:
                self._version = clean(str(data["version"]), 100)
        key = (self.base_url, self.model, self.api, self._version)
        if self.dialect.learns and key in _LEARNED:  # a restart in this session: what was learned holds
            self.dialect = _LEARNED[key]
            await ready.counters_note(self)  # sets no_counters (said at the first start)
            self.start_notes = [f"dialect {self.dialect.name} (as learned at this server's first start in this session)"]
            self._started = True
            return
        d = self.dialect
        if d.learns:
            await ready.probe(self)
            _LEARNED[key] = d
        notes = [f"dialect {d.decided}", *d.notes]
        if d.done is False:
            notes.append("streams end without data: [DONE]; a finish_reason and the end of the body complete them")
        lengths = d.lengths_note()
        if lengths:
            notes.append(lengths)
        counters = await ready.counters_note(self)
        if counters:
            notes.append(counters)
        d.notes.clear()
        self.start_notes = notes
        self.waiting_for = ""
        self._started = True

    def stop(self) -> None:
        run_sync(self.transport.close())

    def worker_spec(self) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
        """How a client worker process (load/workers.py) rebuilds this started engine: class, name,
        arguments, and the state start() learned (the dialect; counters stay the session's)."""
        return (f"{type(self).__module__}:{type(self).__qualname__}", self.name, dict(self._args),
                {"dialect": self.dialect, "no_counters": True, "_started": True})

    async def counters(self) -> dict[str, float]:
        """Counters and gauges of ``metrics_path``, flattened (see :func:`.prometheus.parse_prometheus`)."""
        if self.no_counters:
            return {}
        got = await self.transport.get(self.metrics_path, 30)
        if got is None or got[0] != 200:
            return {}
        return parse_prometheus(got[1].decode("utf-8", "replace"))

    # -- metadata ----------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """Kind, base URL, model, API, server version; the key's variable name, never the key."""
        return {
            "name": self.name, "kind": self.kind, "base_url": self.base_url, "model": self.model, "api": self.api,
            "api_key_env": self.api_key_env, "timeout": self.timeout, "metrics_path": self.metrics_path,
            "tokenizer": self.tokenizer_name, "continuous_usage_stats": self.continuous_usage_stats,
            "server_version": self._version, "transport": self.transport.kind,
            "dialect": self.dialect.name, "dialect_setting": self.dialect.setting, "dialect_decided": self.dialect.decided,
            "output_lengths": "forced (ignore_eos)" if self.dialect.lengths_forced
            else "not forced (the server does not take ignore_eos; TPOT uses the tokens that came)",
            "notes": [*self.start_notes, *self.dialect.notes],
        }

    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer  # lazy: heavy import

            self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_name)
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer().encode(text, add_special_tokens=False))

    # -- generation --------------------------------------------------------------------------
    def _payload(self, request: Request, api: str) -> bytes:
        d = self.dialect
        body: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens,
                                "temperature": request.temperature, "stream": True}
        if d.ignore_eos:
            body["ignore_eos"] = request.ignore_eos
        if d.stream_options:
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True} \
                if self.continuous_usage_stats and d.continuous_usage_stats else {"include_usage": True}
        if api == "chat":
            if not isinstance(request.prompt, str):
                raise ValueError("the chat API needs a text prompt, got token ids")
            body["messages"] = [{"role": "user", "content": request.prompt}]
        elif isinstance(request.prompt, str):
            body["prompt"] = request.prompt
        else:
            body["prompt"] = list(request.prompt) if d.token_ids else self._as_text(tuple(request.prompt))
        body.update(request.extra)
        return orjson.dumps(body)

    def _as_text(self, ids: tuple[int, ...]) -> str:
        """A token-id prompt as text, for a server that takes text prompts only (the prompt's length
        is then the server's tokenization of it: ``usage.prompt_tokens`` says it)."""
        text = self._texts.get(ids)
        if text is None:
            try:
                tok = self.tokenizer()
            except Exception as e:  # noqa: BLE001 - said as the record's error
                raise ValueError(f"the server takes text prompts only and tokenizer {self.tokenizer_name!r} "
                                 f"(to detokenize a token-id prompt) could not load: {type(e).__name__}: {e}") from None
            text = str(tok.decode(list(ids), skip_special_tokens=True))
            if len(self._texts) < _TEXT_CACHE:
                self._texts[ids] = text
        return text

    async def generate(self, request: Request, record: RequestRecord, clock: Clock) -> None:
        """Stream one request; fill ``record``; faults become ``record.error`` (never raised).

        With ``dialect = "auto"``, a 400/422 naming one of vLLM's fields drops that field for the
        session and sends the request again (the record's stamps are the new request's)."""
        api = request.api or self.api
        record.tag = record.tag or request.tag
        record.expected_prompt_tokens = request.prompt_tokens
        limit = self.warmup_timeout if record.warmup and self.warmup_timeout < self.timeout else None
        for _ in range(4):
            response = await self.exchange(request, record, clock, api, limit)
            if limit is not None and record.error is not None and record.error.startswith("timeout"):
                record.error = f"{record.error} (the warm-up deadline: 2 x ready_timeout)"
            if response is None or not self._learn(response, request):
                return
            record.error = None

    def _learn(self, response: Response, request: Request) -> bool:
        """Did a rejected vLLM field just get dropped (then send again)?"""
        d = self.dialect
        if not d.learns or response.status not in (400, 422):
            return False
        body = self.error_body(response.body)
        names = rejected(response.status, body, d.extensions_sent(not isinstance(request.prompt, str)))
        if not names:
            return False
        d.drop(names, reason(response.status, body))
        print(f"perfgate: engine {self.name!r}: {clean(d.notes[-1])}", file=sys.stderr, flush=True)
        return True

    async def exchange(self, request: Request, record: RequestRecord, clock: Clock, api: str,
                       timeout: float | None = None) -> Response | None:
        """One request on the wire into ``record`` within ``timeout`` seconds (default: the engine's
        ``timeout``); the response (None: the request could not be built)."""
        limit = timeout or self.timeout
        try:
            payload = self._payload(request, api)
        except (ValueError, TypeError) as e:
            record.error = f"bad request: {e}"
            return None
        response = Response(api)
        try:
            async with asyncio.timeout(limit):
                record.sent_ns = clock()  # replaced by the transport's stamp at the socket write
                try:
                    await self.transport.stream(_ENDPOINTS[api], payload, clock, response)
                finally:
                    response.stamps_into(record)
        except TimeoutError:
            n = response.events_received()
            record.error = f"timeout: no complete answer within {limit:g} s ({n} events received)"
        except asyncio.CancelledError:  # cancelled from outside (run budget, Ctrl-C): keep the chunks received
            n = response.events_received()
            record.error = (f"cancelled: the run ended this request after {n} events" if 0 < response.status < 400
                            else "cancelled: the run ended this request before an answer")
            if n:
                response.decode(record)
            raise
        except TransportError as e:
            record.error = str(e)
            if not e.keep_events:
                return response
        else:
            if response.status >= 400:
                record.error = f"HTTP {response.status}: {self.error_body(response.body)}"
                return response
            if 300 <= response.status < 400:
                where = clean(response.location, 200) if response.location else "no Location"
                record.error = f"HTTP {response.status} (redirect to {where}; not followed)"
                return response
        if record.error is None or response.events_received():
            response.decode(record)
        return response

    def error_body(self, body: bytes) -> str:
        """An HTTP error body as one short printable line, secrets masked (:func:`.clean`)."""
        return clean(body.decode("utf-8", "replace"), _BODY_LIMIT)


def _proxied(host: str) -> bool:
    """Would an environment proxy be used for ``http://host``? Loopback never is."""
    if host in ("localhost", "::1") or host.startswith("127."):
        return False
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get("http") or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass_environment(host, proxies)  # type: ignore[attr-defined]


def create(name: str, args: Mapping[str, Any]) -> OpenAIEngine:
    """Factory registered for kind ``openai``."""
    return OpenAIEngine(name, args)

"""A scripted-timing OpenAI-compatible streaming server, for checking a client's measurements.

Every chunk is written at a scheduled time (``ttft`` after the request body was read, then one
``itl`` apart), and the server records the ``time.perf_counter_ns()`` at which it handed each
chunk to the socket: the *ground truth* a client's timestamps are compared with. In the same
process the clock is shared; across processes on Linux ``perf_counter_ns`` is CLOCK_MONOTONIC,
which all processes share.

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (SSE with ``stream: true``,
a usage block when ``stream_options.include_usage`` is set, per-chunk cumulative usage with
``stream_options.continuous_usage_stats``, ``data: [DONE]``), ``GET /metrics`` (vLLM-like
Prometheus counters), ``GET /version``, ``GET /v1/models``, ``GET /ground_truth``,
``POST /reset`` (forget the ground truth; counters stay monotonic).

The script of one request is the server's default :class:`Script`, updated by the request body's
``"perfgate": {...}`` object (same field names), e.g.
``{"perfgate": {"ttft": 0.05, "itl": 0.01, "fault": "cut", "cut_after": 3}}``.

Fault modes (``fault``): ``"status"`` (answer ``status`` with ``body``), ``"hang"`` (never answer),
``"hang_mid"`` (stall after ``cut_after`` chunks), ``"cut"`` (close the connection after
``cut_after`` chunks), ``"malformed"`` (an event without a ``data:`` field), ``"invalid_json"``,
``"no_done"`` (end the body without ``[DONE]``), ``"empty"`` (200 and an empty stream),
``"wrong_usage"`` (usage reports ``usage_delta`` more output tokens than were streamed),
``"no_finish"`` (no ``finish_reason`` and no ``[DONE]``: a body that just ends).

``strict=True`` (CLI ``--strict``) is a strict OpenAI-spec server (:mod:`.strict`): unknown fields
(vLLM's extensions, ``perfgate``) and token-id prompts are 400s, streams end without ``[DONE]``,
and only ``GET /v1/models`` is answered.

Raw asyncio streams (no web framework) keep the write path short. Run it in a background
thread (``ScriptedServer().start()`` returns the base URL, ``.stop()``) or as
``python -m pytest_perfgate.calib.scripted_server --port N``.

This module serves and routes; :mod:`.script` is the script, :mod:`.answer` writes one answer and
its ground truth, :mod:`.counters` the Prometheus counters, :mod:`.wire` the HTTP framing.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import orjson

from .answer import Answer, count_prompt, stream, whole
from .counters import Counters
from .script import Script
from .strict import GET_PATHS, strict_error
from .wire import Reply, head

__all__ = ["Script", "ScriptedServer", "main"]


class ScriptedServer:
    """The server; ``start()`` runs it in a daemon thread with its own event loop."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "scripted",
        api_key: str | None = None,
        strict: bool = False,
    ) -> None:
        self.script = script or Script()
        self.strict = strict
        self.host, self.port, self.model, self.api_key = host, port, model, api_key
        self.counters = Counters()
        self._truth: list[dict[str, Any]] = []
        self._seq = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self.headers_seen: list[dict[str, str]] = []  # request headers, for tests (auth etc.)

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def serve(self) -> asyncio.base_events.Server:
        """Bind and start serving on the running loop; sets :attr:`port`."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port, backlog=1024)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self._server

    def start(self) -> str:
        """Serve from a background thread; returns the base URL (``http://127.0.0.1:PORT``)."""
        if self._thread is not None:
            return self.base_url
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.serve())
            except BaseException as e:  # pragma: no cover - bind failure
                failure.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=main, name="perfgate-scripted-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self.base_url

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> ScriptedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- ground truth ------------------------------------------------------------------------
    def ground_truth(self) -> list[dict[str, Any]]:
        """One dict per request: id, client id, the client's X-Request-ID header (request_id),
        received_ns, chunk_ns, chunk_tokens, done_ns."""
        with self._lock:
            return [dict(t) for t in self._truth]

    def reset(self) -> None:
        with self._lock:
            self._truth.clear()

    # -- HTTP --------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = (lines[0].split(" ") + ["", ""])[:3]
                headers = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(length) if length else b""
                received_ns = time.perf_counter_ns()
                keep = await self._route(method, target.split("?")[0], headers, body, received_ns, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:  # stop() cancels hanging answers: end quietly, not a logged traceback
            return
        finally:
            try:
                writer.close()
            except RuntimeError:  # pragma: no cover - loop closing
                pass

    async def _route(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        received_ns: int,
        writer: asyncio.StreamWriter,
    ) -> bool:
        try:
            if self.strict and method == "GET" and path not in GET_PATHS:
                raise Reply(404, orjson.dumps({"error": {"message": f"Invalid URL (GET {path})", "code": None}}))
            if method == "GET" and path == "/metrics":
                raise Reply(200, self.counters.prometheus(self.model), b"text/plain; version=0.0.4")
            if method == "GET" and path == "/version":
                raise Reply(200, orjson.dumps({"version": "scripted-1"}))
            if method == "GET" and path == "/v1/models":
                raise Reply(200, orjson.dumps({"object": "list", "data": [{"id": self.model, "object": "model"}]}))
            if method == "GET" and path == "/ground_truth":
                raise Reply(200, orjson.dumps({"requests": self.ground_truth()}))
            if method == "POST" and path == "/reset":
                self.reset()
                raise Reply(200, b"{}")
            if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                with self._lock:
                    self.headers_seen.append(headers)
                if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
                    raise Reply(401, orjson.dumps({"error": {"message": "invalid api key", "code": 401}}))
                return await self._generate(path.endswith("chat/completions"), body, received_ns, writer,
                                            headers.get("x-request-id"))
            raise Reply(404, orjson.dumps({"detail": "Not Found"}))
        except Reply as r:
            writer.write(head(r.status, r.ctype, len(r.body)) + r.body)
            await writer.drain()
            return True

    async def _generate(self, chat: bool, body: bytes, received_ns: int, writer: asyncio.StreamWriter,
                        request_id: str | None = None) -> bool:
        try:
            req = orjson.loads(body)
            rejected = strict_error(req, chat) if self.strict else None
            if rejected is not None:
                raise Reply(400, rejected)
            script = self.script.with_overrides({"fault": "no_done"} if self.strict else req.get("perfgate") or {})
        except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as e:
            raise Reply(400, orjson.dumps({"error": {"message": f"bad request: {e}", "code": 400}})) from None
        a = self._answer(chat, req, script, received_ns, request_id)
        if script.fault == "status":
            raise Reply(script.status, orjson.dumps({"error": {"message": script.body, "code": script.status}}))
        if script.fault == "hang":
            await asyncio.sleep(3600)
            return False
        if not req.get("stream"):
            return await whole(a, writer)
        return await stream(a, self.model, writer, self.counters)

    def _answer(self, chat: bool, req: dict[str, Any], script: Script, received_ns: int,
                request_id: str | None = None) -> Answer:
        """The request's answer, its ground-truth record added (``request_id``: the client's
        ``X-Request-ID`` header, at most 128 characters: how a client that sends no ``perfgate``
        object, AIPerf, names its requests)."""
        max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        prompt_tokens = script.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = count_prompt(req, chat)
        with self._lock:
            self._seq += 1
            rid = f"{'chatcmpl' if chat else 'cmpl'}-{self._seq}"
            truth: dict[str, Any] = {
                "id": rid, "client_id": script.id, "received_ns": received_ns, "chunk_ns": [],
                "chunk_tokens": [], "done_ns": None, "fault": script.fault,
                "prompt_tokens": prompt_tokens, "request_id": request_id[:128] if request_id else None,
            }
            self._truth.append(truth)
        return Answer(chat, req, script, script.chunk_tokens(max_tokens), truth)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m pytest_perfgate.calib.scripted_server --port 8000 [--ttft 0.01 --itl 0.002]``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--ttft", type=float, default=Script.ttft)
    p.add_argument("--itl", type=float, default=0.001)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--num-spec-tokens", type=int, default=0)
    p.add_argument("--model", default="scripted")
    p.add_argument("--precise", action="store_true", help="spin to hit each chunk's time within microseconds")
    p.add_argument("--strict", action="store_true", help="a strict OpenAI-spec server (unknown fields are 400s, no [DONE])")
    args = p.parse_args(argv)
    server = ScriptedServer(
        Script(ttft=args.ttft, itl=args.itl, tokens_per_chunk=args.tokens_per_chunk,
               num_spec_tokens=args.num_spec_tokens, precise=args.precise),
        host=args.host, port=args.port, model=args.model, strict=args.strict,
    )

    async def run() -> None:
        srv = await server.serve()
        print(f"scripted server on {server.base_url}", flush=True)
        async with srv:
            await srv.serve_forever()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:  # pragma: no cover
        pass


if __name__ == "__main__":
    main()

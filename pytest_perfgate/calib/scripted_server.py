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
``"wrong_usage"`` (usage reports ``usage_delta`` more output tokens than were streamed).

Raw asyncio streams (no web framework) keep the write path short. Run it in a background
thread (``ScriptedServer().start()`` returns the base URL, ``.stop()``) or as
``python -m pytest_perfgate.calib.scripted_server --port N``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

_FAULTS = ("status", "hang", "hang_mid", "cut", "malformed", "invalid_json", "no_done", "empty", "wrong_usage")


@dataclass(frozen=True)
class Script:
    """Timing and behaviour of one streamed answer (seconds; token counts are output tokens)."""

    ttft: float = 0.005  # request body read -> first chunk
    itl: float | Sequence[float] = 0.001  # gap between chunks (one value, or one per gap)
    tokens_per_chunk: int | Sequence[int] = 1  # int, or the exact list of tokens of every chunk
    n_chunks: int | None = None  # default: enough chunks for max_tokens
    fault: str | None = None
    status: int = 500
    body: str = "scripted failure"
    cut_after: int = 1
    usage_delta: int = 5
    prompt_tokens: int | None = None  # default: len(token ids) or whitespace words of the text
    cached_tokens: int = 0  # prefix-cache hits counted for this request
    num_spec_tokens: int = 0  # >0: count a draft of this many tokens per chunk (spec-decode counters)
    # Finish the wait for each chunk by spinning: sub-millisecond schedule accuracy, but in-process
    # the spin holds the GIL and delays the client's thread, so it is off by default (the ground
    # truth records actual write times either way); the CLI's --precise turns it on.
    precise: bool = False
    id: str | None = None  # client's id, echoed into the ground truth

    def with_overrides(self, overrides: Mapping[str, Any]) -> Script:
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(overrides) - names
        if unknown:
            raise ValueError(f"unknown script fields: {sorted(unknown)}")
        fault = overrides.get("fault", self.fault)
        if fault is not None and fault not in _FAULTS:
            raise ValueError(f"unknown fault {fault!r} (known: {', '.join(_FAULTS)})")
        return dataclasses.replace(self, **dict(overrides))

    def chunk_tokens(self, max_tokens: int) -> list[int]:
        """Tokens in each chunk of the answer."""
        if not isinstance(self.tokens_per_chunk, int):
            return [int(t) for t in self.tokens_per_chunk]
        tpc = max(1, self.tokens_per_chunk)
        if self.n_chunks is not None:
            return [tpc] * self.n_chunks
        full, rest = divmod(max(0, max_tokens), tpc)
        return [tpc] * full + ([rest] if rest else [])

    def gap_ns(self, k: int) -> int:
        """Scheduled gap before chunk ``k`` (k >= 1)."""
        itl = self.itl
        v = itl if isinstance(itl, (int, float)) else itl[min(k - 1, len(itl) - 1)]
        return int(round(float(v) * 1e9))


@dataclass
class _Counters:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)
    prefix_queries: int = 0
    prefix_hits: int = 0
    running: int = 0

    def prometheus(self, model: str) -> bytes:
        lab = f'model_name="{model}",engine="0"'
        lines: list[str] = []

        def counter(name: str, value: float, extra: str = "", help_: str = "") -> None:
            if not any(ln.startswith(f"# TYPE {name}_total ") for ln in lines):
                lines.append(f"# HELP {name}_total {help_ or name}")
                lines.append(f"# TYPE {name}_total counter")
            labels = lab + ("," + extra if extra else "")
            lines.append(f"{name}_total{{{labels}}} {float(value)}")

        counter("vllm:prompt_tokens", self.prompt_tokens)
        counter("vllm:generation_tokens", self.generation_tokens)
        counter("vllm:request_success", self.requests, 'finished_reason="length"')
        counter("vllm:spec_decode_num_drafts", self.drafts)
        counter("vllm:spec_decode_num_draft_tokens", self.draft_tokens)
        counter("vllm:spec_decode_num_accepted_tokens", self.accepted)
        for i, v in enumerate(self.per_pos):
            counter("vllm:spec_decode_num_accepted_tokens_per_pos", v, f'position="{i}"')
        counter("vllm:prefix_cache_queries", self.prefix_queries)
        counter("vllm:prefix_cache_hits", self.prefix_hits)
        lines.append("# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.")
        lines.append("# TYPE vllm:kv_cache_usage_perc gauge")
        lines.append(f"vllm:kv_cache_usage_perc{{{lab}}} {min(1.0, 0.01 * self.running)}")
        lines.append("# HELP vllm:num_requests_running Number of requests running.")
        lines.append("# TYPE vllm:num_requests_running gauge")
        lines.append(f"vllm:num_requests_running{{{lab}}} {float(self.running)}")
        return ("\n".join(lines) + "\n").encode()


class _Reply(Exception):
    def __init__(self, status: int, body: bytes, ctype: bytes = b"application/json") -> None:
        super().__init__(status)
        self.status, self.body, self.ctype = status, body, ctype


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 500: "Internal Server Error",
            503: "Service Unavailable", 429: "Too Many Requests"}


def _head(status: int, ctype: bytes, length: int | None) -> bytes:
    reason = _REASONS.get(status, "Status")
    h = f"HTTP/1.1 {status} {reason}\r\n".encode() + b"Content-Type: " + ctype + b"\r\n"
    if length is None:
        h += b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"
    else:
        h += f"Content-Length: {length}\r\n".encode()
    return h + b"\r\n"


def _frame(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


async def _sleep_until(target_ns: int, precise: bool) -> None:
    remaining = target_ns - time.perf_counter_ns()
    if remaining > 1_500_000:
        await asyncio.sleep((remaining - 1_000_000) / 1e9)
    if precise:
        while time.perf_counter_ns() < target_ns:
            pass
    else:
        remaining = target_ns - time.perf_counter_ns()
        if remaining > 0:
            await asyncio.sleep(remaining / 1e9)


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
    ) -> None:
        self.script = script or Script()
        self.host, self.port, self.model, self.api_key = host, port, model, api_key
        self.counters = _Counters()
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
        """One dict per request: id, client id, received_ns, chunk_ns, chunk_tokens, done_ns."""
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
            if method == "GET" and path == "/metrics":
                raise _Reply(200, self.counters.prometheus(self.model), b"text/plain; version=0.0.4")
            if method == "GET" and path == "/version":
                raise _Reply(200, orjson.dumps({"version": "scripted-1"}))
            if method == "GET" and path == "/v1/models":
                raise _Reply(200, orjson.dumps({"object": "list", "data": [{"id": self.model, "object": "model"}]}))
            if method == "GET" and path == "/ground_truth":
                raise _Reply(200, orjson.dumps({"requests": self.ground_truth()}))
            if method == "POST" and path == "/reset":
                self.reset()
                raise _Reply(200, b"{}")
            if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                with self._lock:
                    self.headers_seen.append(headers)
                if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
                    raise _Reply(401, orjson.dumps({"error": {"message": "invalid api key", "code": 401}}))
                return await self._generate(path.endswith("chat/completions"), body, received_ns, writer)
            raise _Reply(404, orjson.dumps({"detail": "Not Found"}))
        except _Reply as r:
            writer.write(_head(r.status, r.ctype, len(r.body)) + r.body)
            await writer.drain()
            return True

    async def _generate(self, chat: bool, body: bytes, received_ns: int, writer: asyncio.StreamWriter) -> bool:
        try:
            req = orjson.loads(body)
            script = self.script.with_overrides(req.get("perfgate") or {})
        except (orjson.JSONDecodeError, ValueError, TypeError) as e:
            raise _Reply(400, orjson.dumps({"error": {"message": f"bad request: {e}", "code": 400}})) from None
        max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        tokens = script.chunk_tokens(max_tokens)
        prompt_tokens = script.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = _count_prompt(req, chat)
        with self._lock:
            self._seq += 1
            rid = f"{'chatcmpl' if chat else 'cmpl'}-{self._seq}"
            truth: dict[str, Any] = {
                "id": rid, "client_id": script.id, "received_ns": received_ns, "chunk_ns": [],
                "chunk_tokens": [], "done_ns": None, "fault": script.fault,
                "prompt_tokens": prompt_tokens,
            }
            self._truth.append(truth)
        fault = script.fault
        if fault == "status":
            raise _Reply(script.status, orjson.dumps({"error": {"message": script.body, "code": script.status}}))
        if fault == "hang":
            await asyncio.sleep(3600)
            return False
        if not req.get("stream"):
            return await self._non_streamed(chat, req, rid, tokens, prompt_tokens, script, received_ns, writer, truth)

        opts = req.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        continuous = bool(opts.get("continuous_usage_stats"))
        model = str(req.get("model") or self.model)
        created = int(time.time())
        obj = b"chat.completion.chunk" if chat else b"text_completion"
        prefix = b'{"id":"%s","object":"%s","created":%d,"model":%s,"choices":[' % (
            rid.encode(), obj, created, orjson.dumps(model))
        writer.write(_head(200, b"text/event-stream; charset=utf-8", None))
        self.counters.running += 1
        try:
            if chat:  # vLLM opens a chat stream with the role and empty content
                writer.write(_frame(b"data: " + prefix + b'{"index":0,"delta":{"role":"assistant","content":""},'
                                    b'"logprobs":null,"finish_reason":null}]}\n\n'))
            if fault == "empty":
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return True
            target = received_ns + int(round(script.ttft * 1e9))
            sent = 0
            for k, ntok in enumerate(tokens):
                if k:
                    target += script.gap_ns(k)
                if fault in ("cut", "hang_mid") and k >= script.cut_after:
                    if fault == "hang_mid":
                        await asyncio.sleep(3600)
                    writer.transport.abort()
                    return False
                last = k == len(tokens) - 1
                text = orjson.dumps(" tok" * ntok)
                finish = b'"length"' if last else b"null"
                if chat:
                    choice = b'{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":%s}' % (text, finish)
                else:
                    choice = b'{"index":0,"text":%s,"logprobs":null,"finish_reason":%s}' % (text, finish)
                sent += ntok
                usage = b""
                if continuous:
                    usage = b',"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}' % (
                        prompt_tokens, sent, prompt_tokens + sent)
                event = b"data: " + prefix + choice + b"]" + usage + b"}\n\n"
                if fault == "malformed" and k == script.cut_after:
                    event = b"garbage without a data field\n\n"
                elif fault == "invalid_json" and k == script.cut_after:
                    event = b'data: {"id": "broken", "choices": [\n\n'
                await _sleep_until(target, script.precise)
                t = time.perf_counter_ns()
                writer.write(_frame(event))
                truth["chunk_ns"].append(t)
                truth["chunk_tokens"].append(ntok)
                await writer.drain()
                self._count(ntok, script)
            reported = sent + (script.usage_delta if fault == "wrong_usage" else 0)
            tail = b""
            if include_usage:
                tail += _frame(b"data: " + prefix + b'],"usage":{"prompt_tokens":%d,"completion_tokens":%d,'
                               b'"total_tokens":%d}}\n\n' % (prompt_tokens, reported, prompt_tokens + reported))
            if fault != "no_done":
                tail += _frame(b"data: [DONE]\n\n")
            t = time.perf_counter_ns()
            truth["done_ns"] = t  # before the write: a fast client may read the ground truth at once
            writer.write(tail + b"0\r\n\r\n")
            await writer.drain()
            self.counters.requests += 1
            self.counters.prompt_tokens += prompt_tokens
            self.counters.prefix_queries += prompt_tokens
            self.counters.prefix_hits += min(script.cached_tokens, prompt_tokens)
            return True
        finally:
            self.counters.running -= 1

    def _count(self, ntok: int, script: Script) -> None:
        c = self.counters
        c.generation_tokens += ntok
        k = script.num_spec_tokens
        if k > 0:
            acc = min(max(ntok - 1, 0), k)
            c.drafts += 1
            c.draft_tokens += k
            c.accepted += acc
            if len(c.per_pos) < k:
                c.per_pos.extend([0] * (k - len(c.per_pos)))
            for i in range(acc):
                c.per_pos[i] += 1

    async def _non_streamed(
        self, chat: bool, req: dict[str, Any], rid: str, tokens: list[int], prompt_tokens: int,
        script: Script, received_ns: int, writer: asyncio.StreamWriter, truth: dict[str, Any],
    ) -> bool:
        total = sum(tokens)
        delay = script.ttft + sum(script.gap_ns(k) for k in range(1, len(tokens))) / 1e9
        await _sleep_until(received_ns + int(delay * 1e9), script.precise)
        text = " tok" * total
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        body = orjson.dumps({
            "id": rid, "object": "chat.completion" if chat else "text_completion", "model": req.get("model"),
            "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": total, "total_tokens": prompt_tokens + total},
        })
        t = time.perf_counter_ns()
        truth["chunk_ns"].append(t)
        truth["chunk_tokens"].append(total)
        truth["done_ns"] = t
        writer.write(_head(200, b"application/json", len(body)) + body)
        await writer.drain()
        return True


def _count_prompt(req: Mapping[str, Any], chat: bool) -> int:
    if chat:
        msgs = req.get("messages") or []
        return sum(len(str(m.get("content", "")).split()) for m in msgs if isinstance(m, Mapping))
    prompt = req.get("prompt")
    if isinstance(prompt, list) and (not prompt or isinstance(prompt[0], int)):
        return len(prompt)
    return len(str(prompt or "").split())


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
    args = p.parse_args(argv)
    server = ScriptedServer(
        Script(ttft=args.ttft, itl=args.itl, tokens_per_chunk=args.tokens_per_chunk,
               num_spec_tokens=args.num_spec_tokens, precise=args.precise),
        host=args.host, port=args.port, model=args.model,
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

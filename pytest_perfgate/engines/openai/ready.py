"""The ``openai`` engine's start: the server answered (health), which dialect it speaks (a probe),
and whether it has counters. Each finding is one line of the engine's start notes.

* :func:`wait_ready`: ``GET /health``, then ``GET /v1/models``, until one answers (an HTTP answer
  other than 503) within ``ready_timeout``; otherwise an :class:`EngineError` naming the URL and the
  cause (``nothing answered at http://127.0.0.1:8000 within 30 s: connection refused: ...``).
* :func:`probe`: with ``dialect = "auto"``, one-token streamed requests: a text prompt with vLLM's
  fields (each field a 400/422 names is dropped and the request sent again), then a token-id prompt
  (rejected: prompts go as text). The probe's stream also tells whether the server ends streams
  with ``data: [DONE]``.
* :func:`counters_note`: ``GET metrics_path`` once; no answer or no vLLM names is said once, and
  the counter-based metrics then say "not available from this server".
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from ...contract import Clock, EngineError, Request, RequestRecord, clock
from ..prometheus import parse_prometheus
from .dialect import TOKEN_IDS, Dialect, reason, rejected
from .transport import Response, Transport, TransportError


class OpenAIEngine(Protocol):
    """What the start needs of :class:`.engine.OpenAIEngine` (a protocol: no import cycle)."""

    name: str
    base_url: str
    api: str
    metrics_path: str
    ready_timeout: float
    probe_timeout: float
    waiting_for: str
    transport: Transport
    dialect: Dialect
    no_counters: bool

    async def exchange(self, request: Request, record: RequestRecord, clock: Clock, api: str,
                       timeout: float | None = None) -> Response | None: ...

    def error_body(self, body: bytes) -> str: ...

HEALTH_PATHS = ("/health", "/v1/models")
_UNFINISHED = ("timeout", "connection", "cancelled", "stream ended without")
PROBE_TEXT = "Hello"
PROBE_IDS = (1, 2, 3)  # in every vocabulary; the answer's tokens do not matter


async def wait_ready(eng: OpenAIEngine) -> str:
    """Until the server answers (see the module docstring); returns what answered."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + eng.ready_timeout
    eng.waiting_for = f"an answer at {eng.base_url} (GET {' or '.join(HEALTH_PATHS)}; ready_timeout {eng.ready_timeout:g} s)"
    seen = ""
    while True:
        left = deadline - loop.time()
        answers: list[tuple[str, int]] = []
        for path in HEALTH_PATHS:
            got = await eng.transport.get(path, max(0.2, min(5.0, left)))
            if got is None:
                break
            if got[0] == 200:
                return f"GET {path}: 200"
            answers.append((path, got[0]))
        if answers and all(s != 503 for _, s in answers):
            return "; ".join(f"GET {p}: HTTP {s}" for p, s in answers)  # something answers: the probe says more
        if answers:
            seen = f"GET {answers[0][0]} answered HTTP 503 (not ready)"
        if loop.time() >= deadline:
            why = seen or await _unreachable(eng)
            raise EngineError(f"[engines.{eng.name}] nothing answered at {eng.base_url} within {eng.ready_timeout:g} s: "
                              f"{why} (is the server running? ready_timeout = {eng.ready_timeout:g})")
        await asyncio.sleep(min(0.5, max(0.0, deadline - loop.time())))


async def _unreachable(eng: OpenAIEngine) -> str:
    """Why nothing answered, in the transport's words (``connection refused: host:port``)."""
    try:
        async with asyncio.timeout(5):
            await eng.transport.stream("/health", b"{}", clock, Response("completions"))
    except TransportError as e:
        return str(e)
    except TimeoutError:
        return "no answer within 5 s"
    return "no answer in time"


async def _one(eng: OpenAIEngine, prompt: str | tuple[int, ...]) -> tuple[RequestRecord, Response | None]:
    rec = RequestRecord(index=-1)
    eng.waiting_for = f"the dialect probe's one-token answer (deadline {eng.probe_timeout:g} s: ready_timeout)"
    try:
        response = await eng.exchange(Request(prompt=prompt, max_tokens=1, api=eng.api), rec, clock, eng.api,  # type: ignore[arg-type]
                                      eng.probe_timeout)
    finally:
        eng.waiting_for = ""
    return rec, response


def unfinished(rec: RequestRecord) -> bool:
    """A probe that got no complete answer (timed out, cut, a stream that never ended): it concludes nothing."""
    return rec.error is not None and rec.error.startswith(_UNFINISHED)


async def probe(eng: OpenAIEngine) -> None:
    """Learn the dialect (``dialect = "auto"``), as the module docstring says."""
    d = eng.dialect
    rec, resp = await _one(eng, PROBE_TEXT)
    for _ in range(4):
        if resp is None or resp.status not in (400, 422):
            break
        body = eng.error_body(resp.body)
        names = rejected(resp.status, body, d.extensions_sent(False))
        if names:
            d.drop(names, reason(resp.status, body))
        elif d.ignore_eos or d.continuous_usage_stats:
            d.drop_all(reason(resp.status, body))
        else:
            break
        rec, resp = await _one(eng, PROBE_TEXT)
    if resp is None or resp.status != 200 or unfinished(rec):
        if unfinished(rec):  # e.g. "timeout: no complete answer within 30 s (0 events received)"
            cause = f"no complete answer ({rec.error})"
        else:
            cause = f"HTTP {resp.status}" if resp is not None and resp.status else (rec.error or "no answer").split(":")[0]
        d.decided = f"{d.name} (dialect = \"auto\": not decided, the one-token probe got {cause}; " \
                    "a field a 400/422 names is dropped when a request meets it)"
        return
    d.done = resp.done_seen()
    if eng.api == "completions" and d.token_ids:
        rec, resp = await _one(eng, PROBE_IDS)
        status = resp.status if resp is not None else 0
        if unfinished(rec):
            d.notes.append(f"dialect: token-id prompts not decided (the probe got no complete answer: {rec.error}); "
                           "still sent as token ids")
        elif status != 200:
            body = eng.error_body(resp.body) if resp is not None and status in (400, 422) else ""
            d.drop({TOKEN_IDS}, reason(status, body) if body else (f"HTTP {status}" if status else str(rec.error)))
    took = [n for n, ok in (("ignore_eos", d.ignore_eos), ("continuous_usage_stats", d.continuous_usage_stats and d.stream_options),
                            ("token-id prompts", d.token_ids)) if ok]
    shown = ", ".join(took) if took else "none of vLLM's extensions"
    d.decided = f"{d.name} (dialect = \"auto\": the server accepted {shown})"


async def counters_note(eng: OpenAIEngine) -> str | None:
    """None when ``metrics_path`` has vLLM's counters; else the line to say once."""
    got = await eng.transport.get(eng.metrics_path, 10)
    if got is None or got[0] != 200:
        eng.no_counters = True
        how = f"HTTP {got[0]}" if got is not None else "no answer"
        return (f"counters: not available from this server (GET {eng.metrics_path}: {how}); acceptance, "
                "prefix-cache and KV-cache metrics cannot be measured")
    names = sorted(parse_prometheus(got[1].decode("utf-8", "replace")))
    if any(n.startswith("vllm:") for n in names):
        return None
    found = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "") if names else "none"
    return (f"counters: {eng.metrics_path} has no vLLM counter names (found: {found}); acceptance, prefix-cache "
            "and KV-cache metrics are not available from this server")

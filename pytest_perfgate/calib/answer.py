"""One request's answer: streamed (SSE chunks on the script's schedule) or whole, with its ground truth.

The ground truth (``truth``) gets the ``time.perf_counter_ns()`` at which each chunk was handed to
the socket, and the time of the end of the stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from .counters import Counters
from .script import Script
from .wire import frame, head, sleep_until

# vLLM opens a chat stream with the role and empty content
_ROLE_DELTA = b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'


@dataclass(frozen=True)
class Answer:
    """What to send (``tokens``: the output tokens of each chunk) and the ground-truth record, which
    also holds the request's id, its prompt tokens and when its body was read."""

    chat: bool
    req: Mapping[str, Any]
    script: Script
    tokens: list[int]
    truth: dict[str, Any]

    @property
    def rid(self) -> str:
        return str(self.truth["id"])

    @property
    def prompt_tokens(self) -> int:
        return int(self.truth["prompt_tokens"])

    @property
    def received_ns(self) -> int:
        return int(self.truth["received_ns"])


def count_prompt(req: Mapping[str, Any], chat: bool) -> int:
    """Prompt tokens: token ids given, else whitespace words of the text."""
    if chat:
        msgs = req.get("messages") or []
        return sum(len(str(m.get("content", "")).split()) for m in msgs if isinstance(m, Mapping))
    prompt = req.get("prompt")
    if isinstance(prompt, list) and (not prompt or isinstance(prompt[0], int)):
        return len(prompt)
    return len(str(prompt or "").split())


def _usage(prompt_tokens: int, completion_tokens: int) -> bytes:
    return b'"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}' % (
        prompt_tokens, completion_tokens, prompt_tokens + completion_tokens)


async def stream(a: Answer, model: str, writer: asyncio.StreamWriter, counters: Counters) -> bool:
    """The SSE answer; False when a fault ended the connection."""
    opts = a.req.get("stream_options") or {}
    obj = b"chat.completion.chunk" if a.chat else b"text_completion"
    prefix = b'{"id":"%s","object":"%s","created":%d,"model":%s,"choices":[' % (
        a.rid.encode(), obj, int(time.time()), orjson.dumps(str(a.req.get("model") or model)))
    writer.write(head(200, b"text/event-stream; charset=utf-8", None))
    counters.running += 1
    try:
        if a.chat:
            writer.write(frame(b"data: " + prefix + _ROLE_DELTA))
        if a.script.fault == "empty":
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        sent = await _chunks(a, prefix, bool(opts.get("continuous_usage_stats")), writer, counters)
        if sent is None:
            return False
        await _end(a, prefix, sent, bool(opts.get("include_usage")), writer)
        counters.count_request(a.prompt_tokens, a.script.cached_tokens)
        return True
    finally:
        counters.running -= 1


async def _chunks(
    a: Answer, prefix: bytes, continuous: bool, writer: asyncio.StreamWriter, counters: Counters
) -> int | None:
    """Write every chunk at its scheduled time; the tokens sent, or None when a fault cut the stream."""
    script, fault = a.script, a.script.fault
    target = a.received_ns + int(round(script.ttft * 1e9))
    sent = 0
    for k, ntok in enumerate(a.tokens):
        if k:
            target += script.gap_ns(k)
        if fault in ("cut", "hang_mid") and k >= script.cut_after:
            if fault == "hang_mid":
                await asyncio.sleep(3600)
            writer.transport.abort()
            return None
        sent += ntok
        event = _event(a, prefix, k, ntok, _usage(a.prompt_tokens, sent) if continuous else b"")
        await sleep_until(target, script.precise)
        t = time.perf_counter_ns()
        writer.write(frame(event))
        a.truth["chunk_ns"].append(t)
        a.truth["chunk_tokens"].append(ntok)
        await writer.drain()
        counters.count_chunk(ntok, script.num_spec_tokens)
    return sent


def _event(a: Answer, prefix: bytes, k: int, ntok: int, usage: bytes) -> bytes:
    """The SSE event of chunk ``k`` (or the fault's broken one)."""
    if a.script.fault == "malformed" and k == a.script.cut_after:
        return b"garbage without a data field\n\n"
    if a.script.fault == "invalid_json" and k == a.script.cut_after:
        return b'data: {"id": "broken", "choices": [\n\n'
    text = orjson.dumps(" tok" * ntok)
    finish = b'"length"' if k == len(a.tokens) - 1 and a.script.fault != "no_finish" else b"null"
    if a.chat:
        choice = b'{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":%s}' % (text, finish)
    else:
        choice = b'{"index":0,"text":%s,"logprobs":null,"finish_reason":%s}' % (text, finish)
    return b"data: " + prefix + choice + b"]" + (b"," + usage if usage else b"") + b"}\n\n"


async def _end(a: Answer, prefix: bytes, sent: int, include_usage: bool, writer: asyncio.StreamWriter) -> None:
    """The usage block (``wrong_usage``: off by ``usage_delta``), ``[DONE]`` (not with ``no_done``), the last frame."""
    reported = sent + (a.script.usage_delta if a.script.fault == "wrong_usage" else 0)
    tail = b""
    if include_usage:
        tail += frame(b"data: " + prefix + b"]," + _usage(a.prompt_tokens, reported) + b"}\n\n")
    if a.script.fault not in ("no_done", "no_finish"):
        tail += frame(b"data: [DONE]\n\n")
    a.truth["done_ns"] = time.perf_counter_ns()  # before the write: a fast client may read the ground truth at once
    writer.write(tail + b"0\r\n\r\n")
    await writer.drain()


async def whole(a: Answer, writer: asyncio.StreamWriter) -> bool:
    """The non-streamed answer, written when its last chunk would have been."""
    total = sum(a.tokens)
    delay = a.script.ttft + sum(a.script.gap_ns(k) for k in range(1, len(a.tokens))) / 1e9
    await sleep_until(a.received_ns + int(delay * 1e9), a.script.precise)
    text = " tok" * total
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
    if a.chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    body = orjson.dumps({
        "id": a.rid, "object": "chat.completion" if a.chat else "text_completion", "model": a.req.get("model"),
        "choices": [choice],
        "usage": {"prompt_tokens": a.prompt_tokens, "completion_tokens": total, "total_tokens": a.prompt_tokens + total},
    })
    t = time.perf_counter_ns()
    a.truth["chunk_ns"].append(t)
    a.truth["chunk_tokens"].append(total)
    a.truth["done_ns"] = t
    writer.write(head(200, b"application/json", len(body)) + body)
    await writer.drain()
    return True

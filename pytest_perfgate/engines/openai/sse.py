"""Server-sent events of an OpenAI-compatible stream, into a :class:`RequestRecord`.

* :class:`EventSplitter`: the one splitter. Bytes as they arrive -> SSE events, each stamped with
  the arrival of the read that completed it; ``data: [DONE]`` ends the stream.
* :class:`ChunkEvents`: the common shape checked as it arrives (vLLM, SGLang: every HTTP chunk is
  exactly one ``data: <one line>\\n\\n`` event), fed chunk payloads by the raw transport's framing.
* :class:`FastDecoder`: a typed msgspec decoder reading only the fields used here, a batch of events
  glued into one JSON array per call (all in C); it declines anything unusual.
* :func:`decode_generic`: any SSE shape, orjson, exact error messages: the reference the fast
  decoder must agree with (``tests/load/test_timing_calibration.py``).

Token counts per chunk come from the server when it says (cumulative ``usage.completion_tokens``),
else one per non-empty delta, corrected by the final usage block (``token_count_source``:
``"server"`` when the output-token count came from the server's usage, ``"chunks"`` otherwise).

A stream is complete at ``data: [DONE]``, or, without it, when the body ended after a chunk with a
``finish_reason`` (``transformers serve`` sends no ``[DONE]``): the end is then the last event's
arrival. A body that ends with neither is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any

import orjson

from ...contract import RequestRecord
from ...runtime.redaction import clean

try:  # optional: a typed decoder is ~2x faster than orjson + dict lookups per chunk
    import msgspec
except ImportError:  # pragma: no cover - msgspec not installed
    msgspec = None  # type: ignore[assignment]

Event = tuple[int, bytes]  # (arrival ns, event bytes without the blank line)

EAGER_EVENTS = 8  # a read with at most this many events is decoded at once (see FastDecoder.feed)
EVENT_LIMIT = 8 << 20  # bytes of one SSE event (a hostile or broken server: one 50 MB event)
BODY_LIMIT = 256 << 20  # bytes of one response body
_DONE_EVENTS = (b"data: [DONE]", b"data:[DONE]")
_DONE_CHUNKS = (b"data: [DONE]\n\n", b"data:[DONE]\n\n")


class TooLarge(ValueError):
    """An SSE event over :data:`EVENT_LIMIT` or a body over :data:`BODY_LIMIT`; ``str()`` is the cause."""


def event_too_large(size: int) -> TooLarge:
    return TooLarge(f"SSE event over {EVENT_LIMIT >> 20} MiB: {size / (1 << 20):.1f} MiB without a blank line "
                    "(not read further)")


class EventSplitter:
    """SSE events from bytes fed read by read: an event ends at a blank line (``\\r\\n`` is read as
    ``\\n``) and is stamped with the read that carried that blank line; ``data: [DONE]`` sets
    :attr:`done_ns` and ends the stream (later bytes are ignored). Linear in the bytes fed (an
    event that spans many reads is appended to, never copied or scanned again); an incomplete event
    over :data:`EVENT_LIMIT` raises :class:`TooLarge`."""

    __slots__ = ("events", "done_ns", "_buf")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.done_ns: int | None = None
        self._buf = bytearray()

    def feed(self, data: bytes, t: int) -> bool:
        """Add one read that arrived at ``t``; True once the stream ended with ``[DONE]``."""
        if self.done_ns is not None:
            return True
        buf = self._buf
        if buf and buf[-1] == 13 and data[:1] == b"\n":  # a \r that ended the last read pairs with this \n
            del buf[-1]
        if b"\r" in data:  # a trailing \r stays and pairs with the next read's \n
            data = data.replace(b"\r\n", b"\n")
        scan = max(0, len(buf) - 1)  # a blank line may straddle the two reads; nothing before it is one
        buf += data
        start = 0
        find, append = buf.find, self.events.append
        i = find(b"\n\n", scan)
        while i >= 0:
            ev = bytes(buf[start:i])
            start = i + 2
            if ev in _DONE_EVENTS:
                self.done_ns, self._buf = t, bytearray()
                return True
            append((t, ev))
            i = find(b"\n\n", start)
        if start:
            del buf[:start]
        if len(buf) > EVENT_LIMIT:
            raise event_too_large(len(buf))
        return False

    def close(self, t: int) -> None:
        """End of the body: non-blank bytes after the last blank line become a last event."""
        if self.done_ns is None and self._buf.strip():
            self.events.append((t, bytes(self._buf)))
        self._buf = bytearray()


class ChunkEvents:
    """The raw transport's chunk sink: checks, read by read, that every HTTP chunk is exactly one
    ``data: <one line>\\n\\n`` event, and decodes them as they come (a few microseconds per read,
    spread over the stream, so that ending streams do not pile their parsing onto the other
    streams' last chunks). A call returns False at the first chunk of another shape: the caller
    then splits the whole body with :class:`EventSplitter` instead, and this object is dropped."""

    __slots__ = ("times", "data", "done_ns", "decoder")

    def __init__(self, api: str) -> None:
        self.times: list[int] = []  # arrival of each event before [DONE]
        self.data: list[bytes] = []  # those events as received, each b"data: <one line>\n\n"
        self.done_ns: int | None = None
        self.decoder = FastDecoder(api)

    def chunk(self, t: int, payload: bytes) -> bool:
        """One chunk that arrived alone in a read (a paced stream)."""
        if self.done_ns is not None or payload.count(b"\n") != 2 or not payload.endswith(b"\n\n"):
            return False
        if payload in _DONE_CHUNKS:
            self.done_ns = t
            return True
        self.times.append(t)
        self.data.append(payload)
        self.decoder.feed([t], payload)
        return True

    def chunks(self, times: list[int], payloads: list[bytes]) -> bool:
        """The chunks completed by one read (``times[k]``: arrival of chunk k's last byte)."""
        if not payloads:
            return True
        if self.done_ns is not None:
            return False  # events after [DONE]
        if payloads[-1] in _DONE_CHUNKS:
            self.done_ns = times[-1]
            times, payloads = times[:-1], payloads[:-1]
            if not payloads:
                return True
        got = b"".join(payloads)
        if got.count(b"\n") != 2 * len(payloads) or not all(map(bytes.endswith, payloads, repeat(b"\n\n"))) \
                or _DONE_CHUNKS[0] in payloads or _DONE_CHUNKS[1] in payloads:
            return False  # [DONE] before the end: the splitter drops what follows
        self.times += times
        self.data.append(got)
        self.decoder.feed(times, got)
        return True

    def finish(self, record: RequestRecord, api: str) -> None:
        if self.done_ns is not None:
            record.end_ns = self.done_ns
        if not self.decoder.finish(record, len(self.times)):
            events = list(zip(self.times, b"".join(self.data).split(b"\n\n")[:-1], strict=True))
            decode_generic(events, record, api)


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


def decode_events(events: Sequence[Event], record: RequestRecord, api: str) -> None:
    """Fill ``record`` from ``events``: :class:`FastDecoder` when every event is one ``data: {...}``
    line (the events glued into one JSON array, ``b"\\n\\ndata: "`` -> ``b","``, all in C), else
    :func:`decode_generic`, which gives the same answer."""
    n = len(events)
    if _DECODE_MANY is None or n == 0:
        decode_generic(events, record, api)
        return
    times, evs = zip(*events, strict=True)
    joined = b"\n\n".join(evs)
    # every event starts with "data: " and holds no other newline: the separators are the only ones
    if not joined.startswith(b"data: ") or joined.count(b"\n") != 2 * (n - 1) \
            or joined.count(b"\n\ndata: ") != n - 1:
        decode_generic(events, record, api)
        return
    fast = FastDecoder(api)
    fast.feed_array(times, b"[" + joined[6:].replace(b"\n\ndata: ", b",") + b"]", n)
    if not fast.finish(record):
        decode_generic(events, record, api)


class FastDecoder:
    """The fast decode, fed batch by batch while the stream runs.

    Each batch is decoded by one call of a typed msgspec decoder (the events glued into one JSON
    array) that reads only the fields used here. ``ok`` turns False at the first batch that is not
    the fast case (other SSE shapes, JSON the decoder's types don't fit, an error event, no
    msgspec); then :meth:`finish` declines and the caller runs :func:`decode_generic`.
    """

    __slots__ = ("chat", "chunk_ns", "chunk_tokens", "exact", "cumulative", "usage_out", "usage_in", "finish_reason",
                 "n", "ok", "pending", "last_ns")

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
        self.last_ns: int | None = None  # arrival of the last event

    def feed(self, times: list[int], data: bytes) -> None:
        """``data``: ``len(times)`` events, each ``b"data: <one line>\\n\\n"`` (checked by the caller).

        A read of a few events (a paced stream) is decoded at once, so that nothing piles up for
        the end of the stream; bigger batches (chunks arriving back-to-back) wait for
        :meth:`finish`, which keeps the client's reads few and large when it is the bottleneck.
        """
        if self.pending or len(times) > EAGER_EVENTS:
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
        if n:
            self.last_ns = times[-1]
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
                # completion_tokens grew still carried tokens (the first chunk may be one of them);
                # not once a chunk came without usage (a final usage block, transformers serve's)
                if not has_text and cum is not None and cum > cumulative and self.exact:
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
        ``n_events``, when this decoder did not see that many events."""
        for times, data in self.pending:
            self._decode(times, data)
        self.pending = []
        if not self.ok or (n_events is not None and self.n != n_events):
            return False
        fill_record(record, self.n, self.chunk_ns, self.chunk_tokens, self.exact, self.usage_out, self.usage_in,
                    self.finish_reason, self.last_ns)
        return True


def decode_generic(events: Sequence[Event], record: RequestRecord, api: str) -> None:
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
            record.error = record.error or f"malformed SSE: event without data: {short(ev)}"
            break
        raw = b"\n".join(data_lines)
        if raw == b"[DONE]":
            record.end_ns = record.end_ns or t
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            record.error = record.error or f"invalid JSON in SSE event: {short(raw)}"
            break
        if not isinstance(obj, dict):
            record.error = record.error or f"invalid JSON in SSE event: not an object: {short(raw)}"
            break
        if "error" in obj and not obj.get("choices"):
            err = obj["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            record.error = record.error or f"server error in stream: {short(str(msg).encode())}"
            break
        usage = obj.get("usage")
        cum: int | None = None
        if isinstance(usage, dict):
            try:  # a count of NaN, Infinity or a string: this request's error (1e30: the load client's, load/plausible)
                if usage.get("completion_tokens") is not None:
                    cum = int(usage["completion_tokens"])
                if usage.get("prompt_tokens") is not None:
                    usage_in = int(usage["prompt_tokens"])
            except (TypeError, ValueError, OverflowError):
                record.error = record.error or f"usage is not a token count: {short(raw)}"
                break
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
        if not has_text and obj.get("choices") and cum is not None and cum > cumulative and exact:
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
    fill_record(record, len(events), chunk_ns, chunk_tokens, exact, usage_out, usage_in, finish,
                events[-1][0] if events else None)


def fill_record(
    record: RequestRecord, n_events: int, chunk_ns: list[int], chunk_tokens: list[int],
    exact: bool, usage_out: int | None, usage_in: int | None, finish: str | None, last_ns: int | None = None,
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
        elif record.end_ns is None and finish is not None and last_ns is not None:
            record.end_ns = last_ns  # no [DONE], but a finish_reason and the end of the body: complete
        elif record.end_ns is None:
            record.error = f"stream ended without [DONE] or a finish_reason: after {n_events} events"


def short(b: bytes, limit: int = 80) -> str:
    """One printable line of server bytes (:func:`~pytest_perfgate.runtime.redaction.clean`: secrets
    masked before it is cut, control characters shown escaped, whitespace folded)."""
    return clean(b.decode("utf-8", "replace"), limit)

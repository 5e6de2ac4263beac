"""What a request can have produced: a count or time past these bounds is no measurement, and the
request is failed with the cause named (one rule for imported exports and live servers).

* Every time (ns) and count fits int64 (the store's integers; a time of 1e308 s is no send time).
* Output tokens: at most :data:`MAX_TOKENS` (10x the longest context window of any released model);
  at most what was asked (``max_tokens``) plus :data:`ASK_SLACK` where the request's limit is known;
  at most the UTF-8 bytes of the text the stream carried plus :data:`SPECIAL_SLACK` where the text
  is known (a byte-level tokenizer's token decodes to at least one byte; special tokens to none,
  hence the slack). A server that says 1e12 tokens for a 16-token request is not 1e15 tok/s.
"""

from __future__ import annotations

import math
import numbers

from ..contract import Request, RequestRecord

INT64 = 1 << 63
MAX_TOKENS = 100_000_000  # the longest context windows are ~10M tokens
ASK_SLACK = 8  # tokens over max_tokens a server may still count (an EOS or a stop string's tokens)
SPECIAL_SLACK = 4096  # tokens that decode to no text (special tokens, hidden reasoning)
PREFIX = "implausible:"


def _fmt(n: object) -> str:
    s = f"{n:.3g}" if isinstance(n, float) else str(n)
    return s if len(s) <= 24 else f"{s[:6]}...({len(s)} digits)"


def tokens(n: object, what: str = "output tokens", *, asked: int | None = None, text_bytes: int | None = None
           ) -> str | None:
    """Why ``n`` cannot be the request's count of ``what`` (None: it can)."""
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, numbers.Real) or \
            (not isinstance(n, numbers.Integral) and not math.isfinite(n)):
        return f"{PREFIX} {what} {_fmt(n)} is not a count"
    k: int = math.floor(n)  # type: ignore[assignment]  # finite here (10**400 too): compared exactly
    if k < 0:
        return f"{PREFIX} {what} {_fmt(n)} is negative"
    if k > MAX_TOKENS:
        return f"{PREFIX} {what} {_fmt(n)} > {MAX_TOKENS:,} (no model's sequence is that long)"
    if asked is not None and k > asked + ASK_SLACK:
        return f"{PREFIX} {what} {_fmt(n)} > max_tokens {asked} asked"
    if text_bytes is not None and k > text_bytes + SPECIAL_SLACK:
        return (f"{PREFIX} {what} {_fmt(n)} > the {text_bytes} bytes of text streamed + {SPECIAL_SLACK} "
                "(no tokenizer's tokens are that short)")
    return None


def _fits(r: RequestRecord) -> bool:
    """The common case at once: every number in range (no cause to name)."""
    c, ct, sch, end, out, pin = r.chunk_ns, r.chunk_tokens, r.scheduled_ns, r.end_ns, r.output_tokens, r.prompt_tokens
    return (-INT64 <= r.sent_ns < INT64 and -INT64 <= r.index < INT64
            and (sch is None or -INT64 <= sch < INT64) and (end is None or -INT64 <= end < INT64)
            and (not c or (-INT64 <= min(c) and max(c) < INT64))
            and (out is None or (type(out) is int and 0 <= out <= MAX_TOKENS))
            and (pin is None or (type(pin) is int and 0 <= pin <= MAX_TOKENS))
            and (not ct or (0 <= min(ct) and max(ct) <= MAX_TOKENS)))


def problem(r: RequestRecord) -> str | None:
    """Why ``r``'s numbers cannot be a measurement (None: they can): a time or a count past int64,
    a token count past :func:`tokens`' bounds (without the per-request ones, which need the request).
    A few comparisons a record (100k records: ~0.2 s)."""
    if _fits(r):
        return None
    for name, v in (("send time", r.sent_ns), ("scheduled time", r.scheduled_ns), ("end time", r.end_ns)):
        if v is not None and not -INT64 <= v < INT64:
            return f"{PREFIX} {name} is past int64 ns (no clock reads it)"
    c = r.chunk_ns
    if c and not (-INT64 <= min(c) and max(c) < INT64):
        return f"{PREFIX} a chunk time is past int64 ns (no clock reads it)"
    if not -INT64 <= r.index < INT64:
        return f"{PREFIX} request index {_fmt(r.index)} is past int64"
    for what, n in (("output tokens", r.output_tokens), ("prompt tokens", r.prompt_tokens)):
        if n is not None and not (type(n) is int and 0 <= n <= MAX_TOKENS):
            return tokens(n, what)
    ct = r.chunk_tokens
    if ct and not (0 <= min(ct) and max(ct) <= MAX_TOKENS):
        return tokens(max(ct, key=abs), "tokens in a chunk")
    return None


def fail(r: RequestRecord, why: str) -> None:
    """``r`` failed with ``why``; every number it keeps is one the store can hold (finite, int64):
    its garbage is dropped, its send time kept only when it is one."""
    r.error = r.error or why
    r.chunk_ns, r.chunk_tokens, r.end_ns = [], [], None
    if r.output_tokens is not None and tokens(r.output_tokens):
        r.output_tokens = None
    if r.prompt_tokens is not None and tokens(r.prompt_tokens, "prompt tokens"):
        r.prompt_tokens = None
    if r.scheduled_ns is not None and not -INT64 <= r.scheduled_ns < INT64:
        r.scheduled_ns = None


def asked(request: Request) -> int | None:
    """The output tokens ``request`` asked for: ``max_tokens``, or the limit its ``extra`` sends instead."""
    for key in ("max_completion_tokens", "max_tokens"):
        v = request.extra.get(key)
        if key in request.extra:
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
    return request.max_tokens if isinstance(request.max_tokens, int) and request.max_tokens >= 0 else None


def check(r: RequestRecord, request: Request) -> None:
    """A live request's record: failed with the cause named when a count or time it holds cannot be
    (a server that says usage 1e12 for a 16-token request), its numbers then dropped (finite, int64)."""
    why = problem(r)
    if why is None and r.ok:
        why = tokens(r.output_tokens if r.output_tokens is not None else sum(r.chunk_tokens), asked=asked(request))
    if why is not None:
        fail(r, why)

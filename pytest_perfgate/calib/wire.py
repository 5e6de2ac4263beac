"""HTTP/1.1 framing of the scripted server's answers, and the scheduled wait before each write."""

from __future__ import annotations

import asyncio
import time


class Reply(Exception):
    """A whole (not streamed) answer: raised where it is decided, written by the router."""

    def __init__(self, status: int, body: bytes, ctype: bytes = b"application/json") -> None:
        super().__init__(status)
        self.status, self.body, self.ctype = status, body, ctype


REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 500: "Internal Server Error",
           503: "Service Unavailable", 429: "Too Many Requests"}


def head(status: int, ctype: bytes, length: int | None) -> bytes:
    reason = REASONS.get(status, "Status")
    h = f"HTTP/1.1 {status} {reason}\r\n".encode() + b"Content-Type: " + ctype + b"\r\n"
    if length is None:
        h += b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"
    else:
        h += f"Content-Length: {length}\r\n".encode()
    return h + b"\r\n"


def frame(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


async def sleep_until(target_ns: int, precise: bool) -> None:
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

"""What the ``openai`` engine asks of an HTTP client: the :class:`Transport` protocol, the
:class:`Response` a transport fills for one streamed request, and :class:`TransportError`."""

from __future__ import annotations

from typing import Protocol

from ...contract import Clock, RequestRecord
from .sse import ChunkEvents, EventSplitter, decode_events


class TransportError(Exception):
    """A request that failed below HTTP; ``str()`` is the record's error text (short, no body).

    ``keep_events``: the events that arrived before the failure are still decoded (a stream cut
    mid-way keeps its chunks; the record stays failed)."""

    def __init__(self, message: str, keep_events: bool = False) -> None:
        super().__init__(message)
        self.keep_events = keep_events


class Response:
    """One streamed response as a transport leaves it: send stamps, status, error body, and the
    SSE events, either split by :attr:`splitter` or (the raw transport's common case) checked
    and decoded chunk by chunk in :attr:`chunks`."""

    __slots__ = ("api", "sent_ns", "connect_ns", "status", "body", "location", "splitter", "chunks")

    def __init__(self, api: str) -> None:
        self.api = api
        self.sent_ns: int | None = None  # clock() right before the request was written (after any connect)
        self.connect_ns: int | None = None  # time spent opening a new connection; None: one was reused
        self.status = 0  # 0: no response head arrived
        self.body = b""  # the body of an HTTP error (status >= 400)
        self.location: str | None = None  # a redirect's Location (never followed)
        self.splitter = EventSplitter()
        self.chunks: ChunkEvents | None = None

    def events_received(self) -> int:
        return len(self.chunks.times) if self.chunks is not None else len(self.splitter.events)

    def done_seen(self) -> bool:
        """Did the stream end with ``data: [DONE]``?"""
        return (self.chunks.done_ns if self.chunks is not None else self.splitter.done_ns) is not None

    def stamps_into(self, record: RequestRecord) -> None:
        if self.sent_ns is not None:
            record.sent_ns = self.sent_ns
        record.connect_ns = self.connect_ns

    def decode(self, record: RequestRecord) -> None:
        """Chunks, token counts, usage, end of stream into ``record`` (an error already set stays)."""
        if self.chunks is not None:
            self.chunks.finish(record, self.api)
            return
        if self.splitter.done_ns is not None:
            record.end_ns = self.splitter.done_ns
        decode_events(self.splitter.events, record, self.api)


class Transport(Protocol):
    """An HTTP client of one server. Runs on the engine loop (:func:`pytest_perfgate.contract.run_sync`)."""

    kind: str  # "raw" | "aiohttp", shown in the engine's info

    async def get(self, path: str, timeout: float) -> tuple[int, bytes] | None:
        """(status, body) of ``GET path``, or None when the server can't be reached in time or its
        body is over :data:`.sse.EVENT_LIMIT` (8 MiB: a /metrics or /version; never read further)."""
        ...

    async def stream(self, path: str, payload: bytes, clock: Clock, response: Response) -> None:
        """POST ``payload`` (JSON) to ``path`` and fill ``response`` as the answer streams in; every
        read is stamped with ``clock()`` before it is parsed. Raises :class:`TransportError`; on
        cancellation (a timeout) ``response`` holds what arrived before the cancellation is re-raised."""
        ...

    async def close(self) -> None: ...

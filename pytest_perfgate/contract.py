"""The contract between load generation and engines: what a request is, what it leaves behind, the
engine protocol, the clock and the event loop every engine shares.

Both :mod:`pytest_perfgate.engines` and :mod:`pytest_perfgate.load` import this module and never
each other. All times are ``time.perf_counter_ns()`` integers taken by the client on the receive
path, before any parsing. Derived metrics (TTFT, TPOT, ITL, ...) live in
:mod:`pytest_perfgate.load.metrics`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, overload, runtime_checkable

from .runtime.redaction import clean

T = TypeVar("T")

clock = time.perf_counter_ns  # the clock of every measurement


class Clock(Protocol):
    def __call__(self) -> int: ...


class EngineError(RuntimeError):
    """An engine that could not start or serve; the message carries the engine's log tail."""


@dataclass(frozen=True)
class Request:
    """One request to send: prompt text (or token ids), how many tokens to generate, sampling."""

    prompt: str | tuple[int, ...]
    max_tokens: int
    prompt_tokens: int | None = None  # the exact length the prompt was built to have, if known
    ignore_eos: bool = True
    temperature: float = 0.0
    api: Literal["completions", "chat"] = "completions"
    tag: str = ""  # prompt-set name, e.g. "dialogue" / "math" / "shared-prefix"
    extra: Mapping[str, Any] = field(default_factory=dict)  # passed to the engine unchanged
    # replay (load/traces.py): seconds after the trace's start; LoadConfig(mode="trace") sends it then
    arrival: float | None = None
    session: str = ""  # multi-turn: turn k of a session is sent only after its turn k - 1 finished
    turn: int = 0


class _Cause:
    """``RequestRecord.error``: every cause is cleaned as it is set, whoever sets it (the one choke
    point: :func:`~pytest_perfgate.runtime.redaction.clean` masks the session's secrets and any
    credential header, shows control characters escaped and bounds the length)."""

    @overload
    def __get__(self, obj: None, owner: Any = None) -> None: ...
    @overload
    def __get__(self, obj: RequestRecord, owner: Any = None) -> str | None: ...
    def __get__(self, obj: RequestRecord | None, owner: Any = None) -> str | None:
        return None if obj is None else obj.__dict__.get("error")  # None: the dataclass default

    def __set__(self, obj: RequestRecord, value: str | None) -> None:
        obj.__dict__["error"] = None if value is None else clean(str(value))


@dataclass
class RequestRecord:
    """Everything measured about one request. ``error`` set means the request failed."""

    index: int
    tag: str = ""
    scheduled_ns: int | None = None  # when the schedule wanted it sent
    sent_ns: int = 0  # when it was actually sent (the socket write, after any connection setup)
    connect_ns: int | None = None  # time spent opening a new connection before sent_ns; None: one was reused
    chunk_ns: list[int] = field(default_factory=list)  # arrival of every chunk carrying output
    chunk_tokens: list[int] = field(default_factory=list)  # output tokens in each such chunk
    end_ns: int | None = None  # end of stream ([DONE] / final output)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    expected_prompt_tokens: int | None = None
    token_count_source: Literal["server", "tokenizer", "chunks"] = "server"
    finish_reason: str | None = None
    error: _Cause = _Cause()  # str | None, cleaned as set: short cause, e.g. "HTTP 400: ...", "timeout", "stream ended without [DONE]"
    warmup: bool = False
    host: str = ""  # the client host that sent it (workers on a Ray cluster, load/ray_workers.py); "": this one

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def first_chunk_ns(self) -> int | None:
        return self.chunk_ns[0] if self.chunk_ns else None

    @property
    def last_chunk_ns(self) -> int | None:
        return self.chunk_ns[-1] if self.chunk_ns else None


@runtime_checkable
class Engine(Protocol):
    """One engine instance. ``start``/``stop`` are idempotent; ``generate`` runs on :func:`run_sync`'s loop."""

    name: str  # the [engines.NAME] it was built from
    kind: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    async def generate(self, request: Request, record: RequestRecord, clock: Clock) -> None:
        """Send ``request``, stream the answer, fill ``record`` (times from ``clock``).

        Never raises for a failed request: sets ``record.error`` to a short cause instead.
        """
        ...

    async def counters(self) -> dict[str, float]:
        """A snapshot of the engine's monotonic counters and gauges, Prometheus names without
        the ``_total`` suffix, labelled series as ``name{label="v"}``. Empty if none."""
        ...

    def info(self) -> dict[str, Any]:
        """Engine kind, version, model, full arguments (no secrets), device."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the engine's tokenizer (no special tokens)."""
        ...

    def tokenizer(self) -> Any:
        """A Hugging Face tokenizer of the served model (for exact-length prompts)."""
        ...


class _LoopThread:
    """One asyncio loop in a daemon thread, shared by every engine of the process.

    Engines such as vLLM's AsyncLLM bind to the loop they were created on, so all async work of a
    session runs on this loop and synchronous callers block on :meth:`run`.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                t = threading.Thread(target=loop.run_forever, name="perfgate-loop", daemon=True)
                t.start()
                self._loop = loop
            return self._loop

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.get())  # type: ignore[arg-type]
        try:
            return fut.result(timeout)
        except BaseException:
            fut.cancel()
            raise


LOOP = _LoopThread()


def run_sync(coro: Awaitable[T], timeout: float | None = None) -> T:
    """Run ``coro`` on the shared engine loop and wait for its result."""
    return LOOP.run(coro, timeout)

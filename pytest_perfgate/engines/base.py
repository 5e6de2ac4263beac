"""The engine protocol, the registry of engine kinds, and the event-loop thread engines share.

An engine is what requests go to: vLLM in-process, an OpenAI-compatible server, a vLLM server
subprocess. Each kind is one module that registers a factory here. Heavy imports (vllm, torch,
aiohttp) happen inside the kind's module, which is imported only when that kind is created.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..load.records import Request, RequestRecord

T = TypeVar("T")


class EngineError(RuntimeError):
    """An engine that could not start or serve; the message carries the engine's log tail."""


class Clock(Protocol):
    def __call__(self) -> int: ...


@runtime_checkable
class Engine(Protocol):
    """One engine instance. ``start``/``stop`` are idempotent; ``generate`` runs on :func:`loop`."""

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


EngineFactory = Callable[[str, Mapping[str, Any]], Engine]

_SECRET = re.compile(r"(?:^|[-_])(?:key|token|secret|password|passwd|auth|credentials?)(?:$|[-_])", re.IGNORECASE)


def redact_args(value: Any, secret: bool = False) -> Any:
    """Engine arguments fit for results and logs: the values of secret-looking keys (``api_key``,
    ``HF_TOKEN`` in an ``env`` table, ...) become ``"***"``, at any depth."""
    if isinstance(value, Mapping):
        return {k: redact_args(v, secret or bool(_SECRET.search(str(k)))) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_args(v, secret) for v in value]
    return "***" if secret and value is not None else value


def redact_command(command: list[str]) -> list[str]:
    """A command line with the value after a secret-looking ``--flag`` (``--api-key X``) masked."""
    out: list[str] = []
    for i, a in enumerate(command):
        prev = command[i - 1] if i else ""
        if prev.startswith("--") and "=" not in prev and _SECRET.search(prev):
            out.append("***")
        elif a.startswith("--") and "=" in a and _SECRET.search(a.split("=", 1)[0]):
            out.append(a.split("=", 1)[0] + "=***")
        else:
            out.append(a)
    return out

# kind -> "module:function" (imported lazily so that listing kinds costs nothing)
_REGISTRY: dict[str, str] = {
    "vllm": "pytest_perfgate.engines.vllm_inproc:create",
    "openai": "pytest_perfgate.engines.openai:create",
    "vllm-server": "pytest_perfgate.engines.vllm_server:create",
    "transformers-vlm": "pytest_perfgate.engines.transformers_vlm:create",
}


def register(kind: str, target: str) -> None:
    """Register an engine kind implemented by ``"module:function"`` (name, args) -> Engine."""
    _REGISTRY[kind] = target


def kinds() -> list[str]:
    return sorted(_REGISTRY)


def create(name: str, kind: str, args: Mapping[str, Any]) -> Engine:
    """Build (not start) engine ``name`` of ``kind`` with its own arguments ``args``."""
    target = _REGISTRY.get(kind)
    if target is None:
        raise EngineError(f"engine {name!r}: unknown kind {kind!r}; available kinds: {', '.join(kinds())}")
    module, func = target.split(":")
    factory: EngineFactory = getattr(importlib.import_module(module), func)
    return factory(name, args)


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

"""Real vLLM engines (CPU) on the tiny generated models, started once per session.

Only one vLLM engine runs at a time (memory): :class:`EngineSlot` stops the running engine before
it starts another, and restarts one that a later test asks for again.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_perfgate.contract import Request, RequestRecord, run_sync
from pytest_perfgate.engines.registry import create
from pytest_perfgate.engines.vllm_inproc import EMBEDDED_CPU_OPTIONS
from pytest_perfgate.load.metrics import e2e_ns, itl_ns, ttft_ns
from pytest_perfgate.models import ModelSet, make_models
from pytest_perfgate.runtime.timeouts import scaled

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

MAX_MODEL_LEN = 8448  # 8,000-token prompts + 256 output tokens fit
NUM_SPEC_TOKENS = 3

#: Seconds each engine took to start, by key (printed at the end of the session).
START_SECONDS: dict[str, float] = {}


class EngineSlot:
    """Holds at most one started engine; ``get`` swaps engines when another one is wanted."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.engine: Any = None

    def get(self, key: str, factory: Callable[[], Any]) -> Any:
        if self.key == key and self.engine is not None:
            return self.engine
        self.close()
        engine = factory()
        t0 = time.monotonic()
        engine.start()
        START_SECONDS[key] = time.monotonic() - t0
        self.key, self.engine = key, engine
        return engine

    def close(self) -> None:
        engine, self.engine, self.key = self.engine, None, None
        if engine is not None:
            engine.stop()


@pytest.fixture(scope="session")
def tiny_models() -> ModelSet:
    """The generated target / drafts / tokenizer (shared default cache: generated once)."""
    return make_models()


SLOT = EngineSlot()


@pytest.fixture(scope="session")
def engine_slot() -> Iterator[EngineSlot]:
    yield SLOT
    SLOT.close()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the slot's engine after the last test of this folder: an idle engine core (and server)
    would otherwise keep polling beside the rest of the session's tests until it ends."""
    here = Path(__file__).parent
    if SLOT.engine is not None and (nextitem is None or here not in nextitem.path.parents):
        SLOT.close()


def spec_config(models: ModelSet) -> dict[str, Any]:
    return {"method": "draft_model", "model": str(models.draft), "num_speculative_tokens": NUM_SPEC_TOKENS}


def inproc_args(models: ModelSet) -> dict[str, Any]:
    """The embedded default's CPU start options (eager, one process: the fork server starts it)."""
    return {
        "model": str(models.target),
        "dtype": "float32",
        "max_model_len": MAX_MODEL_LEN,
        "gpu_memory_utilization": 0.3,
        "enable_prefix_caching": True,
        "speculative_config": spec_config(models),
        **EMBEDDED_CPU_OPTIONS,
    }


def server_args(models: ModelSet) -> dict[str, Any]:
    return {
        **inproc_args(models),
        "startup_timeout": scaled(300),
        "env": {"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")},
    }


@pytest.fixture
def vllm_engine(engine_slot: EngineSlot, tiny_models: ModelSet) -> Any:
    """In-process vLLM: target + calibrated draft (speculative), prefix caching on."""
    return engine_slot.get("vllm", lambda: create("tiny", "vllm", inproc_args(tiny_models)))


@pytest.fixture
def vllm_server(engine_slot: EngineSlot, tiny_models: ModelSet) -> Any:
    """vLLM OpenAI server subprocess with the same models, through the openai engine."""
    return engine_slot.get("vllm-server", lambda: create("tiny-server", "vllm-server", server_args(tiny_models)))


# -- helpers shared by the engine tests (exposed through the ``tools`` fixture) ---------------------
def run_requests(engine: Any, requests: list[Request]) -> list[RequestRecord]:
    """Send ``requests`` concurrently on the shared loop; return their records."""

    async def go() -> list[RequestRecord]:
        records = [RequestRecord(index=i, tag=r.tag) for i, r in enumerate(requests)]
        await asyncio.gather(
            *(engine.generate(q, rec, time.perf_counter_ns) for q, rec in zip(requests, records, strict=True))
        )
        return records

    return run_sync(go(), timeout=scaled(300))


def token_prompt(n: int, seed: int) -> tuple[int, ...]:
    """``n`` random ordinary token ids (the specials sit below 6)."""
    rng = random.Random(seed)
    return tuple(rng.randrange(6, 512) for _ in range(n))


def check_stream(rec: RequestRecord, max_tokens: int, prompt_len: int) -> None:
    """A complete, well-formed streamed record with exact token counts."""
    assert rec.ok, rec.error
    assert rec.prompt_tokens == prompt_len
    assert rec.output_tokens == max_tokens == sum(rec.chunk_tokens)
    assert rec.token_count_source == "server"
    assert rec.finish_reason == "length"
    assert all(n > 0 for n in rec.chunk_tokens)
    assert rec.chunk_ns == sorted(rec.chunk_ns) and rec.sent_ns <= rec.chunk_ns[0]
    ttft, e2e = ttft_ns(rec), e2e_ns(rec)
    # <=: a stream may legitimately arrive in one read (coalesced chunks: first = last arrival)
    assert ttft is not None and e2e is not None and 0 < ttft <= e2e
    assert rec.chunk_ns[-1] - rec.chunk_ns[0] == sum(itl_ns(rec))
    assert rec.end_ns is not None and rec.end_ns >= rec.chunk_ns[-1]


def spec_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after if k.startswith("vllm:spec_decode")}


@pytest.fixture(scope="session")
def tools() -> SimpleNamespace:
    """The helpers above and the engine constants, for the test modules."""
    return SimpleNamespace(
        run_requests=run_requests,
        token_prompt=token_prompt,
        check_stream=check_stream,
        spec_deltas=spec_deltas,
        inproc_args=inproc_args,
        MAX_MODEL_LEN=MAX_MODEL_LEN,
        NUM_SPEC_TOKENS=NUM_SPEC_TOKENS,
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if START_SECONDS:
        starts = ", ".join(f"{k} {v:.1f} s" for k, v in START_SECONDS.items())
        terminalreporter.write_line(f"perfgate engine start times: {starts}")

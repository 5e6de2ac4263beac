"""What one streamed request and one load run leave behind (raw, before any metric is derived).

All times are ``time.perf_counter_ns()`` integers taken by the client on the receive path, before
any parsing. Derived metrics (TTFT, TPOT, ITL, ...) live in :mod:`pytest_perfgate.load.metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


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
    error: str | None = None  # short cause, e.g. "HTTP 400: ...", "timeout", "stream ended without [DONE]"
    warmup: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def first_chunk_ns(self) -> int | None:
        return self.chunk_ns[0] if self.chunk_ns else None

    @property
    def last_chunk_ns(self) -> int | None:
        return self.chunk_ns[-1] if self.chunk_ns else None

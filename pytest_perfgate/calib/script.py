"""The script of one streamed answer: its timing, its chunks, and an optional fault."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FAULTS = ("status", "hang", "hang_mid", "cut", "malformed", "invalid_json", "no_done", "empty", "wrong_usage",
          "no_finish")


@dataclass(frozen=True)
class Script:
    """Timing and behaviour of one streamed answer (seconds; token counts are output tokens)."""

    ttft: float = 0.005  # request body read -> first chunk
    itl: float | Sequence[float] = 0.001  # gap between chunks (one value, or one per gap)
    tokens_per_chunk: int | Sequence[int] = 1  # int, or the exact list of tokens of every chunk
    n_chunks: int | None = None  # default: enough chunks for max_tokens
    fault: str | None = None
    status: int = 500
    body: str = "scripted failure"
    cut_after: int = 1
    usage_delta: int = 5
    prompt_tokens: int | None = None  # default: len(token ids) or whitespace words of the text
    cached_tokens: int = 0  # prefix-cache hits counted for this request
    num_spec_tokens: int = 0  # >0: count a draft of this many tokens per chunk (spec-decode counters)
    # Finish the wait for each chunk by spinning: sub-millisecond schedule accuracy, but in-process
    # the spin holds the GIL and delays the client's thread, so it is off by default (the ground
    # truth records actual write times either way); the CLI's --precise turns it on.
    precise: bool = False
    id: str | None = None  # client's id, echoed into the ground truth

    def with_overrides(self, overrides: Mapping[str, Any]) -> Script:
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(overrides) - names
        if unknown:
            raise ValueError(f"unknown script fields: {sorted(unknown)}")
        fault = overrides.get("fault", self.fault)
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
        return dataclasses.replace(self, **dict(overrides))

    def chunk_tokens(self, max_tokens: int) -> list[int]:
        """Tokens in each chunk of the answer."""
        if not isinstance(self.tokens_per_chunk, int):
            return [int(t) for t in self.tokens_per_chunk]
        tpc = max(1, self.tokens_per_chunk)
        if self.n_chunks is not None:
            return [tpc] * self.n_chunks
        full, rest = divmod(max(0, max_tokens), tpc)
        return [tpc] * full + ([rest] if rest else [])

    def gap_ns(self, k: int) -> int:
        """Scheduled gap before chunk ``k`` (k >= 1)."""
        itl = self.itl
        v = itl if isinstance(itl, (int, float)) else itl[min(k - 1, len(itl) - 1)]
        return int(round(float(v) * 1e9))



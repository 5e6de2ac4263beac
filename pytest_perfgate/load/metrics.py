"""Metrics derived from :class:`RequestRecord` lists and counter snapshots (METRICS.md, exactly).

Per request, on the client's ``perf_counter_ns`` clock, in integer nanoseconds:

* TTFT = first chunk carrying output - sent;  E2E = last chunk - sent;
* ITL = every gap between consecutive chunks (per chunk, not per token; the tokens of the later
  chunk are kept beside each gap), so that ``E2E - TTFT == sum(ITL)`` holds exactly;
* TPOT = (E2E - TTFT) / (N_out - 1), undefined when N_out <= 1 (excluded and counted, never 0);
* decode rate = (N_out - 1) / (E2E - TTFT);  queue time = sent - scheduled.

N_out is the server's usage count when the record has one, else the sum of tokens per chunk.
Warm-up records and failed requests are excluded from latency metrics. Functions here have no side
effects and never turn missing data into 0: they return empty lists or None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..contract import RequestRecord
from ..verdicts.samples import ARRIVAL, Proportion

NS = 1_000_000_000


def measured(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """Records that count (warm-up excluded), failed ones included."""
    return [r for r in records if not r.warmup]


def successful(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """Measured records of requests that succeeded and streamed at least one chunk."""
    return [r for r in records if not r.warmup and r.ok and r.chunk_ns]


# -- per request ---------------------------------------------------------------------------------
def output_tokens(r: RequestRecord) -> int:
    """N_out: the server's count when known, else the tokens counted per chunk."""
    return r.output_tokens if r.output_tokens is not None else sum(r.chunk_tokens)


def ttft_ns(r: RequestRecord) -> int | None:
    return r.chunk_ns[0] - r.sent_ns if r.chunk_ns else None


def e2e_ns(r: RequestRecord) -> int | None:
    return r.chunk_ns[-1] - r.sent_ns if r.chunk_ns else None


def itl_ns(r: RequestRecord) -> list[int]:
    """Gaps between consecutive chunks of one request."""
    c = r.chunk_ns
    return [c[i + 1] - c[i] for i in range(len(c) - 1)]


def tpot_ns(r: RequestRecord) -> float | None:
    """(E2E - TTFT) / (N_out - 1); None when N_out <= 1 (undefined, not 0)."""
    n = output_tokens(r)
    if n <= 1 or not r.chunk_ns:
        return None
    return (r.chunk_ns[-1] - r.chunk_ns[0]) / (n - 1)


def decode_rate(r: RequestRecord) -> float | None:
    """(N_out - 1) / (E2E - TTFT) in tokens per second; None when undefined."""
    n = output_tokens(r)
    if n <= 1 or not r.chunk_ns:
        return None
    span = r.chunk_ns[-1] - r.chunk_ns[0]
    return (n - 1) * NS / span if span > 0 else None


def queue_ns(r: RequestRecord) -> int | None:
    return r.sent_ns - r.scheduled_ns if r.scheduled_ns is not None else None


# -- pooled over a run -----------------------------------------------------------------------------
def ttfts(records: Iterable[RequestRecord]) -> list[int]:
    return [r.chunk_ns[0] - r.sent_ns for r in successful(records)]


def e2es(records: Iterable[RequestRecord]) -> list[int]:
    return [r.chunk_ns[-1] - r.sent_ns for r in successful(records)]


def itls(records: Iterable[RequestRecord]) -> tuple[list[int], list[int]]:
    """All gaps pooled, and the tokens carried by the chunk that ends each gap."""
    gaps: list[int] = []
    tokens: list[int] = []
    for r in successful(records):
        gaps.extend(itl_ns(r))
        tokens.extend(r.chunk_tokens[1:] if len(r.chunk_tokens) == len(r.chunk_ns) else [1] * (len(r.chunk_ns) - 1))
    return gaps, tokens


def chunk_times(records: Sequence[RequestRecord]) -> tuple[Any, Any, Any]:
    """Every chunk time of ``records`` in one int64 array, each record's first position in it and its
    chunk count (numpy: a 100k-request run's 3 M chunk times without 3 M Python ints)."""
    import itertools

    import numpy as np

    lens = np.fromiter((len(r.chunk_ns) for r in records), np.int64, len(records))
    flat = np.fromiter(itertools.chain.from_iterable(r.chunk_ns for r in records), np.int64, int(lens.sum()))
    return flat, np.cumsum(lens) - lens, lens


def itl_array(records: Iterable[RequestRecord]) -> Any:
    """The gaps of :func:`itls` (ns, same order) as one int64 array."""
    return itl_gaps_and_ends(records)[0]


def itl_gaps_and_ends(records: Iterable[RequestRecord]) -> tuple[Any, Any]:
    """The gaps of :func:`itls` (ns) and the chunk time each gap ended at (its arrival order)."""
    import numpy as np

    flat, starts, _ = chunk_times(successful(records))  # every one has a chunk
    inside = np.ones(max(flat.size - 1, 0), dtype=bool)  # consecutive chunks of one request
    inside[starts[1:] - 1] = False
    return np.diff(flat)[inside], flat[1:][inside]


@dataclass(frozen=True)
class Excluded:
    """Per-request values with the number of requests where the metric is undefined."""

    values: list[float]
    excluded: int
    reason: str = ""


def tpots(records: Iterable[RequestRecord]) -> Excluded:
    ok = successful(records)
    vals = [v for v in (tpot_ns(r) for r in ok) if v is not None]
    skipped = len(ok) - len(vals)
    return Excluded(vals, skipped, f"{skipped} request(s) with <= 1 output token (TPOT undefined)" if skipped else "")


def decode_rates(records: Iterable[RequestRecord]) -> Excluded:
    ok = successful(records)
    vals = [v for v in (decode_rate(r) for r in ok) if v is not None]
    skipped = len(ok) - len(vals)
    return Excluded(vals, skipped, f"{skipped} request(s) with <= 1 output token (decode rate undefined)" if skipped else "")


def queue_times(records: Iterable[RequestRecord]) -> list[int]:
    """Client queue time of every measured request that was sent on a schedule."""
    return [q for q in (queue_ns(r) for r in measured(records) if r.sent_ns) if q is not None]


def run_span_ns(records: Iterable[RequestRecord]) -> tuple[int, int] | None:
    """(first send, last response) over measured records that were sent; None when none was."""
    rs = [r for r in measured(records) if r.sent_ns]
    if not rs:
        return None
    first = min(r.sent_ns for r in rs)
    last = max(max(r.end_ns or 0, r.last_chunk_ns or 0, r.sent_ns) for r in rs)
    return first, last


def output_throughput(records: Sequence[RequestRecord]) -> float | None:
    """Sum of output tokens of successful requests / (last response - first send), tok/s."""
    span = run_span_ns(records)
    if span is None or span[1] <= span[0]:
        return None
    return sum(output_tokens(r) for r in successful(records)) * NS / (span[1] - span[0])


def request_throughput(records: Sequence[RequestRecord]) -> float | None:
    """Completed (successful) requests / run duration, req/s."""
    span = run_span_ns(records)
    if span is None or span[1] <= span[0]:
        return None
    return len(successful(records)) * NS / (span[1] - span[0])


def meets_slos(r: RequestRecord, slos: Mapping[str, float]) -> bool:
    """Whether one successful request meets every SLO (limits in seconds: ttft, tpot, e2e).

    An undefined TPOT (N_out <= 1) does not violate a TPOT limit.
    """
    for name, limit in slos.items():
        limit_ns = limit * NS
        if name == "ttft":
            v: float | None = ttft_ns(r)
        elif name == "tpot":
            v = tpot_ns(r)
        elif name in ("e2e", "e2el", "latency"):
            v = e2e_ns(r)
        else:
            raise ValueError(f"unknown SLO {name!r} (known: ttft, tpot, e2e)")
        if v is not None and v > limit_ns:
            return False
    return True


def goodput(records: Sequence[RequestRecord], slos: Mapping[str, float]) -> float | None:
    """Requests meeting every SLO per second of run duration."""
    span = run_span_ns(records)
    if span is None or span[1] <= span[0]:
        return None
    good = sum(1 for r in successful(records) if meets_slos(r, slos))
    return good * NS / (span[1] - span[0])


def error_rate(records: Iterable[RequestRecord]) -> Proportion:
    """Failed of measured requests, one cluster per request in send order (``ARRIVAL``): the verdict
    blocks them by the run's dependence (a crashed server fails many requests in a row)."""
    rs = sorted(measured(records), key=lambda r: r.sent_ns or 0)
    bad = [0 if r.ok else 1 for r in rs]
    return Proportion(sum(bad), len(rs), label="error_rate", cluster_successes=tuple(bad),
                      cluster_trials=(1,) * len(rs), cluster_unit=ARRIVAL)


# -- from counters ---------------------------------------------------------------------------------
def delta(before: Mapping[str, float], after: Mapping[str, float], name: str) -> float | None:
    """after - before of one counter (name without ``_total``); None when the server lacks it."""
    if name not in after:
        return None
    return after[name] - before.get(name, 0.0)


ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
DRAFTS = "vllm:spec_decode_num_drafts"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
PREFIX_HITS = "vllm:prefix_cache_hits"
PREFIX_QUERIES = "vllm:prefix_cache_queries"
KV_USAGE = "vllm:kv_cache_usage_perc"


def per_position(before: Mapping[str, float], after: Mapping[str, float]) -> list[tuple[int, float]]:
    """(position, accepted at that position / drafts) from the per-position counters."""
    drafts = delta(before, after, DRAFTS)
    out: list[tuple[int, float]] = []
    prefix = PER_POS + '{position="'
    for key in after:
        if key.startswith(prefix):
            pos = int(key[len(prefix):].split('"', 1)[0])
            d = delta(before, after, key) or 0.0
            if drafts:
                out.append((pos, d / drafts))
    return sorted(out)


def acceptance(before: Mapping[str, float], after: Mapping[str, float]) -> Proportion | None:
    """Accepted / proposed draft tokens over the run; per-position rates in ``extra``."""
    acc, prop = delta(before, after, ACCEPTED), delta(before, after, DRAFT_TOKENS)
    if acc is None or prop is None:
        return None
    extra = tuple((f"position {p}", v) for p, v in per_position(before, after))
    return Proportion(int(round(acc)), int(round(prop)), label="acceptance_rate", extra=extra)


def acceptance_length(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """1 + accepted / drafts (mean tokens per target forward pass)."""
    acc, drafts = delta(before, after, ACCEPTED), delta(before, after, DRAFTS)
    if acc is None or not drafts:
        return None
    return 1.0 + acc / drafts


def prefix_cache_hit_rate(before: Mapping[str, float], after: Mapping[str, float]) -> Proportion | None:
    hits, queries = delta(before, after, PREFIX_HITS), delta(before, after, PREFIX_QUERIES)
    if hits is None or queries is None:
        return None
    return Proportion(int(round(hits)), int(round(queries)), label="prefix_cache_hit_rate")


def per_request(
    pooled: Proportion,
    before: Mapping[str, float],
    after: Mapping[str, float],
    snapshots: Sequence[Mapping[str, float]],
    hits: str,
    trials: str,
) -> Proportion:
    """``pooled`` with one cluster per request, from the counter snapshots taken after each request of a
    sequential run (counter deltas between consecutive snapshots). Without usable snapshots (concurrent
    run, counters missing, or snapshots that do not add up to the run's total) the run stays one
    unclustered proportion, pooled later as one cluster."""
    if not snapshots:
        return pooled
    cs: list[int] = []
    ct: list[int] = []
    prev = before
    for snap in [*snapshots, after]:
        dh, dt = delta(prev, snap, hits), delta(prev, snap, trials)
        if dh is None or dt is None or dh < 0 or dt < 0 or dh > dt:
            return pooled
        cs.append(int(round(dh)))
        ct.append(int(round(dt)))
        prev = snap
    if sum(cs) != pooled.successes or sum(ct) != pooled.trials:
        return pooled
    keep = [(s, t) for s, t in zip(cs, ct, strict=True) if t > 0]
    return Proportion(pooled.successes, pooled.trials, pooled.label, pooled.extra,
                      tuple(s for s, _ in keep), tuple(t for _, t in keep), "request")

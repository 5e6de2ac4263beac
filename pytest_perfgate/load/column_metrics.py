""":mod:`.metrics` on :class:`~.columns.RequestColumns`: the same numbers (bit for bit, in the same
order) from numpy operations over whole columns, no Python object a request or a chunk.

Exactness: TTFT, E2E, ITL and queue time are int64 differences converted to float64 as the list
path converts Python ints. TPOT ``span / (n - 1)`` and decode rate ``(n - 1) * 1e9 / span`` are one
float64 division of operands that are exact below 2**53 (a span of 104 days, 9M tokens), hence
correctly rounded as Python's ``int / int``; a row past that is computed with Python ints.
Throughputs divide Python ints as :func:`.metrics.output_throughput` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from ..verdicts.samples import ARRIVAL, Proportion, RequestCounts, Samples, make_samples
from .columns import NONE, RequestColumns

NS = 1_000_000_000
EXACT = float(1 << 53)


def _causes(c: RequestColumns, rows: np.ndarray) -> list[tuple[str, int]]:
    """``(error text, count)`` of the failed ``rows``, in the order each text first appears."""
    codes = c.error[rows]
    codes = codes[codes >= 0]
    if not codes.size:
        return []
    uniq, first, counts = np.unique(codes, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return [(c.errors[int(uniq[k])], int(counts[k])) for k in order]


def errors(c: RequestColumns, error_cause: Callable[[str], str]) -> Counter[str]:
    """``RunResult.errors`` (failed measured requests by cause), in first-seen order."""
    out: Counter[str] = Counter()
    for text, k in _causes(c, np.flatnonzero(c.measured)):
        out[error_cause(text)] += k
    return out


def request_counts(c: RequestColumns, url: str, error_cause: Callable[[str], str],
                   describe_error: Callable[[str, str], str]) -> RequestCounts:
    """``RunResult.request_counts`` of the columns (``error_cause``/``describe_error``: result.py's)."""
    reasons: dict[str, str] = {}
    failed: Counter[str] = Counter()
    for text, k in _causes(c, np.flatnonzero(c.measured)):
        cause = error_cause(text)
        if cause not in reasons:
            reasons[cause] = describe_error(text, url)
        failed[cause] += k
    return RequestCounts(int(c.measured.sum()), int(c.successful.sum()), dict(failed),
                         {k: v for k, v in reasons.items() if v})


def error_rate(c: RequestColumns) -> Proportion:
    """:func:`.metrics.error_rate`: one cluster a measured request, in send order."""
    rows = np.flatnonzero(c.measured)
    sent = c.sent_ns[rows]
    bad = (c.error[rows][np.argsort(sent, kind="stable")] >= 0).astype(np.int64).tolist()
    return Proportion(sum(bad), len(bad), label="error_rate", cluster_successes=tuple(bad),
                      cluster_trials=(1,) * len(bad), cluster_unit=ARRIVAL)


def queue_ns(c: RequestColumns) -> np.ndarray:
    """:func:`.metrics.queue_times` (int64 ns)."""
    keep = c.measured & (c.sent_ns != 0) & (c.scheduled_ns != NONE)
    return c.sent_ns[keep] - c.scheduled_ns[keep]  # type: ignore[no-any-return]


def seconds(values_ns: np.ndarray, name: str, sent_ns: np.ndarray | None = None) -> Samples:
    sent = None if sent_ns is None or sent_ns.size != values_ns.size else sent_ns.astype(np.float64) / 1e9
    return make_samples(values_ns.astype(np.float64) / 1e9, "s", label=name, sent=sent)


def per_request(c: RequestColumns, name: str, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """TPOT (ns) or decode rate (tok/s) of each of ``ok`` where defined, the rows it is defined for,
    and how many it is not (:func:`.metrics.tpots` / :func:`.metrics.decode_rates`)."""
    n = c.out_tokens(ok)
    span = c.last_chunk_ns(ok) - c.first_chunk_ns(ok)
    keep = n > 1 if name == "tpot" else (n > 1) & (span > 0)
    n, span, rows = n[keep], span[keep], ok[keep]
    if name == "tpot":
        num, den = span, n - 1
    else:
        num, den = (n - 1) * NS, span
    vals = num.astype(np.float64) / den.astype(np.float64)
    far = (np.abs(num) >= EXACT) | (np.abs(den) >= EXACT)
    for k in np.flatnonzero(far):  # past float64's exact integers: Python's correctly rounded int / int
        vals[k] = int(num[k]) / int(den[k])
    return vals, rows, int(ok.size - rows.size)


def span_ns(c: RequestColumns) -> tuple[int, int] | None:
    """:func:`.metrics.run_span_ns`: (first send, last response) over measured requests that were sent."""
    rows = np.flatnonzero(c.measured & (c.sent_ns != 0))
    if not rows.size:
        return None
    has = c.n_chunks[rows] > 0
    last_chunk = np.zeros(rows.size, dtype=np.int64)
    last_chunk[has] = c.last_chunk_ns(rows[has])
    end = np.where(c.end_ns[rows] == NONE, 0, c.end_ns[rows])
    return int(c.sent_ns[rows].min()), int(np.maximum(np.maximum(end, last_chunk), c.sent_ns[rows]).max())


def throughput(c: RequestColumns, name: str) -> float | None:
    """:func:`.metrics.output_throughput` (tok/s) or :func:`.metrics.request_throughput` (req/s)."""
    span = span_ns(c)
    if span is None or span[1] <= span[0]:
        return None
    ok = np.flatnonzero(c.successful)
    top = int(c.out_tokens(ok).sum()) if name == "output_throughput" else int(ok.size)
    return top * NS / (span[1] - span[0])


def early_stops(c: RequestColumns) -> int:
    """Successful requests whose finish reason is neither None nor "length"."""
    codes = c.finish[c.successful]
    other = np.asarray([t != "length" for t in c.finish_reasons] + [False], dtype=bool)
    return int(other[codes].sum())  # -1 (None) indexes the appended False


def metric(c: RequestColumns, name: str) -> Any:
    """Samples of ``ttft``, ``e2e``, ``itl`` (None for the others: the caller's)."""
    ok = np.flatnonzero(c.successful)
    if name == "ttft":
        return seconds(c.first_chunk_ns(ok) - c.sent_ns[ok], name, c.sent_ns[ok])
    if name == "e2e":
        return seconds(c.last_chunk_ns(ok) - c.sent_ns[ok], name, c.sent_ns[ok])
    if name == "itl":
        values, sent = itl_float(c, ok)
        if not values.size:
            return None
        values /= 1e9  # in place: the same float64 division as ``x / 1e9``
        sent /= 1e9
        return make_samples(values, "s", label=name, sent=sent, copy=False)  # its own arrays: no copy
    return None


PIECE = 1 << 22  # chunks converted at a time by :func:`itl_float`


def itl_float(c: RequestColumns, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`~.columns.RequestColumns.itl_gaps_and_ends` of ``rows`` as float64 (the same
    conversion as ``astype``), written a piece of the flat chunks at a time into the two arrays: the
    int64 gaps, ends and the diff of every chunk were ~1 GB more at a 1M-request run's 31M gaps."""
    if rows.size < 2 or not bool((np.diff(rows) > 0).all()):
        gaps, ends = c.itl_gaps_and_ends(rows)
        return gaps.astype(np.float64), ends.astype(np.float64)
    chosen = np.zeros(len(c), dtype=bool)
    chosen[rows] = True
    inside = np.repeat(chosen, c.n_chunks)  # a chunk of a chosen request that is not its first: a gap ends there
    inside[c.offsets[:-1][c.n_chunks > 0]] = False
    values, sent = np.empty(int(np.count_nonzero(inside))), np.empty(int(np.count_nonzero(inside)))
    flat, at = c.chunk_ns, 0
    for a in range(1, flat.size, PIECE):  # chunk 0 is a request's first: no gap ends there
        keep = inside[a: a + PIECE]
        got = flat[a: a + PIECE][keep]
        values[at: at + got.size] = got - flat[a - 1: a - 1 + PIECE][: keep.size][keep]
        sent[at: at + got.size] = got
        at += got.size
    return values, sent

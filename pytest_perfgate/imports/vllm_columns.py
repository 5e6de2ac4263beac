"""A ``vllm bench serve --save-detailed`` file straight into :class:`~pytest_perfgate.load.columns.
RequestColumns`: streamed (:mod:`.stream`), decoded a piece at a time by msgspec into typed lists,
kept as numpy arrays; no per-request or per-chunk Python object lives past its piece.

The numbers are :func:`.vllm_bench._fast`'s bit for bit (the same float64 operations in the same
order: ``rint((start + ttft + cumsum(gaps)) * 1e9)`` per row of one length). Whatever that fast path
would hand to the slow one (an entry that is not a plain number, a time past :data:`SECONDS_LIMIT`,
lists of unequal lengths, a text shorter than its token count), and whatever the stream cannot cut,
returns None here: the caller reads the file the old way, which names the file, key and request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..load import plausible
from ..load.columns import NONE, RequestColumns
from ..runtime.heap import trim_heap
from ..runtime.redaction import clean
from . import jsondoc as j
from . import stream
from .errors import bounded

SECONDS_LIMIT = 4e9  # as vllm_bench.SECONDS_LIMIT
INT64_FLOAT = 9.2e18
FLOATS = ("start_times", "ttfts", "latencies", "input_lens", "output_lens", "queue_times")
LISTS = {**dict.fromkeys(FLOATS, stream.NUMBERS), "itls": stream.ROWS, "errors": stream.STRINGS,
         "generated_texts": stream.STRINGS}
ROW_BATCH = 1 << 16  # rows of one length turned into chunk times at once (bounds the temporaries)


class _Lists:
    """The decoded lists: numpy blocks per key, joined at the end."""

    def __init__(self) -> None:
        import msgspec

        self.dec: dict[str, Any] = {stream.NUMBERS: msgspec.json.Decoder(list[float]), stream.ROWS: msgspec.json.Decoder(list[list[float]]),
                    stream.STRINGS: msgspec.json.Decoder(list[str])}
        self.blocks: dict[str, list[Any]] = {}
        self.lens: dict[str, list[Any]] = {}
        self.done: set[str] = set()
        self.meta: dict[str, Any] = {}
        self.skipped = 0  # pieces of generated_texts checked, not decoded

    def piece(self, key: str, text: bytes) -> None:
        import itertools

        if not text:
            self.done.add(key)
            return
        if key in self.done:  # a key given twice: the last one wins (as json.load), not handled here
            raise stream.Malformed(f"{key} twice")
        kind = LISTS[key]
        got = self.dec[kind].decode(b"".join((b"[", text, b"]")))  # (one copy; + made two)
        blocks = self.blocks.setdefault(key, [])
        if kind == stream.NUMBERS:
            blocks.append(np.asarray(got, dtype=np.float64))
        elif kind == stream.ROWS:
            lens = np.fromiter(map(len, got), np.int64, len(got))
            blocks.append(np.fromiter(itertools.chain.from_iterable(got), np.float64, int(lens.sum())))
            self.lens.setdefault(key, []).append(lens)
        elif key == "errors":
            table: dict[str, int] = {}
            blocks.append(np.fromiter((table.setdefault(e, len(table)) for e in got), np.int64, len(got)))
            self.lens.setdefault(key, []).append(list(table))
        else:  # generated_texts: only their lengths (a token count above a text's bytes is implausible)
            blocks.append(np.fromiter(map(len, got), np.int64, len(got)))

    def texts(self, text: bytes) -> None:
        """A piece of ``generated_texts``: checked as JSON, its lengths kept only where a count
        could be above them (no count seen yet above :data:`~..load.plausible.SPECIAL_SLACK`)."""
        import msgspec

        out = self.blocks.get("output_lens")
        if not text or (out is not None and "output_lens" in self.done and
                        max((float(b.max()) for b in out if b.size), default=0.0) <= plausible.SPECIAL_SLACK):
            if text:
                msgspec.json.decode(b"".join((b"[", text, b"]")), type=msgspec.Raw)  # valid JSON, or the slow path says why
                self.skipped += 1
            else:
                self.done.add("generated_texts")
            return
        self.piece("generated_texts", text)

    def array(self, key: str) -> Any:
        """The key's blocks joined (once: the blocks are let go, a 1M-request file's gaps are 248 MB)."""
        if key not in self.done:
            return None
        parts = self.blocks.get(key, [])
        if len(parts) > 1:
            parts[:] = [np.concatenate(parts)]
        return parts[0] if parts else np.zeros(0)


def read(path: Path) -> tuple[dict[str, Any], RequestColumns] | None:
    """``(the document's other keys, the requests in send order)``, or None: read it the old way."""
    import msgspec

    got = _Lists()
    try:
        with j.open_regular(path) as f:
            for key, text, whole in stream.members(f, str(path), j.MAX_BYTES, LISTS):
                if whole:  # (a key of LISTS whose value is no list: null queue_times, or the slow path's to name)
                    got.meta[key] = msgspec.json.decode(text) if key in ("model_id", "backend", "generated_texts") else text
                elif key == "generated_texts":
                    got.texts(text)
                else:
                    got.piece(key, text)
    except (stream.Malformed, msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
        return None
    out = _columns(got)
    del got
    trim_heap()  # the pieces' freed blocks (~250 MB at 1M requests) back to the system
    return out


def _errors(got: _Lists) -> tuple[np.ndarray, list[str]]:
    """Each request's code in the table of causes (-1: no error), the table cleaned as a record's."""
    codes, tables = got.blocks.get("errors", []), got.lens.get("errors", [])
    table: dict[str, int] = {}
    out = []
    for block, texts in zip(codes, tables, strict=True):
        remap = np.asarray([-1 if t == "" else table.setdefault(clean("bench error: " + bounded(t)), len(table))
                            for t in texts] or [-1], dtype=np.int32)
        out.append(remap[block])
    return (np.concatenate(out) if out else np.zeros(0, np.int32)), list(table)


def _columns(got: _Lists) -> tuple[dict[str, Any], RequestColumns] | None:
    cols = {k: got.array(k) for k in ("start_times", "ttfts", "latencies", "input_lens", "output_lens")}
    if any(v is None for v in cols.values()) or "itls" not in got.done or "errors" not in got.done:
        return None
    n = cols["start_times"].size
    gaps = got.array("itls")
    lens = np.concatenate(got.lens.get("itls", [np.zeros(0, np.int64)]))
    error, causes = _errors(got)
    queue = got.array("queue_times") if "queue_times" in got.done else None
    if "queue_times" in got.meta and got.meta["queue_times"] != b"null" and queue is None:
        return None  # queue_times not a list of numbers: the slow path decides
    if any(v.size != n for v in (*cols.values(), lens, error)) or (queue is not None and queue.size < n):
        return None
    failed = error >= 0
    if not all((np.abs(v) < SECONDS_LIMIT).all() for k, v in cols.items() if "lens" not in k) or \
            (queue is not None and not (np.abs(queue[:n]) < SECONDS_LIMIT).all()):
        return None
    for k in ("input_lens", "output_lens"):  # counts: whole, not negative, not absurd (else the slow path)
        v = cols[k]
        if not ((v >= 0) & (v <= plausible.MAX_TOKENS) & (v == np.floor(v))).all():
            return None
    gap_at = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=gap_at[1:])
    ok_gap = np.repeat(~failed, lens)
    for lo in range(0, gaps.size, 1 << 22):  # a block at a time: no copy of every gap
        if (~(np.abs(gaps[lo:lo + (1 << 22)]) < SECONDS_LIMIT) & ok_gap[lo:lo + (1 << 22)]).any():
            return None
    del ok_gap
    texts = got.array("generated_texts") if "generated_texts" in got.done and not got.skipped else None
    if texts is not None and texts.size == n:
        out = cols["output_lens"]
        if (~failed & (out > texts + plausible.SPECIAL_SLACK)).any():
            return None  # the slow path words the implausible count
    chunks = _chunk_times(cols["start_times"] + cols["ttfts"], gaps, gap_at, lens, ~failed)
    if chunks is None:
        return None
    chunk_ns, offsets = chunks
    sent = np.rint(cols["start_times"] * 1e9).astype(np.int64)
    end = np.where(failed, NONE, sent + np.rint(cols["latencies"] * 1e9).astype(np.int64))
    sched = np.full(n, NONE, np.int64) if queue is None else sent - np.rint(queue[:n] * 1e9).astype(np.int64)
    c = RequestColumns(
        index=np.arange(n, dtype=np.int64), sent_ns=sent, scheduled_ns=sched, connect_ns=np.full(n, NONE, np.int64),
        end_ns=end, prompt_tokens=cols["input_lens"].astype(np.int64),
        output_tokens=np.where(failed, NONE, cols["output_lens"].astype(np.int64)),
        expected_prompt_tokens=np.full(n, NONE, np.int64), chunk_ns=chunk_ns, offsets=offsets,
        chunk_tokens=np.zeros(0, np.int64), token_offsets=np.zeros(n + 1, np.int64), error=error, errors=causes,
        finish=np.where(failed, -1, 0).astype(np.int32), finish_reasons=["length"], tag=np.full(n, -1, np.int32),
        host=np.full(n, -1, np.int32), count_source=np.zeros(n, np.int8), warmup=np.zeros(n, bool))
    return got.meta, c.sorted_by_sent()


def _chunk_times(base: np.ndarray, gaps: np.ndarray, gap_at: np.ndarray, lens: np.ndarray,
                 ok: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Every successful request's chunk times (``base``, then ``base + cumsum(gaps)``) in ns, flat,
    with the offsets; None when one is past int64 (the slow path names it)."""
    counts = np.where(ok, lens + 1, 0)
    offsets = np.zeros(base.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.int64)
    rows = np.flatnonzero(ok)
    for length in np.unique(lens[rows]):
        idx_all = rows[lens[rows] == length]
        for k in range(0, idx_all.size, ROW_BATCH):
            idx = idx_all[k:k + ROW_BATCH]
            g = gaps[gap_at[idx][:, None] + np.arange(length)] if length else np.zeros((idx.size, 0))
            times = base[idx][:, None] + np.concatenate((np.zeros((idx.size, 1)), np.cumsum(g, axis=1)), axis=1)
            ns = np.rint(times * 1e9)
            if not (np.abs(ns) < INT64_FLOAT).all():
                return None
            out[offsets[idx][:, None] + np.arange(length + 1)] = ns.astype(np.int64)
    return out, offsets

"""load/columns.py: RequestColumns round-trips RequestRecord and gives the metrics' numbers."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from pytest_perfgate.contract import RequestRecord
from pytest_perfgate.load import metrics as m
from pytest_perfgate.load.columns import NONE, RequestColumns


def _records(n: int = 60, seed: int = 3) -> list[RequestRecord]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sent = rng.randrange(10**9)
        chunks = sorted(sent + rng.randrange(1, 10**8) for _ in range(rng.randrange(0, 6)))
        r = RequestRecord(index=i, sent_ns=sent, chunk_ns=chunks, tag=rng.choice(["", "a", "b"]),
                          chunk_tokens=[rng.randrange(1, 3) for _ in chunks] if rng.random() < 0.5 else [],
                          scheduled_ns=sent - 5 if rng.random() < 0.5 else None,
                          end_ns=chunks[-1] + 1 if chunks else None,
                          output_tokens=rng.choice([None, len(chunks)]), prompt_tokens=rng.choice([None, 64]),
                          finish_reason=rng.choice([None, "length", "stop"]), warmup=i < 3,
                          token_count_source=rng.choice(["server", "tokenizer", "chunks"]),
                          host=rng.choice(["", "w1"]))
        if rng.random() < 0.2:
            r.error = rng.choice(["timeout", "HTTP 500: boom"])
        out.append(r)
    return out


def test_record_view_round_trips_every_field() -> None:
    rs = _records()
    c = RequestColumns.from_records(rs)
    assert len(c) == len(rs)
    assert [dataclasses.asdict(c.record(i)) for i in range(len(c))] == [dataclasses.asdict(r) for r in rs]
    assert [r.error for r in c.records()] == [r.error for r in rs]
    assert c.scheduled_ns[[i for i, r in enumerate(rs) if r.scheduled_ns is None]].tolist() == \
        [NONE] * sum(r.scheduled_ns is None for r in rs)


def test_vectorised_views_equal_the_metrics_of_records() -> None:
    rs = _records()
    c = RequestColumns.from_records(rs)
    ok = np.flatnonzero(c.successful)
    assert [rs[i] for i in ok] == m.successful(rs)
    assert [rs[i] for i in np.flatnonzero(c.measured)] == m.measured(rs)
    gaps, ends = c.itl_gaps_and_ends(ok)
    g2, e2 = m.itl_gaps_and_ends(rs)
    assert gaps.tolist() == g2.tolist() and ends.tolist() == e2.tolist()
    assert (c.first_chunk_ns(ok) - c.sent_ns[ok]).tolist() == m.ttfts(rs)
    assert (c.last_chunk_ns(ok) - c.sent_ns[ok]).tolist() == m.e2es(rs)
    assert c.out_tokens(np.arange(len(c))).tolist() == [m.output_tokens(r) for r in rs]


def test_take_sort_and_concat_keep_the_records() -> None:
    rs = _records()
    c = RequestColumns.from_records(rs)
    by_sent = sorted(rs, key=lambda r: r.sent_ns)
    assert [dataclasses.asdict(r) for r in c.sorted_by_sent().records()] == [dataclasses.asdict(r) for r in by_sent]
    both = RequestColumns.concat([c.take(np.arange(10)), RequestColumns.from_records(rs[10:])])
    assert [dataclasses.asdict(r) for r in both.records()] == [dataclasses.asdict(r) for r in rs]
    assert len(RequestColumns.concat([])) == 0 and RequestColumns().records() == []


def test_a_number_past_int64_is_refused() -> None:
    with pytest.raises(OverflowError):
        RequestColumns.from_records([RequestRecord(index=0, sent_ns=1 << 64)])


def test_dicts_are_the_records_vars() -> None:
    rs = _records()
    c = RequestColumns.from_records(rs)
    assert list(c.dicts(block=7)) == [vars(r) for r in rs]
    assert [list(d) for d in c.dicts()] == [list(vars(r)) for r in rs]  # the same keys in the same order


def test_itl_gaps_of_any_rows() -> None:
    rs = _records()
    c = RequestColumns.from_records(rs)
    for rows in (np.flatnonzero(c.n_chunks > 0), np.arange(len(c)), np.arange(5, 40), np.array([7, 3, 9]),
                 np.zeros(0, dtype=np.int64)):
        gaps, ends = c.itl_gaps_and_ends(rows)
        pairs = [(a, b) for i in rows for a, b in zip(rs[i].chunk_ns, rs[i].chunk_ns[1:], strict=False)]
        assert gaps.tolist() == [b - a for a, b in pairs] and ends.tolist() == [b for _, b in pairs]

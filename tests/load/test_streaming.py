"""Workers stream their records to the coordinator in Arrow batches (load/worker.py, load/workers.py,
load/parquet.py): a real run against the scripted server over two worker processes stores every
request once, in order, as numpy columns the verdicts read; the coordinator's spool file is gone after."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hog_engine import HogEngine
from scripted_process import scripted_server_process

from pytest_perfgate.contract import Request
from pytest_perfgate.load import parquet
from pytest_perfgate.load.columns import RequestColumns
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.load.workers import Sink

N = 600


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with scripted_server_process() as url:
        yield url


@pytest.mark.skipif(sys.platform != "linux", reason="workers share CLOCK_MONOTONIC with the server on Linux")
def test_every_request_is_stored_once_as_columns(server_url: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet, "LIST_UP_TO", 100)  # 600 records: columns, as a long run's are
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the spool goes
    kept: list[Sink] = []
    add = Sink.add

    def spy(self: Sink, batch: Any) -> None:
        if self not in kept:
            kept.append(self)
        add(self, batch)

    monkeypatch.setattr(Sink, "add", spy)
    eng = HogEngine("cal", {"base_url": server_url, "model": "scripted", "timeout": 10})
    eng.start()
    seen: list[int] = []
    try:
        reqs = [Request(prompt="a b", max_tokens=4, extra={"perfgate": {"ttft": 0.0, "itl": 0.0}}) for _ in range(7)]
        res = run_load(eng, reqs, LoadConfig(mode="concurrency", concurrency=8, num_requests=N, warmup=2, workers=2),
                       progress=lambda d, n, e: seen.append(d))
    finally:
        eng.stop()
    c = res.columnar()
    assert isinstance(c, RequestColumns) and len(c) == N + 2
    assert c.index[:2].tolist() == [-1, -2] and c.warmup[:2].all() and not c.warmup[2:].any()
    assert c.index[2:].tolist() == list(range(N))  # every request, once, in order
    assert res.n_measured() == N == res.n_successful() and (c.output_tokens[2:] == 4).all()
    assert (c.n_chunks[2:] > 0).all() and (c.first_chunk_ns(np.arange(2, N + 2)) >= c.sent_ns[2:]).all()
    ttft = res.perfgate_data("ttft")  # a verdict's samples, from the columns
    assert len(ttft.values) == N and res.columnar() is c  # type: ignore[union-attr]
    assert len(res.measured) == N and all(r.ok and r.output_tokens == 4 for r in res.measured)  # records, when asked
    assert seen[-1] == N and seen == sorted(seen)
    (sink,) = kept
    assert sink.kept == [] and sink.count == N and sink.received.all()  # no record object held while running
    assert list(tmp_path.glob("perfgate-run-*")) == []  # the spool was read back once and removed

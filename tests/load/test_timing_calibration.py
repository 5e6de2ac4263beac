"""The timing path against ground truth: scripted server in a separate process, our client here.

The server stamps every chunk with ``perf_counter_ns`` right before handing it to the socket
(CLOCK_MONOTONIC, shared across processes on Linux); the client's record must agree: same chunks,
same order, every arrival after its send, the request sent before the server received it.

Checked by ordering, never by speed: how soon after the send a busy machine lets the client read a
chunk is a figure of the machine (printed here; benchmarks/bench_client.py's "timestamp error"
rows are where it is watched). That each chunk is stamped with the read that delivered it, not a
later one, is checked on scripted reads and stamps below
(``test_events_are_stamped_with_the_read_that_completed_them``).
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Iterator

import pytest
from scripted_process import calibration_engine, ground_truth, scripted_server_process

from pytest_perfgate import contract
from pytest_perfgate.contract import Request, RequestRecord
from pytest_perfgate.engines.openai.http1 import Connection, Exchange
from pytest_perfgate.engines.openai.sse import ChunkEvents, decode_events, decode_generic
from pytest_perfgate.engines.openai.transport import Response
from pytest_perfgate.engines.openai.transport_raw import split_events
from pytest_perfgate.load.runner import run_load
from pytest_perfgate.load.schedule import LoadConfig

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="cross-process perf_counter_ns needs Linux")


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    assert "CLOCK_MONOTONIC" in time.get_clock_info("perf_counter").implementation
    with scripted_server_process() as url:
        yield url


@pytest.mark.parametrize("transport", ["raw", "aiohttp"])
def test_concurrent_streams_match_ground_truth(server_url: str, transport: str) -> None:
    with calibration_engine(server_url, transport=transport) as eng:
        assert eng.info()["transport"] == transport
        n, chunks = 16, 20
        reqs = [Request(prompt="a b c", max_tokens=chunks, api="chat" if k % 2 else "completions",
                        extra={"perfgate": {"id": f"{transport}{k}", "ttft": 0.005 + 0.001 * k, "itl": 0.004,
                                            "tokens_per_chunk": [1 + (j % 3) for j in range(chunks)]}})
                for k in range(n)]
        recs = [RequestRecord(index=k) for k in range(n)]

        async def go() -> None:
            import asyncio

            await asyncio.gather(*(eng.generate(r, rec, time.perf_counter_ns) for r, rec in zip(reqs, recs, strict=True)))

        contract.run_sync(go())
        gt = ground_truth(server_url)
        errors = []
        for k, rec in enumerate(recs):
            assert rec.ok, rec.error
            t = gt[f"{transport}{k}"]
            assert len(rec.chunk_ns) == len(t["chunk_ns"]) == chunks
            assert rec.chunk_tokens == t["chunk_tokens"]
            assert rec.chunk_ns == sorted(rec.chunk_ns)
            for got, sent in zip(rec.chunk_ns, t["chunk_ns"], strict=True):
                assert sent <= got, (got - sent) / 1e6  # never before the server sent it
                errors.append(got - sent)
            assert rec.sent_ns <= t["received_ns"]
            assert rec.end_ns is not None and t["done_ns"] <= rec.end_ns
            assert rec.end_ns >= rec.chunk_ns[-1]
        print(f"{transport}: arrival - send p50 {sorted(errors)[len(errors) // 2] / 1e6:.2f} ms, "
              f"max {max(errors) / 1e6:.2f} ms over {len(errors)} chunks")


def test_runner_schedule_and_records_match_ground_truth(server_url: str) -> None:
    with calibration_engine(server_url) as eng:
        reqs = [Request(prompt="x", max_tokens=5, extra={"perfgate": {"id": f"p{k}", "ttft": 0.002, "itl": 0.002}})
                for k in range(30)]
        res = run_load(eng, reqs, LoadConfig(mode="poisson", rate=200.0, num_requests=30, seed=3))
        gt = ground_truth(server_url)
        for rec in res.records:
            assert rec.ok, rec.error
            # the send stamp follows any connection setup, which is recorded apart (connect_ns)
            assert rec.scheduled_ns is not None and rec.sent_ns - rec.scheduled_ns - (rec.connect_ns or 0) >= 0
            t = gt[f"p{rec.index}"]
            assert rec.sent_ns <= t["received_ns"]
            assert len(rec.chunk_ns) == len(t["chunk_ns"]) == 5
            assert all(s <= c for c, s in zip(rec.chunk_ns, t["chunk_ns"], strict=True))


def _events(body: bytes, cuts: list[int], times: list[int], bulk: bool) -> tuple[list[tuple[int, bytes]], int | None]:
    """(events, [DONE] arrival) as the raw transport hands them to the decoders, from ``body``
    (chunked) delivered in reads split at ``cuts``; ``bulk``: the common case is expected."""
    conn = Connection()
    ex = Exchange()
    response = Response("completions")
    response.chunks = ex.sink = ChunkEvents("completions")
    conn.begin(ex, iter(times).__next__, "POST", None)  # type: ignore[arg-type]
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    data = head + body
    edges = [0, *cuts, len(data)]
    for a, b in itertools.pairwise(edges):
        conn.data_received(data[a:b])
    assert ex.complete and ex.bulk == bulk
    if bulk:
        c = response.chunks
        return list(zip(c.times, b"".join(c.data).split(b"\n\n")[:-1], strict=True)), c.done_ns
    split_events(ex, response)
    return response.splitter.events, response.splitter.done_ns


def test_events_are_stamped_with_the_read_that_completed_them() -> None:
    e1, e2, e3 = b'data: {"choices":[{"text":"a"}]}\n\n', b'data: {"choices":[{"text":"b"}]}\n\n', b"data: [DONE]\n\n"
    # one event per HTTP chunk, the second split across two reads (checked in bulk as it arrives)
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in (e1, e2, e3)) + b"0\r\n\r\n"
    head_len = len(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    split = head_len + body.index(b"b\"}") + 1
    events, done = _events(body, [split], [100, 200], bulk=True)
    assert [t for t, _ in events] == [100, 200] and done == 200
    assert [ev for _, ev in events] == [e1[:-2], e2[:-2]]
    # several events in one HTTP chunk (the framing walked, events split afterwards), split across reads
    blob = e1 + e2 + e3
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(blob), blob)
    events, done = _events(body, [head_len + 10 + len(e1) + 3], [100, 200], bulk=False)
    assert [t for t, _ in events] == [100, 200] and done == 200
    assert [ev for _, ev in events] == [e1[:-2], e2[:-2]]
    # CRLF line ends, the blank line split across reads: stamped with the read holding its last byte
    crlf = blob.replace(b"\n", b"\r\n")
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(crlf), crlf)
    events, done = _events(body, [head_len + body.index(b"\r\n\r\n") + 3], [100, 200], bulk=False)
    assert [t for t, _ in events] == [200, 200] and done == 200
    assert [ev for _, ev in events] == [e1[:-2], e2[:-2]]


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_fast_parser_agrees_with_generic(api: str) -> None:
    def ev(obj: dict) -> bytes:
        return b"data: " + json.dumps(obj).encode()

    key = "delta" if api == "chat" else "text"

    def choice(text: str | None, fin: str | None = None) -> dict:
        c = {"index": 0, "finish_reason": fin}
        c[key] = {"content": text} if api == "chat" else text
        return c

    streams = [
        [ev({"choices": [choice("a")], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
         ev({"choices": [choice("bc", "length")], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}),
         ev({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}})],
        [ev({"choices": [choice("a")]}), ev({"choices": [choice("")]}), ev({"choices": [choice("b", "stop")]}),
         ev({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 5}})],
        [ev({"choices": [choice("a")]}), ev({"error": {"message": "boom"}})],
        [ev({"choices": [choice("a")]}), b": keep-alive", ev({"choices": [choice("b")]})],
        [ev({"choices": [choice("a")], "usage": {"completion_tokens": 1.0}})],
        [ev({"choices": [choice("a")]}), b'data: {"broken'],
        [],
    ]
    for events in streams:
        timed = [(i * 10, e) for i, e in enumerate(events)]
        fast, ref = RequestRecord(index=0, end_ns=99), RequestRecord(index=0, end_ns=99)
        decode_events(timed, fast, api)
        decode_generic(timed, ref, api)
        assert fast == ref

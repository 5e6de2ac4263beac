"""The engine-level max-safe-batch search on a scripted engine: a KV cache of known size, so the
largest concurrency without preemption is known exactly; failures and a missing counter."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pytest_perfgate.contract import Request, RequestRecord
from pytest_perfgate.load.kv import PREEMPTIONS
from pytest_perfgate.load.result import RunResult
from pytest_perfgate.load.schedule import LoadConfig
from pytest_perfgate.memory.engine_batch import RUNNING, NoPreemptionCounter, search


def _requests(k: int) -> list[Request]:
    return [Request(prompt=f"p{i}", max_tokens=4) for i in range(k)]


class KVEngine:
    """Preempts once per request beyond ``fits`` in flight (``admits``: or runs at most ``fits`` and
    leaves the others waiting, as vLLM v1 does with a full KV cache); fails requests beyond ``ooms``."""

    def __init__(self, fits: int, ooms: int | None = None, counter: bool = True, admits: bool = False) -> None:
        self.fits, self.ooms, self.counter, self.total = fits, ooms, counter, 0.0
        self.calls: list[tuple[int, int]] = []
        self.admits = admits

    def __call__(self, reqs: Sequence[Request], cfg: LoadConfig) -> RunResult:
        n = int(cfg.concurrency or 1)
        self.calls.append((n, len(reqs)))
        before = {PREEMPTIONS: self.total} if self.counter else {}
        self.total += 0 if self.admits else max(0, n - self.fits)
        after = {PREEMPTIONS: self.total} if self.counter else {}
        gauges = [{RUNNING: float(min(n, self.fits))}] if self.admits else []
        recs = []
        for i in range(len(reqs)):
            t = (i + 1) * 1_000_000
            r = RequestRecord(index=i, sent_ns=t, chunk_ns=[t + 10, t + 20], chunk_tokens=[1, 1], end_ns=t + 20,
                              output_tokens=2)
            if self.ooms is not None and n > self.ooms:
                r.error, r.chunk_ns, r.chunk_tokens, r.end_ns = "HTTP 500: out of memory", [], [], None
            recs.append(r)
        return RunResult(records=recs, counters_before=before, counters_after=after, gauges=gauges)


@pytest.mark.parametrize("fits", [1, 5, 12, 31])
def test_the_search_finds_the_largest_concurrency_without_preemption(fits: int) -> None:
    eng = KVEngine(fits)
    got = search(eng, _requests, cap=64, rounds=2)
    assert got.best == fits and not got.capped
    assert all(k == 2 * n for n, k in eng.calls)  # rounds x n requests a probe, n in flight
    assert [p.fits for p in got.probes] == [n <= fits for n, _ in eng.calls]
    assert f"max safe concurrency {fits}" in got.text()
    assert got.perfgate_data("concurrency").values.tolist() == [float(fits)]


def test_requests_left_waiting_do_not_fit() -> None:
    """No preemption at all, but the engine ran at most 5 at once: 5 is the max safe concurrency."""
    got = search(KVEngine(fits=5, admits=True), _requests, cap=64)
    assert got.best == 5 and all(p.preemptions == 0 for p in got.probes)
    assert "at most 5 running at once" in got.probes[-1].text() or "at most" in got.text()


def test_failed_requests_do_not_fit_and_the_cap_is_said() -> None:
    assert search(KVEngine(fits=64, ooms=6), _requests, cap=64).best == 6
    capped = search(KVEngine(fits=100), _requests, cap=8)
    assert capped.best == 8 and capped.capped and "the cap" in capped.text()
    assert search(KVEngine(fits=0), _requests).best == 0


def test_no_preemption_counter_is_an_error_not_a_pass() -> None:
    with pytest.raises(NoPreemptionCounter, match="no vllm:num_preemptions counter"):
        search(KVEngine(fits=4, counter=False), _requests)

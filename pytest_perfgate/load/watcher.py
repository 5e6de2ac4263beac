"""A sequential load run (load/decided.py) driven: :func:`run_until_decided` and its stop callback,
:class:`Watcher`, which looks when the first ``n`` requests sent have all answered, says each look,
and stops the run once every gate is decided.

The runner asks it after every finished request, on the engine loop. A look (the gates' verdicts on
up to 10,000 requests and a million chunk gaps) takes from milliseconds to a second, which on the
loop would delay the requests in flight and show as client lag (load/health.py: the timing gates'
validity). So a look runs on a thread of its own while the run goes on; its result is taken at the
next finished request, so the run stops at most one request after its decision is known. After the
run (:meth:`Watcher.finish`), the looks still due are taken in place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .decided import LoadLooks, Say


class Watcher:
    def __init__(self, looks: LoadLooks, say: Say | None = None, clock: Callable[[], float] | None = None,
                 engine_info: Mapping[str, Any] | None = None, slos: Mapping[str, float] | None = None, *,
                 background: bool = True) -> None:
        self.looks, self.say, self.clock = looks, say, clock
        self.engine_info, self.slos = dict(engine_info or {}), dict(slos or {})
        self.t0: float | None = None
        self.done: set[int] = set()
        self.seen = 0
        self.prefix = 0  # requests 0..prefix-1 have all answered
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="perfgate-looks") if background else None
        self.pending: tuple[Future[bool], int, bool] | None = None  # a look in progress: (result, n, last)

    def __call__(self, partial: Any) -> bool:
        if self.t0 is None:  # the run's own start (its clock), else a given clock's first reading
            self.t0 = partial.start_ns / 1e9 if self.clock is None and partial.start_ns else self._now()
        self._saw(partial.records)
        return self._step(partial, wait=False)

    def finish(self, run: Any) -> None:
        """After the run: the looks still due, a last look when the time budget ended the run before a
        planned look, and the whole run's engine, client health and SLOs on every look's requests."""
        measured = [r for r in run.records if not r.warmup]
        self._saw(measured)
        try:
            self._step(run, wait=True)
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True)
        n = len(measured)
        if not self.looks.stopped_by:
            self.looks.stopped_by = "max_seconds" if n < self.looks.looks[-1] else "max_requests"
            taken = max((d.requests for d in self.looks.decided.values()), default=0)
            if n > taken and self.looks.look(self._run(measured, run, n), n, last=True):
                self.looks.stopped_by = "decided"
            if n > taken:
                self._said(n)
        for d in self.looks.decided.values():
            d.data.engine_info, d.data.health, d.data.slos = run.engine_info, run.health, dict(run.slos)
        if self.say is not None:
            self.say(self.looks.summary_line(n, self._seconds()))

    def _saw(self, records: list[Any]) -> None:
        for r in records[self.seen:]:
            if not r.warmup:
                self.done.add(r.index)
        self.seen = len(records)
        while self.prefix in self.done:
            self.prefix += 1

    def _step(self, partial: Any, wait: bool) -> bool:
        """Take a finished look's result, start the next look that is due; True: stop the run."""
        while True:
            if self.pending is not None:
                fut, n, last = self.pending
                if not wait and not fut.done():
                    return False
                self.pending = None
                self._took(fut.result(), n, last)
                if self.looks.stopped_by:
                    return True
            nxt = self.looks.next_look()
            if nxt is None or self.prefix < nxt:
                return bool(self.looks.stopped_by)
            last = nxt == self.looks.looks[-1]
            if self.pool is None or wait:
                self._took(self._look(partial.records, partial, nxt, last), nxt, last)
                if self.looks.stopped_by:
                    return True
                continue
            self.pending = (self.pool.submit(self._look, partial.records, partial, nxt, last), nxt, last)
            return False

    def _look(self, records: list[Any], partial: Any, n: int, last: bool) -> bool:
        return self.looks.look(self._run(records, partial, n), n, last=last)

    def _took(self, decided: bool, n: int, last: bool) -> None:
        if decided:
            self.looks.stopped_by = "decided"
        elif last:
            self.looks.stopped_by = "max_requests"
        self._said(n)

    def _run(self, records: list[Any], partial: Any, n: int) -> Any:
        """The first ``n`` requests sent, as a run of their own."""
        from .result import RunResult

        recs = sorted((r for r in records if not r.warmup and r.index < n), key=lambda r: r.index)
        return RunResult(records=recs, config=partial.config, start_ns=partial.start_ns,
                         engine_info=dict(self.engine_info), slos=dict(self.slos))

    def _now(self) -> float:
        if self.clock is not None:
            return self.clock()
        from ..contract import clock

        return clock() / 1e9

    def _seconds(self) -> float:
        return 0.0 if self.t0 is None else self._now() - self.t0

    def _said(self, n: int) -> None:
        if self.say is not None:
            self.say(self.looks.look_line(n, self._seconds()))


def run_until_decided(engine: Any, requests: Sequence[Any], config: Any, looks: LoadLooks, *,
                      progress: Callable[[int, int, float], None] | None = None, say: Say | None = None,
                      slos: Mapping[str, float] | None = None, warmup: Sequence[Any] | None = None,
                      prior: Mapping[str, float] | None = None, clock: Callable[[], float] | None = None) -> Any:
    """Run ``config`` against ``engine`` up to ``looks``' budget, deciding its gates at its looks and
    stopping once all are decided; the :class:`~.result.RunResult` carries ``looks`` as ``decided``
    (``Perfgate.check``/``check_all`` then take each gate's verdict from its deciding look)."""
    from dataclasses import replace

    from .runner import run_load

    cfg = replace(config, num_requests=looks.looks[-1],
                  max_seconds=looks.max_seconds if looks.max_seconds is not None else config.max_seconds)
    if say is not None:
        for line in looks.plan_lines(prior):
            say(line)
    watcher = Watcher(looks, say, clock, engine.info(), slos)
    run = run_load(engine, requests, cfg, progress, watcher, slos=slos, warmup=warmup)
    watcher.finish(run)
    run.decided = looks
    return run

"""Progress lines for long work (requests done/total, elapsed), rate-limited."""

from __future__ import annotations

from collections.abc import Callable

Say = Callable[[str], None]


class _Printer:
    """``progress(done, total, elapsed)``; ``warmup(done, total, elapsed)`` for the requests sent
    before a run is measured, ``notice(text)`` for a line said once (load/runner.py calls them when present)."""

    def __init__(self, say: Say, label: str, every_s: float, unit: str) -> None:
        self.say, self.label, self.every_s, self.unit = say, label, every_s, unit
        self.last = 0.0
        self.warm_last: float | None = None
        self.said: set[str] = set()

    def __call__(self, done: int, total: int, elapsed: float) -> None:
        if total <= 1:
            return
        if elapsed - self.last >= self.every_s or done >= total:
            self.last = elapsed
            self.say(f"perfgate: [{self.label}] {done}/{total} {self.unit}, {elapsed:.1f} s")

    def warmup(self, done: int, total: int, elapsed: float) -> None:
        """A line as the warm-up starts, then at most every ``every_s`` (a first request that compiles
        or loads for minutes is not silence)."""
        if self.warm_last is None or elapsed - self.warm_last >= self.every_s:
            self.warm_last = elapsed
            self.say(f"perfgate: [{self.label}] warm-up {done}/{total} requests (not measured), {elapsed:.1f} s")


    def notice(self, text: str) -> None:
        """A line said once (the client starved during the run: load/runner.py calls it when present)."""
        if text not in self.said:
            self.said.add(text)
            self.say(f"perfgate: [{self.label}] {text}")


def progress_printer(say: Say, label: str, every_s: float = 5.0, unit: str = "requests") -> Callable[[int, int, float], None]:
    """A ``progress(done, total, elapsed)`` callback that says a line at most every ``every_s``
    (and at the end), with a ``warmup`` method for the warm-up requests. Single-item runs stay
    quiet: their caller reports progress instead."""
    return _Printer(say, label, every_s, unit)

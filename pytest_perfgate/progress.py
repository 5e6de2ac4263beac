"""Progress lines for long work (requests done/total, elapsed), rate-limited."""

from __future__ import annotations

from collections.abc import Callable

Say = Callable[[str], None]


def progress_printer(say: Say, label: str, every_s: float = 5.0, unit: str = "requests") -> Callable[[int, int, float], None]:
    """A ``progress(done, total, elapsed)`` callback that says a line at most every ``every_s``
    (and at the end). Single-item runs stay quiet: their caller reports progress instead."""
    last = [0.0]

    def progress(done: int, total: int, elapsed: float) -> None:
        if total <= 1:
            return
        if elapsed - last[0] >= every_s or done >= total:
            last[0] = elapsed
            say(f"perfgate: [{label}] {done}/{total} {unit}, {elapsed:.1f} s")

    return progress

"""A gate failure, an engine error or a missing dependency is reported as its message alone: the
text of such a failure, capped at :data:`MAX_FAILURE_LINES` lines. No pytest import."""

from __future__ import annotations

from ..verdicts.failures import GateFailure, headline

MAX_FAILURE_LINES = 5  # + the test's header line: at most 6 lines per failing test


def is_engine_error(exc: BaseException) -> bool:
    return any(c.__name__ == "EngineError" and c.__module__.startswith("pytest_perfgate") for c in type(exc).__mro__)


def engine_tail(lines: list[str]) -> bool:
    """An engine start failure shows its log's last lines (once): exempt from the line cap."""
    return len(lines) > 1 and (lines[1].startswith("log: ") or (lines[1].startswith("last ") and " lines of " in lines[1]))


def message(exc: BaseException, short: bool, fail_msg: str | None, verbose: int = 0) -> tuple[list[str], str] | None:
    """(lines, crash headline) of a failure shown as its message alone, or None for any other
    failure. ``short``: the test was marked to fail with a message; ``fail_msg``: the message of a
    ``pytest.fail`` exception (None for other exceptions); ``verbose`` (``-v``): a gate failure's
    full summaries (bounds, sequential plan, warm-ups, notes) in place of its brief lines."""
    cap = MAX_FAILURE_LINES
    if isinstance(exc, GateFailure):
        text, head = (str(exc) if verbose > 0 else exc.brief), headline(exc.verdict)
        cap *= len(exc.verdicts)  # every failing gate's sentence (check_all), each in a few lines
        if len(exc.verdicts) > 1:
            head += f" (and {len(exc.verdicts) - 1} more failing gate(s))"
    elif short or is_engine_error(exc):
        text = (fail_msg if fail_msg is not None else str(exc)).strip()
        head = text.splitlines()[0] if text else type(exc).__name__
        if is_engine_error(exc):
            text = text or head
    else:
        return None
    lines = text.splitlines()
    if len(lines) > cap and not engine_tail(lines):
        lines = [*lines[: cap - 1], f"... ({len(lines) - cap + 1} more lines)"]
    return lines, head

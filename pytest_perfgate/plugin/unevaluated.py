"""Error verdicts for the gates of a test that failed before evaluating them (engine failed to start,
every request failed, an exception in the test): the phase is then failed, never passed or "not
run" for lack of data. No pytest import."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..config import Thresholds

if TYPE_CHECKING:
    from ..verdicts.verdict import Verdict

MAX_CAUSE = 500  # characters of the failure kept in the verdict's note


def error_verdicts(th: Thresholds, gates: Iterable[str], done: set[str], cause: str, when: str) -> list[Verdict]:
    """An "error" verdict, with the cause, for each gate of ``gates`` not in ``done``."""
    from ..verdicts.rules import resolve_confidence
    from ..verdicts.verdict import Verdict

    first, _, rest = cause.strip().partition("\n")
    # the first line: the rest (an engine log's last lines, a traceback) is the test's own error report,
    # shown once above the summary and in gates.xml's <error>, not repeated in every gate's note
    cause = " ".join(first.split()) + (" (the rest in the test's error report)" if rest.strip() else "")
    if len(cause) > MAX_CAUSE:
        cause = cause[:MAX_CAUSE] + "..."
    out = []
    for name in dict.fromkeys(gates):
        if name not in th.gates or name in done:
            continue
        g = th.gates[name]
        out.append(Verdict.error(g, f"the test failed before the gate was evaluated ({when}): {cause}",
                                 confidence=resolve_confidence(g, th)))
    return out

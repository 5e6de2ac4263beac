"""The session's measured runs by name: ``perfgate.runs["baseline"]``.

A run is kept under a name (``perfgate_engines.run(..., keep_as="baseline")``); later tests read it
back (a comparison gate takes its two runs by the names in its ``runs = [...]``), so no test module
carries state in a dict of its own. A name kept more than once holds every run, in order
(interleaved designs compare the lists). No pytest import.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..contract import Request
    from ..load.result import RunResult


class RunNotKept(KeyError):
    """No run was kept under a name (the test that measures it did not run or failed first)."""

    def __str__(self) -> str:
        return str(self.args[0])


class Runs(Mapping[str, "RunResult"]):
    """Runs kept in this session; ``runs[name]`` is the latest one kept under ``name``."""

    def __init__(self) -> None:
        self._runs: dict[str, list[RunResult]] = {}
        self._requests: dict[str, tuple[Request, ...]] = {}

    def keep(self, name: str, run: RunResult, requests: Sequence[Request] = ()) -> RunResult:
        """Keep ``run`` under ``name`` (and the requests it sent, for :meth:`requests`)."""
        self._runs.setdefault(name, []).append(run)
        if requests:
            self._requests[name] = tuple(requests)
        return run

    def requests(self, name: str) -> list[Request]:
        """The requests of the run kept under ``name``: measure something else on the same prompts."""
        self[name]  # raises RunNotKept, naming what was kept
        return list(self._requests.get(name, ()))

    def all(self, name: str) -> list[RunResult]:
        """Every run kept under ``name``, oldest first."""
        return list(self._runs.get(name, []))

    def __getitem__(self, name: str) -> RunResult:
        got = self._runs.get(name)
        if not got:
            kept = ", ".join(self._runs) or "none yet"
            raise RunNotKept(f"no run named {name!r} was kept in this session (kept: {kept}); "
                             "keep one with perfgate_engines.run(..., keep_as=NAME)")
        return got[-1]

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def pair(self, names: tuple[str, ...]) -> tuple[RunResult, RunResult] | tuple[list[RunResult], list[RunResult]]:
        """The two runs a comparison gate names (treatment, reference): single runs when each name
        holds one, else both lists (run-to-run variance in the bound; equal lengths)."""
        if len(names) != 2:
            raise ValueError(f"a comparison takes two run names, got {list(names)}")
        a, b = (self.all(n) for n in names)
        if not a or not b:
            self[names[0] if not a else names[1]]  # raises RunNotKept, naming what was kept
        if len(a) == 1 and len(b) == 1:
            return a[0], b[0]
        return a, b

"""A test's perfgate markers, parsed once per item into a frozen :class:`Markers`.

No pytest import: items are duck-typed (``nodeid``, ``iter_markers(name)``, ``get_closest_marker``);
the plugin stores the result on ``item.stash`` and turns :class:`MarkerError` into a usage error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import Thresholds


class MarkerError(ValueError):
    """A ``gate``/``fallback``/``engine`` marker that can't be used (bad arguments)."""


class _Item(Protocol):
    @property
    def nodeid(self) -> str: ...

    def iter_markers(self, name: str) -> Iterable[Any]: ...


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    """``did you mean 'ttft_p95'? `` for a near miss (case and ``-``/``_`` aside), else ""."""
    import difflib

    names = list(known)
    fold = {k.lower().replace("-", "_"): k for k in names}
    close = [fold[name.lower().replace("-", "_")]] if name.lower().replace("-", "_") in fold else (
        difflib.get_close_matches(name, names, n=1, cutoff=0.6))
    return f"did you mean {close[0]!r}? " if close else ""


@dataclass(frozen=True)
class Markers:
    """``@pytest.mark.gate(...)`` names, ``@pytest.mark.fallback(...)`` names and the
    ``@pytest.mark.engine(NAME)`` of one test (closest marker first)."""

    gates: tuple[str, ...] = ()
    fallbacks: tuple[str, ...] = ()
    engine: str | None = None

    @property
    def perfgate(self) -> bool:
        """Does the test use perfgate markers at all?"""
        return bool(self.gates or self.fallbacks)

    def problems(self, nodeid: str, th: Thresholds) -> list[str]:
        """Unknown gate or fallback names, one line each (empty when all are defined)."""
        out = [f"{nodeid}: unknown gate {g!r} ({_did_you_mean(g, th.gates)}gates in {th.path.name}: "
               f"{', '.join(th.gates) or '(none)'})" for g in self.gates if g not in th.gates]
        out += [f"{nodeid}: unknown fallback {f!r} ({_did_you_mean(f, th.fallbacks)}fallbacks: "
                f"{', '.join(th.fallbacks) or '(none)'})" for f in self.fallbacks if f not in th.fallbacks]
        return out

    def phases(self, th: Thresholds) -> set[str]:
        """Phases of the gates named and of the gates that name a fallback marked here."""
        out = {th.gates[g].phase for g in self.gates if g in th.gates}
        out.update(g.phase for g in th.gates.values() for f in self.fallbacks if f in g.fallbacks)
        return out

    def gate_phases(self, th: Thresholds) -> set[str]:
        return {th.gates[g].phase for g in self.gates if g in th.gates}

    def engine_name(self, th: Thresholds | None, default: str | None) -> str:
        """``@pytest.mark.engine(NAME)``, else ``--perfgate-engine NAME`` (``default``), else the
        first ``engine =`` of the test's gates, else the embedded ``baseline``."""
        if self.engine is None and default is None and th is not None:
            for g in self.gates:
                if g in th.gates and th.gates[g].engine:
                    return str(th.gates[g].engine)
        return str(self.engine or default or "baseline")


def _names(item: _Item, name: str) -> tuple[str, ...]:
    out: list[str] = []
    for m in item.iter_markers(name):
        if m.kwargs:
            raise MarkerError(f"{item.nodeid}: @pytest.mark.{name} takes names only, got {sorted(m.kwargs)}")
        for a in m.args:
            if not isinstance(a, str):
                raise MarkerError(f"{item.nodeid}: @pytest.mark.{name} takes names (strings), got {a!r}")
            out.append(a)
    return tuple(out)


def parse(item: _Item) -> Markers:
    """The item's markers; :class:`MarkerError` names the test and the bad argument."""
    engine = next(iter(item.iter_markers("engine")), None)
    name = engine.args[0] if engine is not None and engine.args else None
    if name is not None and not isinstance(name, str):
        raise MarkerError(f"{item.nodeid}: @pytest.mark.engine takes an engine name (a string), got {name!r}")
    return Markers(_names(item, "gate"), _names(item, "fallback"), name)

"""A stored verdict, typed: :class:`VerdictRecord` reads the dict ``Verdict.to_dict()`` wrote
(``decisions.json``, a JUnit property, a stored data file's header) once, field by field, so that
what reads stored verdicts (the writers through :mod:`wording`, :mod:`pytest_perfgate.store.records`,
``Verdict.from_dict``) uses attributes, never ``v.get(...)``.

The reading is tolerant by design (a document may come from an older version, or be hand-edited):
a string field that is missing or not a string is ``""`` (``None`` for the optional ones), a number
that is missing, not a number or not finite is ``None``; text is taken as it is (the writers escape
it on output, :func:`wording.clean_text`). Nothing here imports the :class:`Verdict` class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NUMBERS = ("observed", "lower", "upper")  # finite or None in the dict; "nonfinite" keeps what they were


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _str(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _opt(value: object) -> str | None:
    return _str(value) or None


def _count(value: object) -> int | None:
    x = _num(value)
    return int(x) if x is not None else None


@dataclass(frozen=True)
class BaselineRecord:
    """``vs_baseline`` of a stored verdict: the comparison with a baseline run (store/baseline.py)."""

    baseline_run: str = ""
    baseline_label: str = ""
    change: float | None = None  # observed / baseline's observed - 1
    tolerance: float | None = None  # the gate's regression tolerance
    regressed: bool = False
    inconclusive: bool = False
    smaller_is_better: bool = True

    @classmethod
    def read(cls, d: object) -> BaselineRecord | None:
        """The record of a ``vs_baseline`` mapping, None when there is none."""
        if not isinstance(d, Mapping):
            return None
        sib = d.get("smaller_is_better", True)
        return cls(baseline_run=_str(d.get("baseline_run")), baseline_label=_str(d.get("baseline_label")),
                   change=_num(d.get("change")), tolerance=_num(d.get("tolerance")),
                   regressed=bool(d.get("regressed")), inconclusive=bool(d.get("inconclusive")),
                   smaller_is_better=sib if isinstance(sib, bool) else True)


@dataclass(frozen=True)
class VerdictRecord:
    """The fields of a stored verdict. Numbers are base units (``unit`` is the display unit)."""

    gate: str = ""
    phase: str = ""
    outcome: str = ""
    metric: str = ""
    statistic: str = ""
    compare: str | None = None
    direction: str | None = None
    observed: float | None = None
    lower: float | None = None
    upper: float | None = None
    threshold: float | None = None
    baseline: float | None = None
    n: int | None = None
    needed: int | None = None
    confidence: float | None = None
    method: str = ""
    unit: str = ""
    band: str | None = None
    note: str = ""
    summary: str = ""
    ci: str = ""
    fallbacks: tuple[str, ...] = ()
    details: Mapping[str, float] = field(default_factory=dict)
    display: Mapping[str, str] = field(default_factory=dict)
    nonfinite: Mapping[str, float] = field(default_factory=dict)  # observed/lower/upper that were inf or nan
    floor: float | None = None  # the physical floor (floors/), see Verdict
    floor_kind: str = ""
    floor_multiple: float | None = None
    efficiency: float | None = None
    efficiency_kind: str = ""
    floor_basis: str = ""
    # what the recorder and the store add to the dict (plugin/recorder.py, store/live.py, store/decisions.py)
    test: str = ""  # the test's node id
    label: str = ""  # which of several verdicts of one gate (Perfgate.evaluate(label=...))
    samples: str = ""  # the stored data file, relative to the results directory
    run_id: str = ""
    runs: tuple[str, ...] = ()  # a comparison gate's two runs
    duration: float | None = None  # seconds of the gate's own time (gates.xml)
    curve: tuple[Mapping[str, Any], ...] = ()  # a capacity gate's levels, in order
    vs_baseline: BaselineRecord | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the dict as read

    @classmethod
    def read(cls, d: Mapping[str, Any] | VerdictRecord) -> VerdictRecord:
        """The record of ``d`` (a record is returned as it is)."""
        if isinstance(d, VerdictRecord):
            return d
        details = d.get("details")
        display = d.get("display")
        nonfinite = d.get("nonfinite")
        fallbacks = d.get("fallbacks")
        return cls(
            gate=_str(d.get("gate")), phase=_str(d.get("phase")), outcome=_str(d.get("outcome")),
            metric=_str(d.get("metric")), statistic=_str(d.get("statistic")), compare=_opt(d.get("compare")),
            direction=_opt(d.get("direction")), observed=_num(d.get("observed")), lower=_num(d.get("lower")),
            upper=_num(d.get("upper")), threshold=_num(d.get("threshold")), baseline=_num(d.get("baseline")),
            n=_count(d.get("n")), needed=_count(d.get("needed")), confidence=_num(d.get("confidence")),
            method=_str(d.get("method")), unit=_str(d.get("unit")), band=_opt(d.get("band")),
            note=_str(d.get("note")), summary=_str(d.get("summary")), ci=_str(d.get("ci")),
            fallbacks=tuple(_str(f) for f in fallbacks) if isinstance(fallbacks, (list, tuple)) else (),
            details={str(k): float(x) for k, x in details.items()
                     if isinstance(x, (int, float)) and not isinstance(x, bool)} if isinstance(details, Mapping) else {},
            display={str(k): x for k, x in display.items() if isinstance(x, str)} if isinstance(display, Mapping) else {},
            nonfinite={k: float(nonfinite[k]) for k in NUMBERS if isinstance(nonfinite, Mapping)
                       and isinstance(nonfinite.get(k), str) and nonfinite[k] in ("inf", "-inf", "nan")},
            floor=_num(d.get("floor")), floor_kind=_str(d.get("floor_kind")),
            floor_multiple=_num(d.get("floor_multiple")), efficiency=_num(d.get("efficiency")),
            efficiency_kind=_str(d.get("efficiency_kind")), floor_basis=_str(d.get("floor_basis")),
            **_added(d), raw=d,
        )

    def exact(self, key: str) -> float:
        """``observed``, ``lower`` or ``upper`` as the verdict had it: a finite number, else the stored
        non-finite value, else (an older document) NaN for the observed value and an error's bounds,
        -inf / +inf for a missing lower / upper bound (a side the data could not bound)."""
        x: float | None = getattr(self, key)
        if x is not None:
            return x
        if key in self.nonfinite:
            return self.nonfinite[key]
        if key == "observed" or self.outcome == "error":
            return math.nan
        return -math.inf if key == "lower" else math.inf

    def shown(self, key: str) -> str | None:
        """The stored display text of ``key`` (``display[key]``), None when the document has none."""
        return self.display.get(key)

    def same(self, other: VerdictRecord) -> bool:
        """Agree on outcome, observed value, bounds and n (re-evaluation reproduces a verdict)."""
        return all(getattr(self, k) == getattr(other, k) for k in ("outcome", "observed", "lower", "upper", "n"))


def _added(d: Mapping[str, Any]) -> dict[str, Any]:
    """The fields the recorder and the store add to a verdict's dict."""
    runs, curve = d.get("runs"), d.get("curve")
    return {
        "test": _str(d.get("test")), "label": _str(d.get("label")), "samples": _str(d.get("samples")),
        "run_id": _str(d.get("run_id")), "duration": _num(d.get("duration")),
        "runs": tuple(_str(x) for x in runs) if isinstance(runs, (list, tuple)) else (),
        "curve": tuple(x for x in curve if isinstance(x, Mapping)) if isinstance(curve, (list, tuple)) else (),
        "vs_baseline": BaselineRecord.read(d.get("vs_baseline")),
    }


def nonfinite(values: Mapping[str, float]) -> dict[str, str]:
    """``{"lower": "-inf"}`` for the values that are not finite (what JSON cannot hold)."""
    return {k: ("nan" if math.isnan(x) else "inf" if x > 0 else "-inf") for k, x in values.items()
            if isinstance(x, float) and not math.isfinite(x)}

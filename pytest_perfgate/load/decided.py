"""A load run that stops as soon as every gate of the run is decided (``perfgate_engines.run_until_decided``).

The run looks at its gates after request counts fixed before the first request (:func:`load_looks`:
100, 200, 400, ... up to ``max_requests``). Each gate has its own plan over those looks
(config/looks.py: ``1 - c`` for a false fail split over every look, for a false pass over the looks
at which a pass is possible at all), and every look decides as one run of that many requests would,
with the dependence those requests show (verdicts/dependence.py): each error stays within ``1 - c``
(Bonferroni over the looks that can make it). A look holds the first ``n`` requests *sent*, once all
of them have answered (not the first ``n`` answers: the slow requests still in flight would be left
out). A gate keeps the verdict of the look that decided it, on that look's requests; the run sends no
new request once every gate is decided, else it ends at ``max_requests`` or ``max_seconds``, whose
look may pass at the pass side's confidence once a pass is possible (as ``sample_until_decided``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import Gate, Thresholds
from ..config.looks import LookPlan, plan_at
from ..verdicts.verdict import Verdict, counts_requests, evaluate

LOAD_FIRST_LOOK = 100  # requests: a clear failure stops here (P95 and lower percentiles can pass here too)
LOAD_GROWTH = 2.0  # each look doubles the requests: at most half the run is spent past the decisive count

Say = Callable[[str], None]


class PlanError(ValueError):
    """A sequential load run that cannot work: a gate that no look can pass, or no look at all."""


def load_looks(max_requests: int, first: int = LOAD_FIRST_LOOK, growth: float = LOAD_GROWTH) -> tuple[int, ...]:
    """The request counts at which a load run looks: ``first``, ``first * growth``, ... , ``max_requests``."""
    if max_requests < 1:
        raise PlanError(f"max_requests must be >= 1, got {max_requests}")
    if growth <= 1:
        raise PlanError(f"looks must grow (growth > 1), got {growth}")
    looks: list[int] = []
    n = float(min(first, max_requests))
    while round(n) < max_requests:
        if not looks or round(n) > looks[-1]:
            looks.append(round(n))
        n *= growth
    if looks and max_requests - looks[-1] < looks[-1] * (growth - 1) / 2:
        looks.pop()  # the last look before the budget is close to it: look at the budget instead
    return (*looks, max_requests)


@dataclass(frozen=True)
class Decided:
    """One gate's verdict in a sequential load run: the look that decided it (or the last look)."""

    verdict: Verdict
    data: Any  # that look's requests (what the verdict was computed on; re-evaluated by Perfgate.check)
    confidence: float  # of that verdict: the pass side's at a pass look it passed at, else the fail side's
    requests: int
    look: int  # 1-based
    decided: bool  # False: the budget ended the run first (the last look's verdict)


@dataclass
class LoadLooks:
    """The plan of a sequential load run and, as it runs, each gate's decision."""

    gates: list[Gate]
    looks: tuple[int, ...]
    plans: dict[str, LookPlan | None]  # None: a gate without a direction (recorded, never gated)
    confidence: dict[str, float]
    thresholds: Thresholds | None = None
    max_seconds: float | None = None
    decided: dict[str, Decided] = field(default_factory=dict)
    looked: int = 0  # looks taken so far
    stopped_by: str = ""  # "decided" | "max_requests" | "max_seconds"

    @classmethod
    def plan(cls, gates: Iterable[tuple[Gate, float]], looks: Sequence[int], thresholds: Thresholds | None = None,
             max_seconds: float | None = None) -> LoadLooks:
        """Plan ``gates`` (each with its confidence) over ``looks``; :class:`PlanError` names a gate
        that no look can pass or that needs two runs."""
        gs, plans, conf = [], {}, {}
        looks = tuple(looks)
        if not looks or list(looks) != sorted(set(looks)) or looks[0] < 1:
            raise PlanError(f"looks must be increasing request counts >= 1, got {list(looks)}")
        for g, c in gates:
            if g.compare:
                raise PlanError(f"gate {g.name}: a comparison of two runs cannot be decided on one load run")
            p = plan_at(g.statistic.kind, g.statistic.q, g.direction, c, list(looks)) if g.direction else None
            if g.direction and p is None:
                raise PlanError(f"gate {g.name}: no look can pass it within {looks[-1]:,} requests at {c:g} "
                                f"(raise max_requests or lower the confidence)")
            gs.append(g)
            plans[g.name], conf[g.name] = p, c
        if not gs:
            raise PlanError("run_until_decided: no gates to decide")
        return cls(gs, looks, plans, conf, thresholds, max_seconds)

    # ---- deciding
    @property
    def done(self) -> bool:
        return len(self.decided) == len(self.gates) and all(d.decided for d in self.decided.values())

    def next_look(self) -> int | None:
        return self.looks[self.looked] if self.looked < len(self.looks) else None

    def look(self, data: Any, n: int, *, last: bool = False) -> bool:
        """Decide the open gates on ``data`` (the first ``n`` requests); ``last``: the run ends here
        (the budget). True once every gate is decided."""
        at = self.looks[self.looked] if self.looked < len(self.looks) else None
        planned = at == n  # a planned look (a pass look if the gate's plan says so), else the budget's
        self.looked += 1
        for g in self.gates:
            d = self.decided.get(g.name)
            if d is not None and d.decided:
                continue
            self.decided[g.name] = self._decide(g, data, n, planned, last)
        return self.done

    def _decide(self, g: Gate, data: Any, n: int, planned: bool, last: bool) -> Decided:
        p = self.plans[g.name]
        if p is None:  # recorded only
            v = evaluate(g, data, confidence=self.confidence[g.name], thresholds=self.thresholds)
            return Decided(v, data, self.confidence[g.name], n, self.looked, True)
        v = evaluate(g, data, confidence=p.c_fail, thresholds=self.thresholds)
        if v.outcome in ("fail", "error"):
            return Decided(v, data, p.c_fail, n, self.looked, True)
        if (planned and n in p.pass_looks) or (last and n >= p.first_pass):
            v_pass = evaluate(g, data, confidence=p.c_pass, thresholds=self.thresholds)
            if v_pass.outcome == "pass":
                return Decided(v_pass, data, p.c_pass, n, self.looked, True)
        return Decided(v, data, p.c_fail, n, self.looked, False)

    # ---- what a test's verdict is computed from
    def verdict_data(self, gate: str) -> tuple[Any, float, str] | None:
        """(data, confidence, note) of ``gate``'s verdict: its deciding look's requests at that look's
        confidence; None for a gate this run did not plan."""
        d = self.decided.get(gate)
        if d is None:
            return None
        p = self.plans.get(gate)
        how = (f"decided at look {d.look} of {len(self.looks)} ({d.requests:,} requests)" if d.decided else
               f"undecided when the run stopped ({self._why()}) after {d.requests:,} requests, look {d.look}")
        plan = (f"; looks at {_counts(self.looks)} requests, {p.describe(self.confidence[gate])}"
                if p is not None else "")
        return d.data, d.confidence, f"sequential load run: {how}{plan}"

    def _why(self) -> str:
        return {"max_seconds": f"max_seconds = {self.max_seconds:g}" if self.max_seconds else "max_seconds",
                "max_requests": f"max_requests = {self.looks[-1]:,}"}.get(self.stopped_by, self.stopped_by or "?")

    # ---- what the run says
    def plan_lines(self, prior: Mapping[str, float] | None = None, rate: float | None = None) -> list[str]:
        """The plan, said before the first request: the looks, each gate's pass looks, and (``prior``:
        each gate's dependence factor D from the previous run in history; ``rate``: its requests a
        second) how many requests a pass probably needs and how long that takes."""
        budget = f"max_requests {self.looks[-1]:,}" + (f", max_seconds {self.max_seconds:g}" if self.max_seconds else "")
        out = [f"sequential load run: looks at {_counts(self.looks)} requests ({budget}); stops when all "
               f"{len(self.gates)} gates are decided"]
        for g in self.gates:
            p = self.plans[g.name]
            if p is None:
                out.append(f"  {g.name}: recorded (no limit)")
                continue
            first = _first_pass(g, p)
            line = (f"  {g.name}: may fail at any look at {p.c_fail:.4f} confidence ({1 - self.confidence[g.name]:.3g} "
                    f"split over the looks), pass at looks {_counts(p.pass_looks)} at {p.c_pass:.4f} (needs >= "
                    f"{first:,} requests if independent)")
            dd = (prior or {}).get(g.name)
            if dd is not None and math.isfinite(dd) and dd > 1:
                need = math.ceil(first * dd)
                if g.metric == "itl":  # pooled chunk gaps: D counts gaps, not requests
                    line += f"; at the previous run's dependence ({dd:.1f} chunk gaps an independent one) ~{need:,} gaps"
                else:
                    line += f"; at the previous run's dependence ({dd:.1f} requests an independent one) ~{need:,} requests"
                    if rate:
                        line += f", ~{need / rate:,.0f} s at its {rate:.3g} requests/s"
            out.append(line)
        return out

    def look_line(self, n: int, seconds: float) -> str:
        """``look 2 of 7 at 200 requests (14 s, 14.3/s): ttft_p95 PASS, ...; open: itl_p99 (~1,400
        requests, ~84 s more)``: the run's progress at a look."""
        rate = n / seconds if seconds > 0 else math.nan
        done, open_ = [], []
        for g in self.gates:
            d = self.decided.get(g.name)
            if d is None:
                continue
            if d.decided:
                done.append(f"{g.name} {d.verdict.outcome.upper()}" + ("" if d.look == self.looked else f" (look {d.look})"))
                continue
            need = _requests_needed(d)
            more = "" if need is None else (f" (~{need:,} requests" + (
                f", ~{max(need - n, 0) / rate:,.0f} s more)" if math.isfinite(rate) and rate > 0 else ")"))
            open_.append(f"{g.name}{more}")
        head = f"look {self.looked} of {len(self.looks)} at {n:,} requests ({_secs(seconds)}, {rate:,.1f}/s)"
        return head + ": " + "; ".join(x for x in (", ".join(done), "open: " + ", ".join(open_) if open_ else "") if x)

    def summary_line(self, n: int, seconds: float) -> str:
        why = {"decided": "every gate decided", "max_requests": f"max_requests {self.looks[-1]:,} reached",
               "max_seconds": f"max_seconds {self.max_seconds or 0:g} reached"}.get(self.stopped_by, self.stopped_by)
        return (f"sequential load run stopped after {n:,} requests and {_secs(seconds)} ({why}; "
                f"{len(self.looks)} looks planned up to {self.looks[-1]:,})")


def _first_pass(g: Gate, p: LookPlan) -> int:
    """Fewest independent requests a pass needs: the plan's, or for a gate on the failed fraction
    (``error_rate``, max p) the Clopper-Pearson count with no failure, log(1 - c) / log(1 - p)."""
    thr = g.threshold.base if g.threshold is not None else None
    if counts_requests(g) and g.direction == "max" and thr is not None and 0 < thr < 1:
        return math.ceil(math.log(1 - p.c_pass) / math.log(1 - thr))
    return p.first_pass


def _requests_needed(d: Decided) -> int | None:
    """An undecided verdict's "need >= N" in requests (a per-chunk gate's N is in chunk gaps)."""
    v = d.verdict
    if not v.needed or not v.n:
        return None
    return max(math.ceil(v.needed * d.requests / v.n), d.requests)


def _secs(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:,.0f} s"


def _counts(ns: Sequence[int]) -> str:
    return ", ".join(f"{n:,}" for n in ns)

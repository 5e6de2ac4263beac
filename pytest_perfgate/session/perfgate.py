"""State of one gate run and the object tests use (the ``perfgate`` fixture's value).

No pytest import: the plugin passes collaborators in. Verdicts travel as JSON strings in
``user_properties`` so that they survive pytest-xdist; :class:`RunState` is rebuilt from reports.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ..config import Gate, Thresholds
from ..config.looks import FIRST_LOOK
from ..load.validity import apply as valid  # a run whose client did not keep up: invalid timing gates
from ..store import decisions
from ..verdicts.failures import GateFailure, GateInconclusive, PerfgateWarning
from ..verdicts.samples import SampleError
from .evidence import engine_infos, measured, noted
from .runs import Runs

if TYPE_CHECKING:
    from ..load.schedule import RayWorkers
    from ..verdicts.samples import Proportion, Samples
    from ..verdicts.verdict import Verdict

VERDICT_PROPERTY = "perfgate.verdict"
Note: TypeAlias = "str | Callable[[Verdict], str]"  # a verdict's note, or a function of the verdict giving it
FALLBACK_PROPERTY = "perfgate.fallback_test"
ENGINE_PROPERTY = "perfgate.engine"


@dataclass
class RunState:
    """Everything one run has measured, keyed by test; flushed to decisions.json incrementally."""

    thresholds: Thresholds
    out_dir: Path
    run_id: str
    commit: str | None
    inconclusive: str = "fail"
    validity: bool = True  # a run whose client did not keep up makes its timing gates invalid (load/validity.py)
    workers: int | RayWorkers = 1  # client worker processes of a load run, or a Ray cluster's (--perfgate-workers, [perfgate] workers)
    verdicts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # nodeid -> verdicts
    fallback_tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # nodeid -> result
    engines: dict[str, dict[str, Any]] = field(default_factory=dict)
    recorded: dict[str, Any] = field(default_factory=dict)  # decisions.json at session start
    recorded_error: str | None = None

    @classmethod
    def start(cls, thresholds: Thresholds, out_dir: Path, inconclusive: str, root: Path) -> RunState:
        st = cls(thresholds, out_dir, decisions.new_run_id(), decisions.git_commit(root), inconclusive)
        try:
            st.recorded = decisions.read_decisions(out_dir)
        except ValueError as e:
            st.recorded_error = str(e)
            st.recorded = {"phases": {}}
        return st

    # ---- collecting
    def add_verdict(self, nodeid: str, verdict: Mapping[str, Any]) -> None:
        v = dict(verdict)
        v["test"] = nodeid
        self.verdicts.setdefault(nodeid, []).append(v)

    def add_properties(self, nodeid: str, props: Sequence[tuple[str, object]]) -> None:
        """Take verdicts (and engine info) out of a report's user_properties, once per test."""
        seen = {json.dumps(v, sort_keys=True, default=str) for v in self.verdicts.get(nodeid, [])}
        for name, value in props:
            if name == VERDICT_PROPERTY and isinstance(value, str):
                v = json.loads(value)
                v["test"] = nodeid
                if json.dumps(v, sort_keys=True, default=str) not in seen:
                    self.verdicts.setdefault(nodeid, []).append(v)
            elif name == ENGINE_PROPERTY and isinstance(value, str):
                info = json.loads(value)
                self.engines[str(info.get("name", len(self.engines)))] = info

    def add_fallback_test(self, nodeid: str, fallback: str, outcome: str, reason: str = "") -> None:
        """A fallback plan's test result; a test that passed with one of its own gates inconclusive
        (``inconclusive = "warn"``) does not validate the plan: recorded as "inconclusive"."""
        unsure = [v["gate"] for v in self.verdicts.get(nodeid, []) if v.get("outcome") == "inconclusive"]
        if outcome == "passed" and unsure:
            outcome = "inconclusive"
            reason = (f"gate(s) {', '.join(unsure)} inconclusive (inconclusive = \"warn\" let the test pass): "
                      "the plan is not validated")
        self.fallback_tests[nodeid] = {"test": nodeid, "fallback": fallback, "outcome": outcome, "reason": reason}

    def all_verdicts(self) -> list[dict[str, Any]]:
        return [v for vs in self.verdicts.values() for v in vs]

    # ---- fallbacks and phase dependencies
    def triggered(self, fallback: str) -> tuple[bool, str]:
        """Is ``fallback`` triggered in this run (or in the recorded decisions of its phase)?"""
        gates = [g for g in self.thresholds.gates.values() if fallback in g.fallbacks]
        names = {g.name for g in gates}
        mine = [v for v in self.all_verdicts() if v["gate"] in names]
        failed = [v for v in mine if v["outcome"] == "fail"]
        if failed:
            return True, "; ".join(v["summary"] for v in failed)
        if mine:
            return False, "not triggered: " + "; ".join(f"gate {v['gate']} {_past(v['outcome'])}" for v in mine)
        for ph in sorted({g.phase for g in gates}):
            rec = self.recorded.get("phases", {}).get(ph)
            if rec and fallback in rec.get("triggered_fallbacks", []):
                return True, f"triggered in the recorded decision of {ph} (run {rec.get('run_id')}, {rec.get('timestamp')})"
        if not gates:
            return False, f"not triggered: no gate names fallback {fallback!r}"
        return False, (
            f"not triggered: gate(s) {', '.join(sorted(names))} naming {fallback!r} were not evaluated in this run "
            "and no recorded decision triggered it"
        )

    def decision(self, phase: str) -> dict[str, Any] | None:
        """This run's result for ``phase`` if it ran here, else the recorded one, else None."""
        if phase not in self.thresholds.phases:
            raise KeyError(f"unknown phase {phase!r}; phases: {', '.join(self.thresholds.phases)}")
        current = self.phase_entries().get(phase)
        if current is not None:
            return current
        rec = self.recorded.get("phases", {}).get(phase)
        return dict(rec) if isinstance(rec, dict) else None

    def dependency_notes(self, phases: set[str]) -> list[str]:
        """For tests of ``phases``: one line per ``depends_on`` phase that has no decision yet or
        whose decision (this run's, else the recorded one) failed."""
        out = []
        for ph in sorted(phases):
            for dep in self.thresholds.phases[ph].depends_on:
                d = self.decision(dep)
                if d is None:
                    out.append(f"phase {ph} depends on {dep}, which has no recorded decision yet")
                elif d.get("outcome") in ("failed", "fallback", "inconclusive", "incomplete"):
                    fbs = ", ".join(d.get("triggered_fallbacks", [])) or "none"
                    out.append(f"phase {ph} depends on {dep}, whose recorded outcome is {d['outcome'].upper()} "
                               f"(run {d.get('run_id')}, triggered: {fbs}); see perfgate.decision({dep!r})")
        return out

    # ---- writing
    def phase_entries(self) -> dict[str, dict[str, Any]]:
        by_phase: dict[str, list[dict[str, Any]]] = {}
        for v in self.all_verdicts():
            by_phase.setdefault(v["phase"], []).append(v)
        fb_by_phase: dict[str, list[dict[str, Any]]] = {}
        for t in self.fallback_tests.values():
            for g in self.thresholds.gates.values():
                if t["fallback"] in g.fallbacks:
                    fb_by_phase.setdefault(g.phase, [])
                    if t not in fb_by_phase[g.phase]:
                        fb_by_phase[g.phase].append(t)
        return {
            ph: decisions.phase_entry(
                self.thresholds, ph, vs, fb_by_phase.get(ph, []), run_id=self.run_id, commit=self.commit,
                engines=list(self.engines.values()),
            )
            for ph, vs in by_phase.items()
        }

    def flush(self) -> dict[str, Any]:
        return decisions.merge_phases(self.out_dir, self.thresholds, self.phase_entries())


def _past(outcome: str) -> str:
    return {"pass": "passed", "fail": "failed", "inconclusive": "was inconclusive", "recorded": "was recorded"}.get(
        outcome, outcome
    )


class Perfgate:
    """The ``perfgate`` fixture: evaluate gates inside a test.

    ``check(data, gate=None)`` evaluates a gate (the test's ``@pytest.mark.gate`` when omitted),
    records the verdict, and raises :class:`GateFailure` when it fails; ``check_all(run)`` does so
    for every gate of the marker. A comparison gate (``compare`` with ``runs = [A, B]``) takes its
    runs by those names from :attr:`runs` when no data is given.
    """

    def __init__(
        self,
        state: RunState,
        bound_gates: Sequence[str],
        record: Callable[[Verdict, list[Mapping[str, Any]], Mapping[str, Any]], None],
        confidence: float | None = None,
        say: Callable[[str], None] | None = None,
        store: Callable[[Verdict, Any, float, Sequence[Any]], Verdict] | None = None,
        *,
        runs: Runs | None = None,
        engine: str = "baseline",
        note: Callable[[str], None] | None = None,
    ) -> None:
        from .features import register_features

        register_features()  # the feature packages' Methods (memory's batch ratio), before any evaluation
        self._say = say
        self._store = store  # keeps the evaluated data (and may compare with a baseline)
        self._state = state
        self._bound = tuple(bound_gates)
        self._record = record
        self._confidence = confidence
        self._note = note
        self.runs: Runs = runs if runs is not None else Runs()
        self.engine = engine  # the engine this test measures (marker, --perfgate-engine, its gates' engine =)

    @property
    def thresholds(self) -> Thresholds:
        return self._state.thresholds

    @property
    def confidence(self) -> float:
        """The confidence this test's verdicts are evaluated at, resolved once for every caller: the
        gate's own ``confidence`` when the test is bound to one gate, ``--perfgate-confidence`` (which
        never weakens a gate's own), else ``[perfgate] confidence`` of the thresholds file (0.95 when
        it has none). :meth:`check`, :meth:`evaluate`, :meth:`best_of` and
        :meth:`sample_until_decided` evaluate at this (per gate when the test has several)."""
        return self._confidence_of(self.gate() if len(self._bound) == 1 else None)

    def _confidence_of(self, g: Gate | None) -> float:
        """The confidence of gate ``g`` in this run (None: the session's, for no one gate)."""
        from ..verdicts.rules import resolve_confidence

        if g is not None:
            return resolve_confidence(g, self.thresholds, self._confidence)
        return self._confidence or self.thresholds.settings.confidence

    @property
    def params(self) -> Mapping[str, Any]:
        return self._state.thresholds.params

    @property
    def out_dir(self) -> Path:
        """The results directory (``--perfgate-out``): for files a test writes beside decisions.json."""
        return self._state.out_dir

    def write_text(self, name: str, text: str) -> Path:
        """Write ``text`` to ``name`` in the results directory (atomically, directories made); returns its path."""
        from ..runtime.atomic import atomic_write_text

        return atomic_write_text(self.out_dir / name, text, root=self.out_dir)

    def gate(self, name: str | None = None) -> Gate:
        if name is None:
            if len(self._bound) == 1:
                name = self._bound[0]
            elif not self._bound:
                raise ValueError("this test has no @pytest.mark.gate(...): name the gate, e.g. check(data, gate=\"ttft\")")
            else:
                raise ValueError(f"this test is bound to gates {', '.join(self._bound)}: name one, e.g. check(data, gate=...)")
        return self.thresholds.gate(name)

    @staticmethod
    def samples(values: Any, unit: str = "", *, failed: int = 0, **kw: Any) -> Samples:
        """Samples of the requests that succeeded; ``failed``: requests that failed or timed out
        (the error budget applies; a ``max`` latency percentile counts them as over its limit)."""
        from ..verdicts.samples import make_samples, with_failures

        s = make_samples(values, unit, **kw)
        got: Samples = with_failures(s, s.n, failed)
        return got

    @staticmethod
    def proportion(successes: int, trials: int, label: str = "", *, requests: int = 0, failed: int = 0) -> Proportion:
        """``successes`` of ``trials``, measured on ``requests`` requests of which ``failed`` failed
        (the gate's error budget applies to them)."""
        from ..verdicts.samples import Proportion, with_failures

        got: Proportion = with_failures(Proportion(successes, trials, label), requests, failed)
        return got

    def evaluate(self, data: Any = None, gate: str | None = None, *, note: Note = "", label: str = "") -> Verdict:
        """Evaluate and record without raising (for reporting several gates before asserting).

        ``note``: a line kept with the verdict (its conditions: message size, layout, setting), or a
        function of the verdict that returns it (a note about the measured number itself);
        ``label``: which of several verdicts of one gate this is (shown beside the gate's name in the
        terminal table, e.g. the message size of one all-reduce verdict per size). Every verdict goes
        through here: its data is stored (``perfgate evaluate`` reproduces it), compared with
        ``--perfgate-baseline``, given its physical floor, at ``--perfgate-confidence``."""
        return self._evaluate(data, gate, note=note, label=label)

    def _evaluate(self, data: Any, gate: str | None, *, note: Note = "", label: str = "",
                  candidates: int = 1, errors_as_verdicts: bool = False) -> Verdict:
        from ..verdicts.verdict import evaluate
        from .bench import annotate, is_benchmark, samples_of

        g = self.gate(gate)
        data = self._data_for(g, data)
        bench = data if is_benchmark(data) else None
        if bench is not None:  # pytest-benchmark's fixture: its raw per-round timings
            data = samples_of(bench, g.name)
        c = 1 - (1 - self._confidence_of(g)) / candidates  # the best of K candidates: Bonferroni over the K (verdict.best_of)
        looked = data.decided.verdict_data(g.name) if getattr(data, "decided", None) is not None else None
        if looked is not None:  # a sequential load run (load/decided.py): the gate's deciding look, at its confidence
            data, c, seq = looked
            note = _and(note, seq)
        try:
            v = valid(evaluate(g, data, confidence=c, thresholds=self.thresholds), g, data, on=self._state.validity)
        except SampleError as e:  # the run cannot give this gate's metric: this gate's named error
            if not (errors_as_verdicts or measured(data)):
                raise  # data a test made itself (perfgate.samples([...])): its own mistake, said as it is
            from ..verdicts.verdict import Verdict

            v = Verdict.error(g, str(e), confidence=c)
        said = note(v) if callable(note) else note
        v = noted(v, f"{label}: {said}" if label and said else label or said)
        if self._store is not None:
            v = self._store(v, data, c, ())
        v = self._floor(v, data)
        if bench is not None:
            annotate(bench, v)
        self._record(v, engine_infos(data), {"label": label} if label else {})
        return v

    def best_of(self, candidates: Mapping[str, Any], gate: str | None = None, *, note: Note = "",
                check: bool = True) -> tuple[str, Verdict]:
        """The best of ``candidates`` (name -> data) by point estimate in the gate's direction, gated
        at ``1 - (1 - c) / K`` for K candidates (Bonferroni: picking the best of K and gating it at c
        would pass a truth on the threshold up to K times as often); evaluated, stored and recorded
        like :meth:`check` (raises on a failure unless ``check=False``)."""
        from ..verdicts.verdict import evaluate

        g = self.gate(gate)
        k = len(candidates)
        if not k:
            raise ValueError(f"gate {g.name}: no candidates to choose from")
        c = 1 - (1 - self._confidence_of(g)) / k
        # the pick by point estimate (ties: the better bound), the same at any confidence
        point = {n: evaluate(g, self._data_for(g, d), confidence=c, thresholds=self.thresholds)
                 for n, d in candidates.items()}
        sign = -1.0 if g.direction == "max" else 1.0
        pick = max(candidates, key=lambda n: (sign * point[n].observed,
                                              sign * (point[n].lower if sign > 0 else point[n].upper)))
        said = (f"best of {k} candidates ({pick}), at {c:.4g} confidence (Bonferroni over the {k})"
                if k > 1 else "")
        def noted(v: Verdict) -> str:
            return "; ".join(x for x in (note(v) if callable(note) else note, said) if x)

        v = self._evaluate(candidates[pick], g.name, note=noted, candidates=k)
        if check:
            self.raise_for(v)
        return pick, v

    def bound_gates(self) -> list[tuple[Gate, float]]:
        """The test's ``@pytest.mark.gate`` gates, each with the confidence it is decided at
        (``perfgate_engines.run_until_decided(..., gates=perfgate)`` plans them)."""
        return [(g, self._confidence_of(g)) for g in map(self.gate, self._bound)]

    def _data_for(self, g: Gate, data: Any) -> Any:
        """A comparison gate's two runs: given as a mapping by run name, or (no data) the runs kept
        under the names of its ``runs = [...]``."""
        if g.compare and g.runs and (data is None or (isinstance(data, Mapping) and g.runs[0] in data)):
            if data is None:
                return self.runs.pair(g.runs)
            return data[g.runs[0]], data[g.runs[1]]
        if data is None:
            raise ValueError(f"gate {g.name}: no data to evaluate (pass a run or samples; only a comparison gate "
                             "with runs = [...] finds its runs by name)")
        return data

    def check(self, data: Any = None, gate: str | None = None, *, note: Note = "", label: str = "") -> Verdict:
        """:meth:`evaluate`, then raise :class:`GateFailure` when the gate failed (or errored)."""
        v = self.evaluate(data, gate, note=note, label=label)
        self.raise_for(v)
        return v

    def check_all(self, data: Any = None) -> list[Verdict]:
        """Evaluate every gate of the test's ``@pytest.mark.gate`` on ``data`` (comparison gates on
        the runs their ``runs = [...]`` name, after the others), then raise one failure naming every
        failed gate, fails before errors (else every inconclusive verdict)."""
        if not self._bound:
            raise ValueError("check_all: this test has no @pytest.mark.gate(...)")
        order = sorted(self._bound, key=lambda n: bool(self.gate(n).compare))
        # a gate whose metric the data cannot give (one chunk per stream: no ITL) is that gate's
        # error; every other gate is still decided
        verdicts = [self._evaluate(None if self.gate(n).compare else data, n, errors_as_verdicts=True) for n in order]
        failed = sorted((v for v in verdicts if v.outcome in ("fail", "error", "invalid")), key=lambda v: v.outcome != "fail")
        if failed:
            raise GateFailure(*failed)
        unsure = [v for v in verdicts if v.outcome == "inconclusive"]
        if unsure and self._state.inconclusive == "fail":
            raise GateInconclusive(*unsure)
        for v in unsure:
            self.raise_for(v)
        return verdicts

    def note(self, message: str) -> None:
        """Report a line from the test (shown in the terminal and kept with its results)."""
        if self._note is not None:
            self._note(message)
        elif self._say is not None:
            self._say(message)

    def raise_for(self, v: Verdict) -> None:
        if v.outcome in ("fail", "error", "invalid"):
            raise GateFailure(v)
        if v.outcome == "inconclusive":
            if self._state.inconclusive == "fail":
                raise GateInconclusive(v)
            warnings.warn(PerfgateWarning(v.summary()), stacklevel=3)

    def sample_until_decided(
        self,
        draw: Callable[[], Any],
        gate: str | None = None,
        *,
        max_samples: int | None = None,
        max_seconds: float | None = None,
        unit: str = "",
        check: bool = True,
        max_draws: int = 8,
        first_look: int = FIRST_LOOK,
    ) -> Verdict:
        from ..verdicts.sequential import confidence_note, sample_until_decided
        from .draws import remembering, warmup_note

        g = self.gate(gate)
        progress = None
        if self._say is not None:
            from ..runtime.progress import progress_printer

            progress = progress_printer(self._say, f"gate {g.name}", unit="samples (stops when decided)")
        last: list[Any] = []  # the latest draw: its engine and request shape give the verdict's floor
        draw = remembering(draw, last)
        drawn: list[Any] = []

        def keep() -> Any:
            got = draw()
            drawn.append(got)
            return got

        res = sample_until_decided(
            keep, g, max_samples=max_samples, max_seconds=max_seconds, confidence=self._confidence,
            thresholds=self.thresholds, unit=unit, progress=progress, max_draws=max_draws,
            first_look=first_look,
        )
        c = self._confidence_of(g)
        from dataclasses import replace
        notes = [x for x in (res.verdict.note, confidence_note(res, c), warmup_note(drawn)) if x]
        v = valid(replace(res.verdict, note="; ".join(notes)), g, drawn, on=self._state.validity)
        if self._store is not None:
            v = self._store(v, res.pooled or res.samples, res.per_look_confidence, drawn)
        v = self._floor(v, last[-1] if last else None)
        self._record(v, [], {})
        if check:
            self.raise_for(v)
        return v

    def decision(self, phase: str) -> dict[str, Any] | None:
        """The recorded (or this run's) outcome of ``phase``: verdicts, values, triggered fallbacks."""
        return self._state.decision(phase)

    def _floor(self, v: Verdict, data: Any) -> Verdict:
        """The verdict with its physical floor and MFU/MBU when the run's engine is known (floors/)."""
        from ..verdicts.samples import RequestRun

        if not isinstance(data, RequestRun) or not data.engine_info:
            return v
        from ..floors import annotate

        return annotate(v, data, self.thresholds, engine_info=data.engine_info)

    def record(self, v: Verdict, engines: Sequence[Mapping[str, Any]] = ()) -> None:
        """Record a verdict computed outside :meth:`check` with this test; ``engines``: info of the
        engines it measured. Such a verdict has no stored data, baseline check or floor: a suite's
        own estimator registers as a Method instead and goes through :meth:`check`."""
        self._record(v, list(engines), {})


def verdict_properties(v: Verdict, engines: Sequence[Mapping[str, Any]],
                       extras: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, object]]]:
    """A verdict as recorded (its dict, the store's ``extras``, the names of its engines) and the
    test's user properties that carry it (they survive pytest-xdist)."""
    d = v.to_dict()
    d.update(extras)
    d["recorded_at"] = round(time.time(), 6)  # the gate's own time in gates.xml (recorder.own_times)
    props: list[tuple[str, object]] = []
    if engines:
        d["engines"] = [str(e.get("name", e.get("model", "?"))) for e in engines]
        props += [(ENGINE_PROPERTY, json.dumps(dict(e), default=str)) for e in engines]
    props.append((VERDICT_PROPERTY, json.dumps(d, default=str, allow_nan=False)))
    props.extend(v.user_properties())
    return d, props


def _and(note: Note, more: str) -> Note:
    """``note`` (a line or a function of the verdict) followed by ``more``."""
    if callable(note):
        return lambda v: "; ".join(x for x in (note(v), more) if x)
    return "; ".join(x for x in (note, more) if x)

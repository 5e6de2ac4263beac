"""Physical floors of a thresholds file's gates: what the hardware allows for each latency and
throughput gate, on the engine each gate runs on -- the glue the plugin, the CLI and the verdicts use.

The hardware, model and roofline parts live in :mod:`pytest_perfgate.roofline` (they import nothing
of thresholds, engines or verdicts); :mod:`.cli` adds the floors to ``perfgate check``.

No torch at import. Formulas and sources: docs/metrics.md#physical-floors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..roofline.config import EngineFloorInputs, FloorsConfig, engine_inputs, parse
from ..roofline.gates import (
    RATE_METRICS,
    TIME_METRICS,
    Feasibility,
    Workload,
    feasibility,
    metric_floor,
    workload_from_params,
    workload_from_run,
)
from ..roofline.hardware import Hardware
from ..roofline.probe import detect

if TYPE_CHECKING:
    from ..config import Thresholds
    from ..verdicts.verdict import Verdict

__all__ = ["EngineFloorInputs", "allreduce_from_decisions", "Feasibility", "FloorsConfig", "Hardware", "Workload", "annotate", "check",
           "config_of", "detect", "feasibility", "inputs_for_engine", "metric_floor"]


def allreduce_from_decisions(doc: Mapping[str, Any] | None) -> float | None:
    """Per-call all-reduce latency measured by phase 3 (its ``allreduce_time`` verdicts in a decision
    record): the smallest observed value over message sizes -- decode all-reduces are small
    (batch x hidden x 2 bytes). None when phase 3 has not run."""
    phases = (doc or {}).get("phases", {}) if isinstance(doc, Mapping) else {}
    vals = [float(v["observed"]) for ph in phases.values() if isinstance(ph, Mapping)
            for v in ph.get("verdicts", []) or []
            if isinstance(v, Mapping) and v.get("metric") == "allreduce_time" and isinstance(v.get("observed"), (int, float))
            and v["observed"] > 0]
    return min(vals) if vals else None


def with_allreduce(fc: FloorsConfig, allreduce_s: float | None) -> FloorsConfig:
    """``fc`` whose hardware uses a measured all-reduce latency unless [hardware] allreduce_us is set."""
    if allreduce_s is None or fc.hardware is None or fc.hardware.interconnect_allreduce_s is not None:
        return fc
    return dataclasses.replace(fc, hardware=dataclasses.replace(fc.hardware, interconnect_allreduce_s=allreduce_s))


def config_of(th: Thresholds) -> FloorsConfig:
    """The (already validated) ``[hardware]`` and ``[models]`` of a thresholds file."""
    return parse(getattr(th, "hardware", {}) or {}, getattr(th, "models", {}) or {})


def _engine_spec(th: Thresholds, name: str, aliases: Mapping[str, str]) -> tuple[str, str, dict[str, Any], tuple[str, ...], bool]:
    """(real name, kind, args, parents, embedded) of the engine a suite's role ``name`` resolves to."""
    from ..engines.manager import EMBEDDED, uses_embedded

    real = aliases.get(name, name)
    spec = th.engines.get(real) or EMBEDDED.get(real)
    if spec is None:
        raise KeyError(real)
    parents: list[str] = []
    p = spec.extends
    while p is not None and p in th.engines and p not in parents:
        parents.append(p)
        p = th.engines[p].extends
    args = dict(spec.args)
    return spec.name, spec.kind, args, tuple(parents), uses_embedded(args)


def inputs_for_engine(
    th: Thresholds,
    name: str,
    aliases: Mapping[str, str] | None = None,
    *,
    models: Callable[[], Any] | None = None,
    probe: bool = True,
    fc: FloorsConfig | None = None,
) -> EngineFloorInputs | str:
    """Floor inputs of engine (role) ``name`` before it starts, or why there are none. Embedded
    engines need ``models`` (the generated model set; ``make_models``) and this machine's hardware
    (``probe=False``: only a cached CPU probe)."""
    fc = fc or config_of(th)
    try:
        real, _kind, args, parents, embedded = _engine_spec(th, name, aliases or {})
    except KeyError as e:
        return f"unknown engine {e.args[0]!r}"
    if embedded:
        if models is None:
            return "embedded engine: its models are generated at engine start"
        from ..engines.manager import resolve_embedded

        try:
            args = resolve_embedded(args, models)
        except LookupError as e:
            return str(e)
    return engine_inputs(fc, real, args, embedded=embedded, parents=parents, detect=lambda: detect(probe=probe))


def check(
    th: Thresholds,
    aliases: Mapping[str, str] | None = None,
    *,
    gates: list[str] | None = None,
    models: Callable[[], Any] | None = None,
    probe: bool = True,
    default: str | None = None,
    allreduce_s: float | None = None,
) -> tuple[list[Feasibility], list[str]]:
    """Feasibility of every gate with a floor: (results, notes about gates that could not be checked).
    ``allreduce_s``: phase 3's measured all-reduce latency (:func:`allreduce_from_decisions`)."""
    fc = with_allreduce(config_of(th), allreduce_s)
    out: list[Feasibility] = []
    notes: list[str] = []
    cache: dict[str, EngineFloorInputs | str] = {}
    for g in th.gates.values():
        if gates is not None and g.name not in gates:
            continue
        if g.compare or g.direction is None or g.metric not in (*TIME_METRICS, *RATE_METRICS):  # the roofline's
            continue
        params = dict(th.params.get(g.phase, {}) or {})
        params.update(g.params)
        w = workload_from_params(params)
        if w is None:
            notes.append(f"gate {g.name}: no floor: [params.{g.phase}] has no prompt_tokens")
            continue
        eng = g.engine or default or "baseline"
        if eng not in cache:
            cache[eng] = inputs_for_engine(th, eng, aliases, models=models, probe=probe, fc=fc)
        inp = cache[eng]
        if isinstance(inp, str):
            notes.append(f"gate {g.name}: no floor: {inp}")
            continue
        try:
            # [hardware]'s expected shares describe its machine: a detected one (the embedded engine's
            # CPU probe, a measured peak) plans at 100%
            on_hw = fc.hardware is not None and inp.hardware == fc.hardware
            f = feasibility(g, inp, w, fc.expected_mfu if on_hw else 1.0, fc.expected_mbu if on_hw else 1.0)
        except ValueError as e:
            notes.append(f"gate {g.name}: no floor: {e}")
            continue
        if f is not None:
            out.append(f)
    return out, notes


def annotate(v: Verdict, data: Any, th: Thresholds, engine_info: Mapping[str, Any] | None = None) -> Verdict:
    """The verdict with its floor, threshold as a multiple of the floor and measured MFU/MBU, when
    the engine's model and hardware are known (else unchanged). Never raises."""
    try:
        return _annotate(v, data, th, engine_info)
    except Exception:  # a floor is extra information: never let it break a verdict
        return v


def _annotate(v: Verdict, data: Any, th: Thresholds, engine_info: Mapping[str, Any] | None) -> Verdict:
    if v.compare or v.outcome == "error":
        return v
    info = dict(engine_info or getattr(data, "engine_info", {}) or {})
    if not info:
        return v
    w = workload_from_run(data)
    if w is None:
        return v
    fc = config_of(th)
    name = str(info.get("name", ""))
    args = dict(info.get("args") or {})
    device = str(info.get("device", ""))
    here = device == "cpu" or fc.hardware is None
    inp = engine_inputs(fc, name, args, embedded=here, parents=_parents(th, name),
                        detect=lambda: detect(probe=True))
    if isinstance(inp, str):
        return v
    f = metric_floor(v.metric, inp, w)
    if f is None:
        return v
    thr = v.threshold
    return dataclasses.replace(
        v,
        floor=f.value,
        floor_kind=f.kind,
        floor_multiple=f.multiple(thr) if thr is not None else None,
        efficiency=f.efficiency(v.observed),
        efficiency_kind=f.efficiency_kind,
        floor_basis=f.basis,
    )


def _parents(th: Thresholds, name: str) -> tuple[str, ...]:
    out: list[str] = []
    spec = th.engines.get(name)
    p = spec.extends if spec else None
    while p is not None and p in th.engines and p not in out:
        out.append(p)
        p = th.engines[p].extends
    return tuple(out)

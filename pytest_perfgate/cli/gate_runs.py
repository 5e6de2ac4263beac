"""Which imported run(s) each gate of thresholds.toml is decided on in ``perfgate gate``.

Runs are named: ``--run NAME=FILE`` names a file's run; a positional file is named by its stem; a
sweep's levels are ``NAME/LEVEL``. A gate's ``engine`` (and a comparison's ``runs = [A, B]``) names
runs; with one run given, every gate that is not a comparison takes it ("one file needs no name").
A gate on a metric no request-level export carries (memory, vision, counters) is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import metrics as metric_names
from ..imports import ImportedRun, ResultsError, load_runs
from ..imports.run import PER_CHUNK_METRICS

FROM_REQUESTS = (metric_names.RECORDS, metric_names.RUN, metric_names.REQUESTS)


@dataclass
class Inputs:
    runs: dict[str, ImportedRun] = field(default_factory=dict)  # name -> run (sweep levels: NAME/LEVEL)
    sweeps: dict[str, list[str]] = field(default_factory=dict)  # NAME -> its level runs' names
    problems: list[str] = field(default_factory=list)  # bad files, usage errors: one line each (exit 4)
    skipped: list[str] = field(default_factory=list)  # gates not decided here, and why


def read_inputs(files: list[str], named: list[str], fmt: str | None, warmup: int) -> Inputs:
    """Every file read; a bad one is one line in ``problems`` and the others are still read."""
    got = Inputs()
    pairs: list[tuple[str, str]] = [(Path(f).stem, f) for f in files]
    for item in named:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            got.problems.append(f"--run {item}: expected NAME=FILE")
            continue
        pairs.append((name, path))
    for name, path in pairs:
        if name in got.runs or name in got.sweeps:
            got.problems.append(f"{path}: run name {name!r} given twice (name it with --run NAME=FILE)")
            continue
        try:
            levels = load_runs(path, fmt, warmup=warmup)
        except ResultsError as e:
            got.problems.append(str(e))
            continue
        if list(levels) == [""]:
            got.runs[name] = levels[""]
        else:
            got.sweeps[name] = [f"{name}/{lv}" for lv in levels]
            got.runs.update({f"{name}/{lv}": r for lv, r in levels.items()})
    return got


def plan(gates: Mapping[str, Any], got: Inputs) -> list[tuple[Any, Any, str]]:
    """``(gate, data, label)`` to evaluate: data a run or a pair of runs; label a sweep level."""
    out: list[tuple[Any, Any, str]] = []
    for g in gates.values():
        if g.statistic.text == "sustained":  # a capacity gate: over a sweep's levels
            sweep = _sweep_of(g, got)
            if isinstance(sweep, str):
                got.skipped.append(f"{g.name} ({sweep})")
            else:
                out.append((g, sweep, ""))
            continue
        desc = metric_names.lookup(g.metric)
        if desc is None or desc.source not in FROM_REQUESTS:
            got.skipped.append(f"{g.name} ({g.metric}: not in a benchmark export)")
            continue
        if g.compare:
            missing = [r for r in g.runs if r not in got.runs]
            if missing or len(g.runs) != 2:
                got.skipped.append(f"{g.name} (compares runs {', '.join(g.runs)}: give --run "
                                   + " ".join(f"{r}=FILE" for r in missing or g.runs) + ")")
                continue
            out.append((g, (got.runs[g.runs[0]], got.runs[g.runs[1]]), ""))
            continue
        names = _runs_of(g, got)
        if not names:
            got.skipped.append(f"{g.name} (engine {g.engine!r}: no run of that name; give --run {g.engine}=FILE)")
            continue
        for name in names:
            run = got.runs[name]
            if desc.name in PER_CHUNK_METRICS and not run.source.per_chunk:
                got.problems.append(f"gate {g.name}: {run.source.path}: {run.source.tool} ({run.source.format}) keeps "
                                    f"no per-chunk times: {desc.name} cannot be gated on it (usage error)")
                continue
            out.append((g, run, name if len(names) > 1 else ""))
    return out


def _runs_of(g: Any, got: Inputs) -> list[str]:
    if g.engine is not None and g.engine in got.sweeps:
        return got.sweeps[g.engine]
    if g.engine is not None and g.engine in got.runs:
        return [g.engine]
    singles = [n for n in got.runs if "/" not in n]
    if len(got.runs) == 1:
        return list(got.runs)
    if not got.sweeps and len(singles) == 1:
        return singles
    if len(got.sweeps) == 1 and not singles:  # one sweep: every level
        return next(iter(got.sweeps.values()))
    return [] if g.engine is not None else sorted(got.runs)


def _sweep_of(g: Any, got: Inputs) -> Any:
    """The sweep a capacity gate is decided over (a ``load.sweep.Sweep`` of the levels' runs), or why not."""
    from ..load.sweep import Sweep

    name = g.engine if g.engine in got.sweeps else next(iter(got.sweeps)) if len(got.sweeps) == 1 else None
    if name is None:
        return "a capacity gate needs a sweep (one run per level)" + (f" named {g.engine!r}" if g.engine else "")
    levels = [got.runs[n] for n in got.sweeps[name]]
    loads = [r.source.load for r in levels]
    kinds = {ld[0] for ld in loads if ld is not None}
    if None in loads or len(kinds) != 1:
        return f"sweep {name}: its levels' loads (a rate or a concurrency each) are not all known"
    return Sweep(kinds.pop(), {ld[1]: r for ld, r in zip(loads, levels, strict=True) if ld is not None})

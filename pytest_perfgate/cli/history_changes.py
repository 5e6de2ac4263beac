"""``perfgate history --changes [GATE] [--json]`` and ``perfgate report --history DIR``: change
points of each gate over commits on a branch (store/trend.py, verdicts/changepoints.py) and the
trend site (writers/trend_site.py).

JSON: ``{"changes": [{"gate", "branch", "before", "after", "size", "lower", "upper", "level",
"confidence", "p", "n_before", "n_after", "mean_before", "mean_after", "unit", "method", "alpha"}]}``;
``before``/``after`` are full SHAs (run ids for runs recorded without a commit); ``size``,
``lower``, ``upper`` relative changes of the gate's statistic (``lower``/``upper`` the two-sided
interval at ``level``); the means in the metric's base unit.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from ..store.backend import Location, label

OK, USAGE = 0, 2


def _alpha(ns: argparse.Namespace) -> float:
    a = float(getattr(ns, "alpha", None) or 0.01)
    if not 0 < a < 0.5:
        raise ValueError(f"--alpha {a}: must be between 0 and 0.5")
    return a


def _all_series(ns: argparse.Namespace, db: Location, gates: list[str]) -> list[Any]:
    from ..store import trend

    cwd = Path.cwd()
    branches = list(getattr(ns, "branch", None) or []) or trend.default_branches(cwd)
    out = []
    for g in gates:
        out.extend(trend.branch_series(db, g, branches, cwd, alpha=_alpha(ns)))
    return out


def changes(ns: argparse.Namespace, db: Location) -> int:
    from ..store import trend
    from ..verdicts.changepoints import METHOD

    gates = [ns.gate] if ns.gate else trend.gates(db)
    if ns.gate and ns.gate not in trend.gates(db):
        raise ValueError(f"no stored verdict of gate {ns.gate!r} in {db}")
    series = _all_series(ns, db, gates)
    rows = []
    for s in series:
        for c in s.changes:
            d = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in c.to_dict().items()}
            rows.append({"gate": s.gate, "branch": s.branch, **d, "unit": s.unit, "method": METHOD,
                         "alpha": _alpha(ns)})
    if ns.json:
        print(json.dumps({"history": label(db), "alpha": _alpha(ns), "method": METHOD,
                          "series": [{"gate": s.gate, "branch": s.branch, "runs": len(s.points)} for s in series],
                          "changes": rows}, indent=2))
        return OK
    for s in series:
        print(f"gate {s.gate}, branch {s.branch}: {len(s.points)} runs, "
              f"{len(s.changes)} change point{'s' if len(s.changes) != 1 else ''} (false-alarm rate {_alpha(ns):g})")
        for c in s.changes:
            print(f"  {c.size:+.1%} ({c.lower:+.1%} .. {c.upper:+.1%} at {c.level:.0%}), confidence {c.confidence:.1%}: "
                  f"last before {c.before}, first after {c.after}")
    if not series:
        print(f"no stored run with a value in {db}")
    return OK


def site(ns: argparse.Namespace, db: Location) -> int:
    from ..store import trend
    from ..verdicts.changepoints import METHOD
    from ..writers.trend_site import write_site

    series = _all_series(ns, db, trend.gates(db))
    written = write_site([s.to_dict() for s in series], Path(ns.history), alpha=_alpha(ns), method=METHOD)
    if ns.json:
        print(json.dumps({"written": [str(p) for p in written]}, indent=2))
    else:
        for p in written:
            print(f"wrote {p}")
    return OK

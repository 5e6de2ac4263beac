"""What a dependent run's quantile claim covers, in the verdict's words: a run whose level shifted or
drifted (:mod:`.shifts`: the run's own mix of levels) and a limit far beyond every value
(:func:`.blocked.far_limit`: the clustering of the run's slowest requests)."""

from __future__ import annotations

import math

from . import blocked
from . import bounds as stats
from .dependence import Dependence
from .shifts import levels as shift_levels


def far_note(dep: Dependence, what: tuple[str, str] = ("requests", "request"), ratio: float = blocked.FAR) -> str:
    """Why a limit far beyond every value passes on the tail's clustering, and what that assumes;
    ``ratio``: the limit over the run's largest value."""
    return (f"the limit is >= {blocked.FAR:g}x every value ({ratio:.3g}x the largest): decided on how the run's "
            f"slowest {what[0]} cluster (D {dep.far:.3g}), not on the memory of its bulk; the run is "
            f"{dep.far_span:.3g}x its memory long (>= {blocked.far_length(ratio):.3g}x needed this far from the limit), "
            f"and assumes no excursion to the limit that it never showed")


def shift_note(x: stats.Array, dep: Dependence, what: tuple[str, str] = ("requests", "request")) -> str:
    """What a run whose level shifted can claim: "the run's level shifted 6 times (at requests 300,
    ...; segment medians up to 1.7x apart): the bound covers this run's own mix of levels ..."."""
    lv = [v for v in shift_levels(x, dep.shifts) if math.isfinite(v)]
    spread = f"; segment medians up to {max(lv) / min(lv):.2g}x apart" if lv and min(lv) > 0 else ""
    claim = (f"the bound covers this run's own mix of levels (the percentile over its {what[0]}), counting the "
             f"memory within each {'stretch' if dep.drift else 'level'}; a long-run claim needs runs that span the "
             "levels (repeat the run at other times and gate the runs together)")
    if dep.drift:
        return f"the run's level drifted (read as a local level over {len(dep.shifts) + 1} stretches of its {what[0]}{spread}): {claim}"
    at = ", ".join(f"{c + 1:,}" for c in dep.shifts[:5]) + (", ..." if len(dep.shifts) > 5 else "")
    times = "once" if len(dep.shifts) == 1 else f"{len(dep.shifts)} times"
    return f"the run's level shifted {times} (at {what[0]} {at}{spread}): {claim}"

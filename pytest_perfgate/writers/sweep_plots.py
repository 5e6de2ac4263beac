"""A load sweep's plots for report.html (a capacity verdict's ``curve`` in decisions.json):
latency vs load (P50/P99 TTFT and TPOT per level, each level's decision marked, the SLO limits)
and the throughput-vs-latency Pareto plot (achieved request rate against P99 TTFT, the levels on
the Pareto front joined). Inline SVG through :mod:`.plots`; labels are fixed strings and numbers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..verdicts.record import VerdictRecord
from . import plots

_MARK = {"pass": plots.GREEN, "fail": plots.RED, "inconclusive": plots.GREY}


def _num(p: Mapping[str, Any], key: str) -> float:
    x = p.get(key)
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else math.nan


def points_of(curve: object) -> list[Mapping[str, Any]]:
    """The usable levels of a stored curve (mappings with a numeric level), in level order."""
    if not isinstance(curve, (list, tuple)):
        return []
    pts = [p for p in curve if isinstance(p, Mapping) and math.isfinite(_num(p, "level"))]
    return sorted(pts, key=lambda p: _num(p, "level"))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the (throughput, latency) points no other point beats on both (higher throughput,
    lower latency), by increasing latency."""
    idx = [i for i, (x, y) in enumerate(points) if math.isfinite(x) and math.isfinite(y)]
    front = [i for i in idx if not any(points[j][0] >= points[i][0] and points[j][1] <= points[i][1]
                                       and points[j] != points[i] for j in idx)]
    return sorted(front, key=lambda i: points[i][1])


def sweep_figure(curve: object, *, unit: str = "req/s", limits: Mapping[str, float] | None = None) -> str:
    """Latency vs load and the Pareto plot side by side ("" when the curve has no level)."""
    pts = points_of(curve)
    if not pts:
        return ""
    plt = plots._plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8.4, 2.8))
    x = [_num(p, "level") for p in pts]
    for key, color, label in (("ttft", plots.BLUE, "TTFT"), ("tpot", plots.ORANGE, "TPOT")):
        for q, style in (("p50", "--"), ("p99", "-")):
            y = [_num(p, f"{key}_{q}_s") * 1e3 for p in pts]
            if any(math.isfinite(v) for v in y):
                ax1.plot(x, y, style, color=color, lw=1.2, marker=".", label=f"{label} {q.upper()}")
        lim = (limits or {}).get(key)
        if lim is not None and math.isfinite(lim):
            ax1.axhline(lim * 1e3, color=color, lw=0.8, ls=":", label=f"{label} limit")
    for xi, p in zip(x, pts, strict=True):
        ax1.axvline(xi, color=_MARK.get(str(p.get("decision")), plots.GREY), lw=0.6, alpha=0.5)
    ax1.set_xlabel("load (" + plots._safe(unit or "level") + "); lines: green pass, red fail")
    ax1.set_ylabel("ms")
    ax1.set_title("latency vs load")
    ax1.legend(fontsize=6, loc="upper left", framealpha=0.85)
    thr = [_num(p, "achieved_req_s") for p in pts]
    lat = [_num(p, "ttft_p99_s") * 1e3 for p in pts]
    colors = [_MARK.get(str(p.get("decision")), plots.GREY) for p in pts]
    ax2.scatter(lat, thr, c=colors, s=18, zorder=3)
    front = pareto_front(list(zip(thr, lat, strict=True)))
    if front:
        ax2.plot([lat[i] for i in front], [thr[i] for i in front], "-", color=plots.BLUE, lw=1, label="Pareto front")
        ax2.legend(fontsize=6, loc="lower right")
    for xi, yi, lv in zip(lat, thr, x, strict=True):
        if math.isfinite(xi) and math.isfinite(yi):
            ax2.annotate(f"{lv:g}", (xi, yi), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax2.set_xlabel("P99 TTFT (ms)")
    ax2.set_ylabel("achieved req/s")
    ax2.set_title("throughput vs latency (label: load level)")
    return plots._svg(fig)


def limits_of(v: Mapping[str, Any] | VerdictRecord) -> dict[str, float]:
    """SLO limits (s) by metric from a capacity verdict's curve keys (``p99_ttft_margin_s`` and
    ``p99_ttft_upper_s``: limit = upper + margin)."""
    out: dict[str, float] = {}
    for p in points_of(list(VerdictRecord.read(v).curve)):
        for k in p:
            if k.endswith("_margin_s"):
                stem = k[: -len("_margin_s")]
                up, margin = _num(p, stem + "_upper_s"), _num(p, k)
                metric = stem.split("_", 1)[-1]
                if math.isfinite(up) and math.isfinite(margin):
                    out.setdefault(metric, up + margin)
    return out

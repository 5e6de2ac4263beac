"""The report's plots as inline SVG strings (matplotlib, imported on first use, Agg backend).

Inputs are plain numbers already in the display unit; labels are fixed strings and numbers only
(names from the data go in the HTML captions, escaped there), so nothing from a run can reach
matplotlib's text parser. Text stays text in the SVG (``svg.fonttype = none``), escaped by matplotlib.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BLUE, ORANGE, RED, GREY, GREEN = "#0969da", "#bc4c00", "#cf222e", "#57606a", "#1a7f37"


@dataclass(frozen=True)
class Series:
    values: Sequence[float]
    label: str  # fixed text ("this run", "baseline", "treatment", ...)
    color: str = BLUE


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "svg.fonttype": "none", "svg.hashsalt": "perfgate", "font.size": 9, "axes.titlesize": 9,
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "#d8dee4",
        "grid.linewidth": 0.6, "font.family": "sans-serif", "text.usetex": False,
    })
    return plt


def _svg(fig: Any) -> str:
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # scale with the page: drop the fixed size, keep the viewBox
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="plot" role="img"', text, count=1)
    return text


def _safe(text: str) -> str:
    """Fixed labels only; still keep mathtext off ($) and control characters out."""
    return re.sub(r"[$\\\x00-\x1f]", "", text)


CDF_POINTS = 2000  # steps the CDF draws: an even selection of the sorted values beyond this (and the extremes)


def _counts(v: Any, bins: Any) -> Any:
    """``np.histogram(v, bins)[0]`` of the sorted ``v`` by binary searches (the last bin closed, as
    numpy's): no pass over every value (a 31M-gap ITL run's histogram took ~0.6 s)."""
    import numpy as np

    at = np.searchsorted(v, bins, side="left")
    at[-1] = np.searchsorted(v, bins[-1], side="right")
    return np.diff(at)


def distribution(series: Sequence[Series], unit: str, *, threshold: float | None = None,
                 lower: float | None = None, upper: float | None = None, observed: float | None = None,
                 stat_label: str = "observed") -> str:
    """Histogram and empirical CDF side by side, with the threshold, the observed statistic and its
    confidence bounds (shaded)."""
    import numpy as np

    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8.4, 2.7))
    given = [np.asarray(s.values, dtype=float) for s in series if len(s.values)]
    allv = given[0] if len(given) == 1 else np.concatenate(given)  # (one series: no copy of it)
    extra = [x for x in (threshold, lower, upper, observed) if x is not None and np.isfinite(x)]
    lo_edge = float(min(allv.min(), *extra)) if extra else float(allv.min())
    hi_edge = float(max(allv.max(), *extra)) if extra else float(allv.max())
    if hi_edge <= lo_edge:
        hi_edge = lo_edge + (abs(lo_edge) * 0.1 or 1.0)
    bins = np.linspace(lo_edge, hi_edge, 41)
    for s in series:
        v = np.sort(np.asarray(s.values, dtype=float))
        if not v.size:
            continue
        ax1.hist(bins[:-1], bins=bins, weights=_counts(v, bins), color=s.color, alpha=0.45 if len(series) > 1 else 0.7,
                 label=_safe(f"{s.label} (n={v.size})"))
        keep = np.unique(np.linspace(0, v.size - 1, CDF_POINTS).astype(int)) if v.size > CDF_POINTS else np.arange(v.size)
        ax2.step(v[keep], (keep + 1) / v.size, where="post", color=s.color, label=_safe(s.label))
    for ax in (ax1, ax2):
        if lower is not None or upper is not None:
            a = lower if lower is not None and np.isfinite(lower) else lo_edge
            b = upper if upper is not None and np.isfinite(upper) else hi_edge
            ax.axvspan(a, b, color=ORANGE, alpha=0.15, lw=0, label="bounds")
        if observed is not None and np.isfinite(observed):
            ax.axvline(observed, color=ORANGE, lw=1.4, ls="--", label=_safe(stat_label))
        if threshold is not None:
            ax.axvline(threshold, color=RED, lw=1.8, label="threshold")
        ax.set_xlabel(_safe(unit) or "value")
    ax1.set_ylabel("requests")
    ax1.set_title("histogram")
    ax2.set_ylabel("fraction <= x")
    ax2.set_ylim(0, 1.02)
    ax2.set_title("cumulative distribution")
    ax2.legend(loc="lower right", fontsize=7, framealpha=0.85)
    return _svg(fig)


def interval(rows: Sequence[tuple[str, float, float | None, float | None]], unit: str, *,
             threshold: float | None = None) -> str:
    """Horizontal intervals (one per run: fixed label, observed, lower, upper) with the threshold:
    for rates and single values, which have no per-request distribution."""
    import numpy as np

    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.4, 0.5 + 0.45 * len(rows)))
    for i, (_label, obs, lo, hi) in enumerate(rows):
        color = BLUE if i == 0 else GREY
        if lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi):
            ax.plot([lo, hi], [i, i], color=color, lw=6, alpha=0.35, solid_capstyle="butt")
        ax.plot([obs], [i], "o", color=color)
    ax.set_yticks(range(len(rows)), [_safe(r[0]) for r in rows])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    if threshold is not None:
        ax.axvline(threshold, color=RED, lw=1.8, label="threshold")
        ax.legend(loc="best", fontsize=7)
    ax.set_xlabel(_safe(unit) or "value")
    return _svg(fig)


MAX_POINTS = 5000  # points a scatter draws (an even selection of a run's requests or chunks beyond this)
BARS = 500  # requests drawn as bars in the E2E decomposition; more: filled areas


def _thin(x: Sequence[float], y: Sequence[float]) -> tuple[Any, Any]:
    """At most :data:`MAX_POINTS` of the points, evenly spaced in their order (deterministic)."""
    import numpy as np

    xs, ys = np.asarray(x, float), np.asarray(y, float)
    if xs.size <= MAX_POINTS:
        return xs, ys
    keep = np.unique(np.linspace(0, xs.size - 1, MAX_POINTS).astype(int))
    return xs[keep], ys[keep]


def _thinned(n: int) -> str:
    return f" ({MAX_POINTS} of {n} shown)" if n > MAX_POINTS else ""


def over_time(ttft: tuple[Sequence[float], Sequence[float]], itl: tuple[Sequence[float], Sequence[float]],
              decomposition: tuple[Sequence[float], Sequence[float]], *, itl_n: int | None = None) -> str:
    """Per run: TTFT per request and ITL per chunk against the run's clock (s), and each request's
    E2E split into TTFT + (N-1) x TPOT (ms). ``itl_n``: the ITL points are already the even selection
    of this many gaps (:func:`_thin`'s)."""
    import numpy as np

    plt = _plt()
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(11, 2.6))
    ax1.plot(*_thin(ttft[0], ttft[1]), "o", ms=3, color=BLUE)
    ax1.set_title("TTFT per request" + _thinned(len(ttft[0])))
    ax1.set_xlabel("send time in run (s)")
    ax1.set_ylabel("ms")
    ax2.plot(*_thin(itl[0], itl[1]), ".", ms=2, color=GREEN, alpha=0.6)
    ax2.set_title("ITL per chunk" + _thinned(len(itl[0]) if itl_n is None else itl_n))
    ax2.set_xlabel("arrival time in run (s)")
    ax2.set_ylabel("ms")
    t, d = np.asarray(decomposition[0], float), np.asarray(decomposition[1], float)
    idx = np.arange(t.size)
    if t.size <= BARS:
        ax3.bar(idx, t, color=BLUE, width=1.0, label="TTFT")
        ax3.bar(idx, d, bottom=t, color=ORANGE, width=1.0, label="(N-1) x TPOT")
    else:  # one bar a request would be one SVG path each: two filled areas over an even selection
        keep = np.unique(np.linspace(0, t.size - 1, MAX_POINTS).astype(int))
        ax3.fill_between(idx[keep], 0, t[keep], color=BLUE, lw=0, step="mid", label="TTFT")
        ax3.fill_between(idx[keep], t[keep], t[keep] + d[keep], color=ORANGE, lw=0, step="mid", label="(N-1) x TPOT")
    ax3.set_title("E2E = TTFT + (N-1) x TPOT")
    ax3.set_xlabel("request")
    ax3.set_ylabel("ms")
    ax3.legend(fontsize=7, loc="upper right")
    return _svg(fig)


def trend(points: Sequence[tuple[float, float | None, float | None]], unit: str, *,
          threshold: float | None = None, outcomes: Sequence[str] = (), labels: Sequence[str] = ()) -> str:
    """A gate's statistic over the stored runs (oldest first) with its bounds and the threshold;
    ``labels`` (one per point: date and commit) name the runs on the x axis."""
    import numpy as np

    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.4, 2.3))
    x = np.arange(1, len(points) + 1)
    obs = np.asarray([p[0] for p in points], dtype=float)
    lo = np.asarray([p[1] if p[1] is not None else np.nan for p in points], dtype=float)
    hi = np.asarray([p[2] if p[2] is not None else np.nan for p in points], dtype=float)
    ax.fill_between(x, lo, hi, color=BLUE, alpha=0.15, lw=0, label="bounds")
    ax.plot(x, obs, "-", color=BLUE, lw=1)
    colors = [RED if o in ("fail", "error") else GREEN if o == "pass" else GREY for o in outcomes] or [BLUE] * len(x)
    ax.scatter(x, obs, c=colors, s=14, zorder=3)
    if threshold is not None:
        ax.axhline(threshold, color=RED, lw=1.5, label="threshold")
    if len(labels) == len(points) and labels:
        step = max(1, -(-len(points) // 8))  # at most 8 labelled runs, the newest always
        ticks = sorted({*range(len(points) - 1, -1, -step)})
        ax.set_xticks([int(x[i]) for i in ticks], [_safe(labels[i]) for i in ticks], fontsize=6, rotation=30, ha="right")
        ax.set_xlabel("run (date, commit), oldest first")
    else:
        ax.set_xticks([int(v) for v in x])
        ax.set_xlabel("stored run (oldest first)")
    ax.set_ylabel(_safe(unit) or "value")
    ax.legend(fontsize=7, loc="best")
    return _svg(fig)

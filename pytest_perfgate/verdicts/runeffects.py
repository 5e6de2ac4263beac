"""Run-to-run variation in regression verdicts: a run's own bounds do not cover the run effect.

Each run of a gate gives an estimate of its statistic and a within-run standard error (from the run's
own one-sided bounds at its confidence: the gate's method, dependence within the run included). On
the log scale a run's estimate is

    y_i = mu(commit) + u_i + e_i,   u_i ~ (0, tau^2) the run effect (machine state), e_i ~ (0, s_i^2)

Two runs of the same code differ by ``u_1 - u_2`` as well as by their within-run errors; a single
run's bound says nothing about ``tau``. ``tau`` is estimated from repeated runs of the baseline (its
history at the baseline's commit or branch):
``tau^2 = max(0, var(y) - median(s^2))`` (the median: one run with a blown-up bound must not
swallow the run effect).

The regression test (smaller-is-better; bigger mirrors it) of the current runs' mean ``yc`` (m runs)
against the baseline runs' mean ``yb`` (k runs) at tolerance ``t``:

    T = (yc - yb - log(1 + t)) / sqrt((tau^2 + mean(s_c^2)) / m + var(y_b) / k)

compared with Student's t on k - 1 degrees of freedom (the baseline's sample variance carries
``tau``'s uncertainty; exact for normal run effects and equal within-run errors: the classic
prediction interval for the next run). Regressed when ``T > t_{k-1}(c)``, within the tolerance
when ``T' < -t_{k-1}(c)`` with ``T'`` the same at ``+t`` ruled out, else inconclusive.

With fewer than :data:`MIN_RUNS` baseline runs the run effect cannot be estimated: the verdict says
so, gives the run-to-run CV below which the change would count as a regression (the largest run
effect the within-run errors alone would still call a regression), and how many more runs decide.
Measured false-regression rates and power (normal, heavy-tailed and drifting run effects, CV 0-30%):
docs/statistics.md ("Run-to-run variation"); tests/stats/test_run_effects.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_RUNS = 3  # baseline runs needed before the run effect is estimated (2 degrees of freedom)
METHOD = "runs with run effects (t on the baseline's runs)"


@dataclass(frozen=True)
class RunEstimate:
    """One run of a gate: its estimate and within-run standard error, on the log scale."""

    y: float
    s: float
    run_id: str = ""
    commit: str = ""

    @classmethod
    def from_bounds(cls, observed: float, lower: float | None, upper: float | None, confidence: float,
                    run_id: str = "", commit: str = "") -> RunEstimate | None:
        """From a verdict's observed value and its one-sided bounds at ``confidence`` (None when the
        observed value is not positive and finite). A missing bound is read off the other side; with
        neither, the within-run error is unknown and taken as 0 (the run effect then absorbs it)."""
        if not (observed > 0 and math.isfinite(observed)):
            return None
        from scipy import stats  # (here: scipy.stats takes ~1.3 s to import)
        z = float(stats.norm.ppf(confidence)) if 0.5 < confidence < 1 else 1.6448536269514722
        lo = math.log(lower) if lower is not None and lower > 0 and math.isfinite(lower) else None
        hi = math.log(upper) if upper is not None and upper > 0 and math.isfinite(upper) else None
        y = math.log(observed)
        if lo is not None and hi is not None:
            s = (hi - lo) / (2 * z)
        elif lo is not None or hi is not None:
            s = abs(y - (lo if lo is not None else hi)) / z  # type: ignore[operator]
        else:
            s = 0.0
        return cls(y, max(0.0, s), run_id, commit)


@dataclass(frozen=True)
class Spread:
    """Between-run variation of a set of runs of the same code."""

    k: int
    mean: float  # mean log estimate
    var: float  # sample variance of the runs' log estimates (run effect + within-run error)
    within: float  # median within-run variance (log scale)
    tau: float  # run effect SD, log scale

    @property
    def cv(self) -> float:
        """The run effect as a coefficient of variation of the statistic."""
        return math.sqrt(math.expm1(self.tau * self.tau))

    def text(self) -> str:
        return (f"between-run spread CV {self.cv:.1%} over {self.k} runs "
                f"(within-run {math.sqrt(self.within):.1%})")


def spread(runs: Sequence[RunEstimate]) -> Spread:
    k = len(runs)
    if k == 0:
        raise ValueError("no runs")
    mean = sum(r.y for r in runs) / k
    var = sum((r.y - mean) ** 2 for r in runs) / (k - 1) if k > 1 else math.nan
    # the median, not the mean: one run whose bound a burst of slow requests blew up (an upper bound
    # 90x its median, seen on a busy machine) would otherwise swallow the run effect
    within = float(np.median([r.s * r.s for r in runs]))
    tau2 = max(0.0, var - within) if k > 1 else math.nan
    return Spread(k, mean, var, within, math.sqrt(tau2) if k > 1 else math.nan)


@dataclass(frozen=True)
class RunEffectsResult:
    regressed: bool
    ruled_out: bool  # within the tolerance, run effects included
    known: bool  # enough baseline runs to estimate the run effect
    change: float  # exp(yc - yb) - 1
    lower: float  # one-sided bound at the confidence of the change (relative), -inf when unknown
    upper: float
    baseline: Spread
    m: int  # current runs
    df: int
    confidence: float
    tolerance: float
    text: str
    needed_cv: float = math.nan  # unknown run effect: the CV below which the change is a regression
    more_runs: int = 0  # unknown: baseline runs still needed

    @property
    def inconclusive(self) -> bool:
        return not self.regressed and not self.ruled_out


def _within_only_cv(diff: float, se2_within: float, z: float) -> float:
    """The largest run effect CV at which ``diff`` (log) still exceeds its bound: the two runs'
    effects add 2 tau^2 to the within-run variance."""
    if diff <= 0:
        return 0.0
    tau2 = ((diff / z) ** 2 - se2_within) / 2
    return math.sqrt(math.expm1(tau2)) if tau2 > 0 else 0.0


def _drift_var(runs: Sequence[RunEstimate], b: Spread) -> tuple[float, int]:
    """The variance of the next run minus the baseline's mean when the machine's state drifts (run
    effects AR(1) in run order, phi from the lag-1 autocorrelation, bias-corrected and clipped to
    [0, 0.95]): consecutive runs are alike, the sample variance understates the marginal one and the
    next run sits nearer the latest runs than the mean; with its degrees of freedom, the runs'
    (k - 1)(1 - phi)/(1 + phi) (at least 2). (0, k - 1) with fewer than 5 runs or no positive phi."""
    k = b.k
    if k < 5 or not b.var > 0:
        return 0.0, k - 1
    d = [r.y - b.mean for r in runs]
    r1 = sum(d[i] * d[i + 1] for i in range(k - 1)) / sum(x * x for x in d)
    phi = min(0.95, max(0.0, r1 + (1 + 3 * r1) / k))  # Kendall's bias correction
    if phi == 0.0:
        return 0.0, k - 1
    v = sum(phi ** abs(i - j) for i in range(k) for j in range(k)) / (k * k)  # var(mean) / sigma^2
    cov = sum(phi ** (k - i) for i in range(k)) / k  # cov(next, mean) / sigma^2
    sigma2 = b.var * (k - 1) / (k * (1 - v)) if v < 1 else b.var
    return sigma2 * (1 + v - 2 * cov), max(2, min(k - 1, round((k - 1) * (1 - phi) / (1 + phi))))


def regression_test(current: Sequence[RunEstimate], baseline: Sequence[RunEstimate], *, tolerance: float,
                    confidence: float, smaller_is_better: bool = True,
                    current_spread: float | None = None) -> RunEffectsResult:
    """Test the current runs against the baseline runs with run effects (see the module).
    ``current_spread``: the run effect SD (log) of the current runs when known from their own
    repeats; else the baseline's is used."""
    if not current or not baseline:
        raise ValueError("a run-effects comparison needs runs on both sides")
    b = spread(baseline)
    m = len(current)
    yc = sum(r.y for r in current) / m
    wc = sum(r.s * r.s for r in current) / m
    sign = 1.0 if smaller_is_better else -1.0
    limit = math.log1p(tolerance) if smaller_is_better else math.log1p(-min(tolerance, 0.999999))
    diff = yc - b.mean
    change = math.expm1(diff)
    c = confidence
    word = "slower" if smaller_is_better else "lower"
    if b.k < MIN_RUNS:
        from scipy import stats  # (here: scipy.stats takes ~1.3 s to import)
        z = float(stats.norm.ppf(c))
        se_within2 = wc / m + b.within / b.k
        excess = sign * (diff - limit)
        needed_cv = _within_only_cv(excess, se_within2, z)
        more = MIN_RUNS - b.k
        shows = excess / math.sqrt(se_within2) > z if se_within2 > 0 else excess > 0
        if shows:
            what = (f"{abs(change):.1%} {word if sign * diff > 0 else 'better'}: beyond the {tolerance:.0%} tolerance "
                    f"by the runs' own errors, a regression only if runs of the same code vary by less than "
                    f"CV {needed_cv:.1%}")
        else:
            what = f"{change:+.1%}: no regression beyond the {tolerance:.0%} tolerance shows even within the runs' own errors"
        text = (f"run-to-run variation unknown ({b.k} baseline run{'s' if b.k != 1 else ''} in history, "
                f"{MIN_RUNS} needed): {what}; {more} more baseline run{'s' if more != 1 else ''} "
                f"(the suite run again on the baseline's code, each run recorded in its history) would decide")
        return RunEffectsResult(False, False, False, change, -math.inf, math.inf, b, m,
                                0, c, tolerance, text, needed_cv, more)
    df = b.k - 1
    tau2 = b.tau * b.tau
    if current_spread is not None and math.isfinite(current_spread):
        tau2_c = current_spread * current_spread
    else:
        tau2_c = tau2
    se2 = (tau2_c + wc) / m + b.var / b.k
    drift2, drift_df = _drift_var(baseline, b)
    if drift2 > se2:
        se2, df = drift2, drift_df
    se = math.sqrt(se2)
    from scipy import stats  # (here: scipy.stats takes ~1.3 s to import)
    tq = float(stats.t.ppf(c, df))
    t = sign * (diff - limit) / se if se > 0 else (math.inf if sign * (diff - limit) > 0 else -math.inf)
    regressed = t > tq
    ruled_out = t < -tq
    lo, hi = math.expm1(diff - tq * se), math.expm1(diff + tq * se)
    bound = f"change between {lo:+.1%} and {hi:+.1%} at {c:.0%} each side"
    verdict = (f"REGRESSED beyond the {tolerance:.0%} regression tolerance" if regressed
               else f"within the {tolerance:.0%} regression tolerance" if ruled_out
               else f"inconclusive: a regression beyond the {tolerance:.0%} tolerance can neither be shown nor "
                    f"ruled out with run effects of CV {b.cv:.1%}; more runs of this code and of the baseline may decide")
    text = (f"{m} run{'s' if m != 1 else ''} vs {b.k} baseline runs, {b.text()}: {change:+.1%} ({bound}, "
            f"t on {df} df): {verdict}")
    return RunEffectsResult(regressed, ruled_out, True, change, lo, hi, b, m, df, c, tolerance, text)

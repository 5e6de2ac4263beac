"""The max-safe-batch ratio as a Method of the framework (registered here on
:mod:`pytest_perfgate.verdicts.methods`): a ``compare = "ratio"`` gate with
``params = { estimator = "hodges_lehmann" }`` (``max_safe_batch_ratio`` in thresholds.toml).

A setting's max safe batch is measured over repeats (children), the default's too; the gate is
the ratio setting / default. The estimate is the Hodges-Lehmann ratio (the median of every pairwise
ratio), its bound the exact Mann-Whitney interval of the shift of the logs (:func:`.compare.ratio_bound`;
exact sign bounds when one side's repeats are all equal). Both sides' raw repeats are needed, so the
Method evaluates the pair itself (:meth:`HodgesLehmann.compare`). It is named by the gate's
``params.estimator``, not by ``statistic`` (a thresholds file loads without this package imported;
the session and the ``perfgate`` command import it before evaluating). A batch of 0 (nothing fits) counts
as half of the smallest, 0.5, before the ratio (the sweep does it: :func:`batch_pair`).

The best of K settings is gated with ``Perfgate.best_of`` at ``1 - (1 - c) / K`` (Bonferroni over the
candidates), so the stored data re-evaluates to the same verdict (``perfgate evaluate``).
"""

from __future__ import annotations

import math

import numpy as np

from ..config import Gate, Statistic
from ..verdicts import bounds as stats
from ..verdicts.methods import Comparison, Estimate, Method, register
from ..verdicts.rules import decide
from ..verdicts.samples import Data, SampleError, Samples, make_samples
from .compare import ratio_bound, runs_needed
from .sweep import SweepResult

KIND = "hodges_lehmann"
METHOD = "hodges-lehmann ratio, exact mann-whitney bound"


class HodgesLehmann(Method):
    """``params = { estimator = "hodges_lehmann" }`` on a ``compare = "ratio"`` gate: repeats of a
    run-level number (a max safe batch) compared as a ratio by the Hodges-Lehmann estimate and exact
    Mann-Whitney bounds."""

    kind = KIND
    help = ""  # named by params.estimator, never by statistic = ...
    accepts_proportion = False

    def min_pass_samples(self, q: float | None, direction: str | None, alpha: float) -> int:
        return math.ceil(math.log(alpha) / math.log(0.5) - 1e-12)  # the sign bound's minimum

    def point(self, st: Statistic, d: Samples) -> float:
        return float(np.median(d.values))

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> stats.Bounds:
        raise SampleError(f"estimator {KIND} compares two sets of repeats: a compare = \"ratio\" gate")

    def compare(self, gate: Gate, cmp: Comparison, a: Data, r: Data, c: float, unit: str) -> Estimate | None:
        """The ratio ``a / r`` of two sets of repeats, bounded exactly (one-sided at ``c`` each)."""
        if cmp.kind != "ratio":
            raise SampleError(f"gate {gate.name}: estimator {KIND} takes compare = \"ratio\", "
                              f"not {cmp.kind!r}")
        if not isinstance(a, Samples) or not isinstance(r, Samples):
            raise SampleError(f"gate {gate.name}: estimator {KIND} compares repeats (samples), not proportions")
        xs, ys = a.values.tolist(), r.values.tolist()
        try:
            b = ratio_bound(xs, ys, c)
        except ValueError as e:
            raise SampleError(f"gate {gate.name}: {e}") from None
        lower = b.lower if b.bounded else -math.inf
        outcome = decide(gate, stats.Bounds(b.estimate, lower, b.upper, METHOD))
        names = gate.runs if len(gate.runs) == 2 else ("treatment", "reference")
        note = (f"{names[0]} {', '.join(f'{x:g}' for x in xs)} vs {names[1]} {', '.join(f'{y:g}' for y in ys)}")
        needed = None
        if not b.bounded:
            needed = runs_needed(xs, ys, 1 - c)
            note += f"; too few repeats for any bound: run >= {needed} per side"
        details = {"treatment": float(np.median(a.values)), "reference": float(np.median(r.values))}
        return Estimate(outcome, b.estimate, lower, b.upper, min(a.n, r.n), c, METHOD, unit,
                        needed if outcome == "inconclusive" else None, note, details)


def batch_pair(sweep: SweepResult, setting: str, reference: str = "default") -> tuple[Samples, Samples]:
    """The max safe batches of ``setting`` and ``reference`` over their repeats, as the gate's two
    runs (a 0 batch counts as 0.5: half of the smallest)."""
    xs = [max(b, 0.5) for b in sweep.batches(setting)]
    ys = sweep.batches(reference)
    return make_samples(xs, "", label=setting), make_samples(ys, "", label=reference)


def candidates(sweep: SweepResult, reference: str = "default") -> dict[str, tuple[Samples, Samples]]:
    """Every setting besides ``reference`` that ran, as ``name -> (its batches, the reference's)``."""
    if not sweep.of(reference):
        raise ValueError(f"sweep: no runs of the reference setting {reference!r}")
    if min(sweep.batches(reference)) < 1:
        raise ValueError(f"sweep: setting {reference} fits no batch at all (max safe batch 0)")
    out = {s.name: batch_pair(sweep, s.name, reference) for s in sweep.settings
           if s.name != reference and sweep.of(s.name)}
    if not out:
        raise ValueError("sweep: no setting besides the reference was run")
    return out


register(HodgesLehmann())

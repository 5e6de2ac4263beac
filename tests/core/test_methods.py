"""The evaluator seam (issue 23): one Method per statistic kind in one registry.

The toy trimmed mean below is the proof that a statistic kind takes one file: it is registered from
this test module and a gate that names it loads from a thresholds file and is evaluated through the
public ``pytest_perfgate.evaluate``, single-run and as a comparison of two runs.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from pytest_perfgate import ConfigError, evaluate, load_thresholds, make_proportion, make_samples
from pytest_perfgate.config import Gate, Statistic
from pytest_perfgate.config import statistics as kinds
from pytest_perfgate.verdicts import bounds
from pytest_perfgate.verdicts.methods import Method, comparison_for, method_for, register
from pytest_perfgate.verdicts.samples import Samples


class TrimmedMean(Method):
    """``trimNN``: the mean of the middle (100 - 2 NN)% of the samples, with Tukey-McLaughlin
    (Winsorized-variance) t bounds (scipy.stats.mstats)."""

    kind = "trimmed_mean"
    help = "trimNN (a trimmed mean)"
    _RE = re.compile(r"^trim(\d{1,2})$")

    def parse(self, text: str) -> Statistic | None:
        m = self._RE.match(text)
        return Statistic(self.kind, int(m.group(1)) / 100, text) if m and int(m.group(1)) < 50 else None

    def point(self, st: Statistic, d: Samples) -> float:
        assert st.q is not None
        return float(sps.trim_mean(d.values, st.q))

    def bounds(self, st: Statistic, d: Samples, c: float, direction: str | None) -> bounds.Bounds:
        assert st.q is not None
        x, g = np.sort(d.values), int(st.q * d.n)
        h = d.n - 2 * g
        obs = self.point(st, d)
        if h < 2:
            return bounds.Bounds(obs, -math.inf, math.inf, "none")
        w = np.clip(x, x[g], x[d.n - g - 1])  # Winsorized
        se = float(np.std(w, ddof=1)) / ((1 - 2 * st.q) * math.sqrt(d.n))
        half = float(sps.t.ppf(c, h - 1)) * se
        return bounds.Bounds(obs, obs - half, obs + half, "trimmed-mean t (Tukey-McLaughlin)")

    def min_pass_samples(self, q: float | None, direction: str | None, alpha: float) -> int:
        return 20  # the sequential looks ask the Method when a pass becomes possible


register(TrimmedMean())

TOML = """
[perfgate]
confidence = 0.95
[phases.p1]
[gates.trimmed]
phase = "p1"
metric = "ttft"
statistic = "trim10"
max = "150 ms"
[gates.trimmed_ratio]
phase = "p1"
metric = "ttft"
statistic = "trim10"
compare = "ratio"
max = 1.0
[gates.unknown]
phase = "p1"
metric = "ttft"
statistic = "p99"
max = "150 ms"
"""


@pytest.fixture
def th(tmp_path: Path):
    p = tmp_path / "thresholds.toml"
    p.write_text(TOML)
    return load_thresholds(p)


def test_a_registered_method_is_a_statistic_end_to_end(th) -> None:
    """Registered from this file only: parsed from the thresholds file, evaluated through
    ``pytest_perfgate.evaluate``, passing a clearly good run and failing a clearly bad one."""
    g = th.gate("trimmed")
    assert g.statistic == Statistic("trimmed_mean", 0.10, "trim10")
    rng = np.random.default_rng(7)
    good = make_samples(rng.normal(100, 10, 200), "ms")
    v = evaluate(g, good, thresholds=th)
    assert (v.outcome, v.method, v.statistic) == ("pass", "trimmed-mean t (Tukey-McLaughlin)", "trim10")
    assert v.observed == pytest.approx(float(sps.trim_mean(good.values, 0.1)))
    assert v.lower < v.observed < v.upper < 0.150
    bad = make_samples(rng.normal(200, 10, 200), "ms")
    assert evaluate(g, bad, thresholds=th).outcome == "fail"
    # a comparison of two runs uses the same Method for each side's point and bounds
    r = evaluate(th.gate("trimmed_ratio"), (good, bad), thresholds=th)
    assert r.outcome == "pass" and r.observed == pytest.approx(v.observed / sps.trim_mean(bad.values, 0.1))


def test_the_sequential_looks_ask_the_method(th) -> None:
    """``sample_until_decided`` on the toy kind: no pass look before the Method's 20 samples."""
    from pytest_perfgate.verdicts.sequential import plan_for, sample_until_decided

    g = th.gate("trimmed")
    plan = plan_for(g, 0.95, 200)
    assert plan.first_pass >= 20 and min(plan.pass_looks) >= 20
    rng = np.random.default_rng(3)
    r = sample_until_decided(lambda: float(rng.normal(100, 10)), g, max_samples=200, thresholds=th, unit="ms")
    assert r.verdict.outcome == "pass" and r.verdict.n in plan.pass_looks


def test_the_toy_method_is_calibrated_at_the_boundary() -> None:
    """2,000 seeded trials with the true trimmed mean on the threshold: false passes <= 5% + 3 SE; a
    clearly good system (10% under) passes."""
    register(TrimmedMean())  # idempotent: the same class again
    st = Statistic("trimmed_mean", 0.1, "trim10")
    m = method_for("trimmed_mean")
    rng = np.random.default_rng(11)
    trials, passes = 2000, 0
    for _ in range(trials):
        x = rng.normal(100.0, 10.0, 60)  # symmetric: the trimmed mean is 100
        if m.bounds(st, make_samples(x, "ms"), 0.95, "max").upper < 0.100:  # base units: seconds
            passes += 1
    se = math.sqrt(0.05 * 0.95 / trials)
    assert passes / trials <= 0.05 + 3 * se, passes / trials  # measured: 0.0495
    good = sum(m.bounds(st, make_samples(rng.normal(90.0, 10.0, 60), "ms"), 0.95, "max").upper < 0.100
               for _ in range(200))
    assert good / 200 >= 0.95  # power: 10% under the threshold passes (measured: 1.0)


def test_builtin_kinds_each_have_a_method() -> None:
    for k in ("quantile", "mean", "value", "sums", "proportion", "paired"):
        assert method_for(k).kind == k
    for c in ("ratio", "difference", "reduction"):
        assert comparison_for(c).kind == c
    assert comparison_for("ratio").combine(3.0, 2.0) == 1.5
    assert comparison_for("reduction").combine(1.0, 4.0) == 0.75
    assert comparison_for("difference").combine(1.0, 4.0) == -3.0
    assert kinds.kind("quantile").min_pass_samples(0.99, "max", 0.05) == 299  # type: ignore[union-attr]
    assert kinds.kind("quantile").decidable_size(0.99, "max", 0.95, "compare") == 368  # type: ignore[union-attr]


def test_an_unknown_kind_is_a_config_error_naming_file_gate_and_key(th) -> None:
    """A gate built in code with a kind nobody registered: no silent fallback to a mean."""
    g = th.gate("unknown")
    bogus = Gate(**{**g.__dict__, "statistic": Statistic("winsorized", None, "w10")})
    with pytest.raises(ConfigError) as e:
        evaluate(bogus, make_samples([0.1, 0.2, 0.3], "s"), thresholds=th)
    msg = str(e.value)
    assert msg.startswith("thresholds.toml: [gates.unknown] statistic: statistic kind 'winsorized' is unknown")
    assert "quantile" in msg and "trimmed_mean" in msg and e.value.key == "statistic"
    with pytest.raises(ConfigError, match=r"\[gates.unknown\] statistic"):  # comparisons too
        evaluate(Gate(**{**bogus.__dict__, "compare": "ratio"}),
                 (make_samples([0.1, 0.2], "s"), make_samples([0.1, 0.2], "s")), thresholds=th)


def test_an_unknown_statistic_in_a_file_lists_the_registered_kinds(tmp_path: Path) -> None:
    p = tmp_path / "thresholds.toml"
    p.write_text(TOML.replace('statistic = "p99"', 'statistic = "p99x"'))
    with pytest.raises(ConfigError, match=r"thresholds.toml: \[gates.unknown\] statistic: unknown statistic "
                       r"'p99x' \(use p50, p90, p99, p99.9 \(any pNN\), median, mean, value, rate, sustained \(a capacity gate\), trimNN"):
        load_thresholds(p)


def test_register_refuses_a_taken_name_and_a_non_method() -> None:
    class OtherQuantile(Method):
        kind = "quantile"

    with pytest.raises(ValueError, match="'quantile' is already registered"):
        register(OtherQuantile())
    with pytest.raises(TypeError, match="takes a Method or a Comparison"):
        register(kinds.MeanKind())  # type: ignore[arg-type]
    assert method_for("quantile").kind == "quantile"  # untouched


def test_a_module_imported_again_registers_its_method_again() -> None:
    """pytester's in-process runs import a plugin's module again: the same class by module and name."""
    again = type("TrimmedMean", (Method,), {"kind": "trimmed_mean", "__module__": TrimmedMean.__module__,
                                            "__qualname__": "TrimmedMean"})
    register(again())
    assert type(method_for("trimmed_mean")) is again
    register(TrimmedMean())


def test_a_proportion_under_a_quantile_is_refused_by_the_method(th) -> None:
    from pytest_perfgate.verdicts.samples import SampleError

    g = Gate(**{**th.gate("unknown").__dict__, "metric": "acceptance_rate", "threshold": None, "direction": None})
    with pytest.raises(SampleError, match="p99 of a proportion makes no sense"):
        evaluate(g, make_proportion(3, 10))

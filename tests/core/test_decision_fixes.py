"""Issue 22 fixes (d)-(g): a dependent phase is warned when its dependency is incomplete; an override
never weakens a gate's own confidence; comparisons with no bound say the known count; a fallback
test whose own gate was inconclusive (inconclusive = "warn") does not validate its plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_perfgate import evaluate, make_samples
from pytest_perfgate.config import Thresholds
from pytest_perfgate.config.load import parse_thresholds
from pytest_perfgate.session.perfgate import RunState
from pytest_perfgate.verdicts.rules import resolve_confidence

DOC: dict[str, Any] = {
    "perfgate": {"confidence": 0.95},
    "phases": {"phase1": {"title": "one"}, "phase2": {"title": "two", "depends_on": ["phase1"]}},
    "fallbacks": {"plan_a": {"title": "Plan A"}},
    "gates": {
        "ttft": {"phase": "phase1", "metric": "ttft", "statistic": "p99", "max": "150 ms", "fallback": ["plan_a"]},
        "strict": {"phase": "phase1", "metric": "ttft", "statistic": "p50", "max": "150 ms", "confidence": 0.99},
        "cut": {"phase": "phase1", "metric": "ttft", "statistic": "p99", "compare": "reduction",
                "runs": ["plan_a", "speculative"], "min": "40%"},
        "ratio": {"phase": "phase1", "metric": "output_throughput", "statistic": "value", "compare": "ratio",
                  "runs": ["speculative", "baseline"], "min": 0.8},
    },
}


@pytest.fixture
def th() -> Thresholds:
    return parse_thresholds(DOC, Path("fixes.toml"))


def test_incomplete_dependency_is_warned(th: Thresholds, tmp_path: Path) -> None:
    st = RunState(th, tmp_path, "r2", None, recorded={"phases": {"phase1": {"outcome": "incomplete", "run_id": "r1"}}})
    (note,) = st.dependency_notes({"phase2"})
    assert "depends on phase1, whose recorded outcome is INCOMPLETE (run r1" in note


def test_override_never_weakens_a_gates_own_confidence(th: Thresholds) -> None:
    assert resolve_confidence(th.gate("strict"), th, 0.95) == 0.99
    assert resolve_confidence(th.gate("strict"), th, 0.999) == 0.999
    assert resolve_confidence(th.gate("ttft"), th, 0.9) == 0.9  # no own confidence: the override holds


def test_comparison_without_a_bound_says_the_known_count(th: Thresholds) -> None:
    rng = np.random.default_rng(5)
    a, b = (make_samples(rng.lognormal(-2.5, 0.3, 100), "s") for _ in range(2))
    v = evaluate(th.gate("cut"), (a, b), thresholds=th)
    assert v.outcome == "inconclusive" and v.needed == 368
    assert "need >= 368 samples a run (268 more in the smaller) before any bound exists" in v.summary()
    one = ([make_samples([100.0], "tok/s")], [make_samples([90.0], "tok/s"), make_samples([91.0], "tok/s")])
    w = evaluate(th.gate("ratio"), one, thresholds=th)
    assert w.outcome == "inconclusive" and "need >= 2 runs a side" in w.summary()


def test_inconclusive_fallback_test_does_not_validate_its_plan(th: Thresholds, tmp_path: Path) -> None:
    st = RunState(th, tmp_path, "r1", None, inconclusive="warn")
    st.add_verdict("t::plan_a", {"gate": "cut", "phase": "phase1", "outcome": "inconclusive"})
    st.add_fallback_test("t::plan_a", "plan_a", "passed")
    rec = st.fallback_tests["t::plan_a"]
    assert rec["outcome"] == "inconclusive" and "cut inconclusive" in rec["reason"]
    st.add_fallback_test("t::other", "plan_a", "passed")
    assert st.fallback_tests["t::other"]["outcome"] == "passed"

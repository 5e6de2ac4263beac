"""Bad measured data is rejected with a SampleError that says what is wrong (complements
tests/core/test_verdict.py::test_bad_samples): never an OverflowError, a bare ValueError or a pass."""

from __future__ import annotations

import numpy as np
import pytest
from reliability_helpers import one_gate

from pytest_perfgate.verdicts.samples import Proportion, SampleError, as_data, make_samples

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("values", "unit", "kw", "match"),
    [
        ([10**400], "ms", {}, "item 0 is too large"),
        (np.array([1.0, np.nan]), "ms", {}, "item 1 is nan"),
        (np.array([1.0, -np.inf]), "ms", {}, "item 1 is -inf"),
        (np.array([], dtype=float), "ms", {}, "no samples"),
        ([], "ms", {}, "no samples"),
        (np.array([-1.0, 2.0]), "ms", {}, "item 0 is a negative duration"),
        (np.array([-1.0]), "tok/s", {}, "negative value"),
        (np.array(["a"], dtype=object), "ms", {}, "expected numbers"),
        (["1e999 ms"], "", {}, "not a finite number"),
        (["nan ms"], "", {}, "cannot read 'nan ms'"),
        (["-3 ms"], "", {}, "negative duration"),
        (["1 ms", "1 %"], "", {}, "mixed units"),
        ([[1.0, 2.0]], "ms", {}, "item 0 is not a number"),
        ([True], "ms", {}, "item 0 is not a number"),
        ([None], "ms", {}, "item 0 is not a number"),
        ([1.0, 2.0], "ms", {"denominators": ["x", 1]}, "denominators must be numbers"),
        ([1.0, 2.0], "ms", {"denominators": [1.0, float("nan")]}, "denominators must be finite"),
        ([1.0, 2.0], "ms", {"denominators": [1.0]}, "1 denominators for 2 values"),
    ],
)
def test_bad_samples_are_clear_errors(values: object, unit: str, kw: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SampleError, match=match):
        make_samples(values, unit, **kw)  # type: ignore[arg-type]


def test_an_object_in_the_samples_is_named_briefly() -> None:
    """A run result (or any big object) where a number belongs is named by its type and size, not
    its whole repr (a run's repr is ~20 KB: it once filled a warning in the main job's output)."""
    from pytest_perfgate.contract import RequestRecord
    from pytest_perfgate.load.result import RunResult

    run = RunResult(records=[RequestRecord(index=i, tag="x") for i in range(40)])
    with pytest.raises(SampleError) as e:
        make_samples([run], "tok/s")
    assert "item 0 is not a number: a RunResult of 40 requests" in str(e.value) and len(str(e.value)) < 200
    with pytest.raises(SampleError) as e:
        make_samples([list(range(10_000))], "ms")
    assert len(str(e.value)) < 200


@pytest.mark.parametrize(("s", "t", "match"), [(1.5, 2, "integer"), (True, 2, "integer"), (-1, 2, ">= 0"),
                                               (3, 2, "successes 3 > trials 2"), (1, None, "integer")])
def test_bad_proportions(s: object, t: object, match: str) -> None:
    with pytest.raises(SampleError, match=match):
        Proportion(s, t)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), object(), {"a": 1}])
def test_as_data_rejects(value: object) -> None:
    with pytest.raises(SampleError):
        as_data(value, "ttft")


def test_nan_through_the_plugin_fails_the_test_with_the_message(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", thresholds=one_gate())
    pytester.makepyfile(test_x="""
        import pytest
        @pytest.mark.gate("g")
        def test_nan(perfgate):
            perfgate.check(perfgate.samples([1.0, float("nan")], "ms"))
    """)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*SampleError: samples: item 1 is nan; NaN and infinite values are rejected*"])
    import json

    d = json.loads((pytester.path / "perfgate-results" / "decisions.json").read_text())["phases"]["p"]
    assert d["outcome"] == "failed" and d["verdicts"][0]["outcome"] == "error"

"""An efficiency above 100% (the peak probed under more load than the run saw) is said, not hidden."""

from __future__ import annotations

import dataclasses

from pytest_perfgate import evaluate, load_thresholds, make_samples


def _verdict(efficiency: float) -> str:
    th = load_thresholds("thresholds.toml")
    v = evaluate(th.gate("long_context_ttft"), make_samples([0.1] * 400, "s"), thresholds=th)
    v = dataclasses.replace(v, floor=0.05, floor_kind="floor", efficiency=efficiency, efficiency_kind="MFU")
    return v.summary()


def test_an_efficiency_above_one_says_why() -> None:
    assert "MFU 126%" in _verdict(1.26) and "above 100%" in _verdict(1.26)
    assert "MFU 52%" in _verdict(0.52) and "above 100%" not in _verdict(0.52)

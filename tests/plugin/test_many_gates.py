"""Thousands of gates (issue 31): a line that names gates stays short (10,006 gates made a
69,036-character first terminal line)."""

from __future__ import annotations

from pathlib import Path

from pytest_perfgate.config import load_thresholds
from pytest_perfgate.session.startup import no_fallback
from pytest_perfgate.verdicts.failures import GateFailure
from pytest_perfgate.verdicts.verdict import Verdict
from pytest_perfgate.verdicts.wording import some_names


def test_some_names() -> None:
    assert some_names(["a", "b"]) == "a, b"
    names = [f"g{i}" for i in range(10_006)]
    assert some_names(names) == "g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, ... and 9,996 more"
    assert some_names(names[:10]) == ", ".join(names[:10])


def test_the_header_names_ten_gates_without_a_fallback_and_counts_the_rest(tmp_path: Path) -> None:
    gates = "".join(f'[gates.g{i:05d}]\nphase = "p"\nmetric = "ttft"\nstatistic = "p50"\nmax = "150 ms"\n\n'
                    for i in range(2_000))
    (tmp_path / "thresholds.toml").write_text('[phases.p]\ntitle = "many"\n\n' + gates)
    [line] = no_fallback(load_thresholds(tmp_path / "thresholds.toml"))
    assert line == ("perfgate: 2,000 gate(s) name no fallback plan, so their failures trigger none: "
                    + ", ".join(f"g{i:05d}" for i in range(10)) + ", ... and 1,990 more (all: perfgate gates)")


def test_gates_errored_by_one_cause_are_named_ten_at_most() -> None:
    nan = float("nan")
    vs = [Verdict(gate=f"g{i:04d}", phase="p", outcome="error", metric="ttft", statistic="p50", observed=nan,
                  lower=nan, upper=nan, n=0, confidence=0.95, method="order statistic", unit="ms",
                  note="run r: 30 of 30 requests failed") for i in range(500)]
    [line] = str(GateFailure(*vs)).splitlines()
    assert line.startswith("gates g0000, g0001,") and "... and 490 more: ERROR: not evaluated: run r:" in line
    assert len(line) < 200

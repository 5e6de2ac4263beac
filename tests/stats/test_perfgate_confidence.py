"""``Perfgate.confidence``: the one place a suite reads the confidence its verdicts are evaluated at
(the gate's own ``confidence``, ``--perfgate-confidence`` that never weakens it, else the file's
``[perfgate] confidence``), and the one the fixture's own evaluations use."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_perfgate import Perfgate, Verdict, load_thresholds
from pytest_perfgate.session.perfgate import RunState

ROOT = Path(__file__).resolve().parents[2]


def _fixture(gates: Sequence[str], option: float | None, own: float | None = None) -> Perfgate:
    th = load_thresholds(ROOT / "thresholds.toml", confidence=option)
    if own is not None:  # the gate's own confidence = ...
        g = dataclasses.replace(th.gate("long_context_ttft"), confidence=own)
        th = dataclasses.replace(th, gates={**th.gates, "long_context_ttft": g})

    def record(v: Verdict, engines: list[Mapping[str, Any]], extras: Mapping[str, Any]) -> None:
        pass

    return Perfgate(RunState(th, Path("."), "run", None), gates, record, option)


def test_the_file_default_then_the_option_then_the_gates_own() -> None:
    assert _fixture(("long_context_ttft",), None).confidence == 0.95  # [perfgate] confidence of thresholds.toml
    assert _fixture((), None).confidence == 0.95  # no one gate: the session's
    assert _fixture(("long_context_ttft",), 0.99).confidence == 0.99
    assert _fixture(("long_context_ttft", "draft_acceptance"), 0.9).confidence == 0.9
    assert _fixture(("long_context_ttft",), None, own=0.995).confidence == 0.995
    assert _fixture(("long_context_ttft",), 0.9, own=0.995).confidence == 0.995  # the option never weakens a gate's own
    assert _fixture(("long_context_ttft",), 0.999, own=0.995).confidence == 0.999


def test_the_fixtures_verdicts_use_it() -> None:
    pg = _fixture(("long_context_ttft",), 0.9, own=0.995)
    v = pg.evaluate(pg.samples([0.01, 0.02, 0.03] * 40, "s"))
    assert v.confidence == pg.confidence == 0.995


def test_no_suite_resolves_the_confidence_itself() -> None:
    for path in sorted((ROOT / "perf_tests").glob("*.py")):
        text = path.read_text()
        assert "settings.confidence" not in text, path.name
        assert "resolve_confidence" not in text, path.name

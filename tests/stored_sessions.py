"""In-process pytest sessions (pytester) of a feature's gates whose verdicts are then read back from the
stored data: shared by tests/distributed/test_phase3_stored.py and tests/memory/test_memory_stored.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

# imported before pytester's snapshot of sys.modules (an in-process run re-imports what it imports
# first, and the statistic registry of config/statistics.py, kept, would see its Methods registered twice)
import pytest_perfgate.memory.method  # noqa: F401
import pytest_perfgate.verdicts.methods  # noqa: F401
from pytest_perfgate.cli import main


def gate_session(pytester: pytest.Pytester, thresholds: str, tests: str, env: Mapping[str, str],
                 *args: str) -> pytest.RunResult:
    """``thresholds`` as thresholds.toml and ``tests`` as test_gates.py, run in this process with the
    environment variables ``env`` set (the tests' parameters) and pytest arguments ``args``."""
    pytester.makefile(".toml", thresholds=thresholds)
    pytester.makepyfile(test_gates=tests)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        return pytester.runpytest("-p", "no:cacheprovider", *args)


def phase_verdicts(pytester: pytest.Pytester, phase: str) -> list[dict[str, Any]]:
    """The verdicts of ``phase`` in the session's decisions.json, in order."""
    doc = json.loads((pytester.path / "perfgate-results" / "decisions.json").read_text())
    verdicts: list[dict[str, Any]] = doc["phases"][phase]["verdicts"]
    return verdicts


def re_evaluate(capsys: pytest.CaptureFixture[str], results: Path, gate: str) -> dict[str, Any]:
    """``perfgate evaluate`` of ``gate`` in the latest stored run of ``results`` (``--json``): its
    ``matches`` says whether the stored data gives the live verdict again."""
    capsys.readouterr()
    main(["history", "--results", str(results), "--json"])
    run = json.loads(capsys.readouterr().out)["verdicts"][-1]["run_id"]
    main(["evaluate", run, gate, "--results", str(results), "--json"])
    got: dict[str, Any] = json.loads(capsys.readouterr().out)
    return got

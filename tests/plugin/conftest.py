from __future__ import annotations

from pathlib import Path

import pytest

THRESHOLDS = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "plugin.toml").read_text()

TESTS = """
import os
import pytest

TTFT_MS = float(os.environ.get("TTFT_MS", "100"))

@pytest.mark.gate("long_context_ttft")
def test_ttft(perfgate):
    perfgate.check(perfgate.samples([TTFT_MS] * 400, "ms"))

@pytest.mark.gate("acceptance")
def test_acceptance(perfgate):
    perfgate.check(perfgate.proportion(760, 1000))

@pytest.mark.fallback("tiered_kv_cache")
def test_plan_a(perfgate):
    d = perfgate.decision("phase1")
    assert "tiered_kv_cache" in d["triggered_fallbacks"]

def test_unrelated():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", thresholds=THRESHOLDS)
    pytester.makepyfile(test_gates=TESTS)
    return pytester

"""Seeded simulations of every verdict kind at its boundary (issue 9): the truth sits exactly on the
threshold, and a verdict may pass at most 1 - c of the time (+ 3 standard errors of the estimate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate.config import Thresholds, load_thresholds

TOML = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "stats.toml").read_text()


@pytest.fixture(scope="session")
def th(tmp_path_factory: pytest.TempPathFactory) -> Thresholds:
    p: Path = tmp_path_factory.mktemp("stats") / "thresholds.toml"
    p.write_text(TOML)
    return load_thresholds(p)

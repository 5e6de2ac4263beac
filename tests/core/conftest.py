from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate.config import Thresholds, load_thresholds

TOML = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "core.toml").read_text()


@pytest.fixture
def th(tmp_path: Path) -> Thresholds:
    p = tmp_path / "thresholds.toml"
    p.write_text(TOML)
    return load_thresholds(p)

"""Real data for the store tests: load runs against the scripted server over real sockets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from postgres_history import pg_url  # noqa: F401 - a new database on the test PostgreSQL server

from pytest_perfgate.calib import Script, ScriptedServer
from pytest_perfgate.config import Thresholds, load_thresholds
from pytest_perfgate.engines.openai import OpenAIEngine

THRESHOLDS = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "store.toml").read_text()


def thresholds_at(tmp: Path, text: str = THRESHOLDS) -> Thresholds:
    p = tmp / "thresholds.toml"
    p.write_text(text)
    return load_thresholds(p)


@pytest.fixture
def th(tmp_path: Path) -> Thresholds:
    return thresholds_at(tmp_path)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(ttft=0.003, itl=0.001, num_spec_tokens=2, tokens_per_chunk=2)) as srv:
        yield srv


@pytest.fixture(scope="module")
def engine(server: ScriptedServer, openai_engine_on: Callable[..., OpenAIEngine]) -> OpenAIEngine:
    return openai_engine_on(server, "scripted", timeout=10)

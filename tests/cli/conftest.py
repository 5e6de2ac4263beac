from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from project import make, run_pytest


@dataclass(frozen=True)
class StoredRuns:
    root: Path
    results: Path
    baseline: subprocess.CompletedProcess[str]  # scripted TTFT 5 ms: every gate passes
    regressed: subprocess.CompletedProcess[str]  # TTFT 150 ms, compared with the baseline run


@pytest.fixture(scope="session")
def stored_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoredRuns]:
    """Two real pytest sessions of a perfgate project (scripted server, real sockets): the second
    one's TTFT is 30x the first's, still far under its 1 s target, run with --perfgate-baseline latest."""
    root = make(tmp_path_factory.mktemp("project"))
    a = run_pytest(root)
    b = run_pytest(root, "--perfgate-baseline", "latest", ttft=0.150)
    yield StoredRuns(root, root / "perfgate-results", a, b)

from __future__ import annotations

from collections.abc import Iterator

import pytest
from perfgate_project import StoredRuns, make, run_pytest
from postgres_history import pg_url  # noqa: F401 - a new database on the test PostgreSQL server


@pytest.fixture(scope="session")
def stored_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoredRuns]:
    """Two real pytest sessions of a perfgate project (scripted server, real sockets): the second
    one's TTFT is 30x the first's, still far under its 1 s target, run with --perfgate-baseline latest."""
    root = make(tmp_path_factory.mktemp("project"))
    a = run_pytest(root)
    b = run_pytest(root, "--perfgate-baseline", "latest", ttft=0.150)
    yield StoredRuns(root, root / "perfgate-results", a, b)

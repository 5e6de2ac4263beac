"""A real PostgreSQL server for the history tests: ``$PERFGATE_TEST_POSTGRES`` names a database on it
(``.ci/run`` starts a throwaway cluster with scripts/postgres.sh and sets it). Each test gets a new
database of its own, dropped after. Without the variable the tests skip, and say so loudly (the
reason, a warning, and a line in the terminal summary: tests/store/conftest.py)."""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

ENV = "PERFGATE_TEST_POSTGRES"
SKIPPED: list[str] = []  # the tests skipped for want of a server (the summary line lists them)
NO_SERVER = (f"NO POSTGRESQL: ${ENV} is not set, so the PostgreSQL history tests did not run "
             f"(bash .ci/run starts a server and sets it; by hand: eval \"$(scripts/postgres.sh start)\")")


def _with_db(url: str, db: str) -> str:
    u = urlsplit(url)
    return urlunsplit((u.scheme, u.netloc, "/" + db, u.query, u.fragment))


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL of a new, empty database on the test server."""
    base = os.environ.get(ENV)
    if not base:
        SKIPPED.append(request.node.nodeid)
        warnings.warn(NO_SERVER, stacklevel=1)
        pytest.skip(NO_SERVER)
    import psycopg

    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(base, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_db(base, name)
    finally:
        with psycopg.connect(base, autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

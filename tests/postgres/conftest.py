"""Fixtures for the PostgreSQL store: one server per test session, one fresh database, fresh session ids.

The server is ``$AIDEN_TEST_PG_DSN`` or a throwaway cluster
(:mod:`aiden.testing.pgcluster`). When none can be had the tests skip with
the reason, except under ``CI``, where they fail: CI must run them.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from typing import NoReturn

import pytest

from aiden.testing.pgcluster import PgServer, PgUnavailable, server_for_tests

SessionIds = Callable[[], str]


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL tests must run in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable: {reason}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The server of this test session (stopped at the end when the tests started it)."""
    try:
        import psycopg  # noqa: F401 - the store needs it; without it the tests cannot run
    except ImportError as exc:
        _unavailable(f"psycopg is not installed ({exc}): pip install 'aiden-memory[postgres]'")
    try:
        server = server_for_tests()
    except PgUnavailable as exc:
        _unavailable(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_dsn(pg_server: PgServer) -> Iterator[str]:
    """The DSN of a database created for this test session (dropped at the end)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from aiden.storage.postgres.schema import describe

    name = f"aiden_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(pg_server.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        _unavailable(f"cannot create a test database: {describe(exc)}")
    yield make_conninfo(pg_server.dsn, dbname=name)
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(psycopg.sql.Identifier(name)))


@pytest.fixture
def session_ids() -> SessionIds:
    """Fresh session ids, unique across tests and runs sharing a server."""
    run = uuid.uuid4().hex[:12]
    counter = itertools.count()
    return lambda: f"t{run}-{next(counter)}"

"""Opening on a DSN probes the server with one connection of its own, unless a pool is already leased for it.

Beside a leased pool the probe was a server connection more per open: with the
pool at the role's (or the server's) connection limit, opens failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from aiden.config import Config
from aiden.storage.postgres import store_from_dsn

pytestmark = [pytest.mark.timeout(60)]

SessionIds = Callable[[], str]
_LIMIT = 4  # the pool's default max_size


@pytest.fixture
def limited_dsn(pg_dsn: str) -> Iterator[str]:
    """``pg_dsn`` as a role allowed ``_LIMIT`` connections (dropped at the end)."""
    role = f"aiden_limited_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT {}").format(sql.Identifier(role), _LIMIT))
    yield make_conninfo(pg_dsn, user=role)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_an_open_beside_a_leased_pool_at_the_connection_limit_uses_the_pool(
    limited_dsn: str, session_ids: SessionIds
) -> None:
    first = store_from_dsn(limited_dsn, session_ids(), Config())
    try:
        # The leased pool at its max_size: every connection the role may have is the pool's.
        held = [first.pool.getconn() for _ in range(_LIMIT)]
        for conn in held:
            first.pool.putconn(conn)
        second = store_from_dsn(limited_dsn, session_ids(), Config())
        try:
            assert second.pool is first.pool
        finally:
            second.close()
    finally:
        first.close()

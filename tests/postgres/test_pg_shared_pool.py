"""Memories opened on one DSN in one process share one pool: server connections do not grow with sessions (#36).

Forty memories open at once on ``store="postgresql://..."``, each appending and
running a maintenance pass (which takes its compaction lock), hold at most the
pool's ``max_size`` server connections between them; closing the last gives
every connection back. Each memory used to open a pool of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from aiden import SessionEvent, open_memory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
_SESSIONS = 40
_MAX_SIZE = 4  # open_memory's default pool size for a DSN


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _connections(dsn: str) -> int:
    """Client connections to the test database other than the one asking."""
    db = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'"
            " AND pid <> pg_backend_pid()",
            (db,),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_memories_on_one_dsn_share_one_pool(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    before = _connections(pg_dsn)
    async with AsyncExitStack() as stack:
        memories = [
            await stack.enter_async_context(
                open_memory(tmp_path / f"m{i}", store=pg_dsn, session_id=session_ids())
            )
            for i in range(_SESSIONS)
        ]

        async def work(i: int) -> None:
            memory = memories[i]
            await memory.append(
                SessionEvent(type="user_input", role="user", content=f"worker {i} says hello")
            )
            await memory.maintain(manual=True)

        async with anyio.create_task_group() as tg:
            for i in range(_SESSIONS):
                tg.start_soon(work, i)
        during = _connections(pg_dsn) - before
        assert 1 <= during <= _MAX_SIZE
        for i, memory in enumerate(memories):
            assert [e.content for e in await memory.hot_window()][-1] == f"worker {i} says hello"
    assert _connections(pg_dsn) == before

"""Memories opened on one DSN in one process share one pool: server connections do not grow with sessions (#36).

Forty memories open at once on ``store="postgresql://..."``, each appending and
running a maintenance pass (which takes its compaction lock), hold at most the
pool's ``max_size`` server connections between them; closing the last gives
every connection back. Each memory used to open a pool of its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from aiden import SessionEvent, open_memory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
_SESSIONS = 40
_MAX_SIZE = 4  # open_memory's default pool size for a DSN


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _connections(dsn: str) -> int:
    """Server connections made with ``dsn``'s application name (this test's memories only)."""
    name = conninfo_to_dict(dsn)["application_name"]
    with psycopg.connect(dsn, autocommit=True, application_name="counter") as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _settled(dsn: str, expected: int) -> int:
    """The count once it reached ``expected`` (a closed connection's backend exits a moment later), or after 5 s."""
    deadline = time.monotonic() + 5
    while (found := _connections(dsn)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


async def test_memories_on_one_dsn_share_one_pool(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    # Its own application name: connections are counted by it, and no other test's pool is this one.
    dsn = make_conninfo(pg_dsn, application_name=f"aiden-shared-{uuid.uuid4().hex[:8]}")
    assert _connections(dsn) == 0
    async with AsyncExitStack() as stack:
        memories = [
            await stack.enter_async_context(
                open_memory(tmp_path / f"m{i}", store=dsn, session_id=session_ids())
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
        assert 1 <= _connections(dsn) <= _MAX_SIZE
        for i, memory in enumerate(memories):
            assert [e.content for e in await memory.hot_window()][-1] == f"worker {i} says hello"
    assert _settled(dsn, 0) == 0

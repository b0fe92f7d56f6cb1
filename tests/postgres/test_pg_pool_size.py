"""A memory's pool must allow MIN_POOL_SIZE connections: refused below it at open, enough at it.

Every advisory lock of a pool (the compaction lock for a whole pass, Dream's
for a whole run) lives on one connection of it, so a pass commits while Dream
runs even on a pool of two. The pools here wait at most one second for a
connection, so a regression fails fast (a StorageError naming the pool
timeout) instead of hanging.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg_pool import ConnectionPool

from aiden import open_memory
from aiden.config import Config
from aiden.errors import ConfigError
from aiden.longterm.dream_edits import DreamEdit
from aiden.longterm.history import HistoryRecord
from aiden.longterm.postgres.backend import PostgresLongTermBackend
from aiden.longterm.postgres.dream import PgDream
from aiden.longterm.postgres.schema import LongTermDb
from aiden.storage.postgres import MIN_POOL_SIZE, PostgresSessionStore, open_pool, postgres_store_factory
from aiden.storage.postgres.schema import Pool
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.testing.ltkit import NOW, said
from aiden.testing.storekit import commit_plan, plan, prepared

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SessionIds = Callable[[], str]

_TOO_SMALL = rf"=2 is too small: aiden needs at least {MIN_POOL_SIZE} connections \(one holds the advisory locks"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_pool(pg_dsn: str) -> Iterator[Callable[[int], Pool]]:
    """User pools of a given max_size waiting at most 1 s for a connection (closed at the end)."""
    made: list[Pool] = []

    def make(max_size: int) -> Pool:
        pool: Pool = ConnectionPool(
            pg_dsn, min_size=1, max_size=max_size, timeout=1.0, kwargs={"autocommit": True}, open=True
        )
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.close()


def _has_session(dsn: str, session_id: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('aiden_sessions') IS NOT NULL").fetchone()
        if row is None or row[0] is not True:
            return False
        found = conn.execute("SELECT 1 FROM aiden_sessions WHERE session_id = %s", (session_id,)).fetchone()
        return found is not None


async def test_a_pool_below_the_minimum_is_refused_at_open_before_anything_runs(
    pg_dsn: str, session_ids: SessionIds, make_pool: Callable[[int], Pool], tmp_path: Path
) -> None:
    assert MIN_POOL_SIZE == 3
    small, sid = make_pool(2), session_ids()
    with pytest.raises(ConfigError, match=rf"^postgres: the pool's max_size{_TOO_SMALL}"):
        PostgresSessionStore(session_id=sid, pool=small)
    with pytest.raises(ConfigError, match=rf"^postgres: the pool's max_size{_TOO_SMALL}"):
        postgres_store_factory(session_id=sid, pool=small)
    with pytest.raises(ConfigError, match=rf"^postgres: max_size{_TOO_SMALL}"):
        postgres_store_factory(pg_dsn, sid, max_size=2)
    with pytest.raises(ConfigError, match=rf"^postgres: max_size{_TOO_SMALL}"):
        PostgresSessionStore(pg_dsn, sid, max_size=2)
    with pytest.raises(ConfigError, match=rf"^postgres: max_size{_TOO_SMALL}"):
        open_pool(pg_dsn, max_size=2)
    with pytest.raises(ConfigError, match=r"^postgres: the pool's max_size=1 is too small"):
        PostgresSessionStore(session_id=sid, pool=make_pool(1))
    assert not _has_session(pg_dsn, sid)  # refused before any statement
    # At the minimum a memory opens and runs on the user's pool.
    enough = make_pool(MIN_POOL_SIZE)
    async with open_memory(
        tmp_path / "root", store_factory=postgres_store_factory(session_id=sid, pool=enough)
    ) as memory:
        await memory.append(said(0, "I prefer tabs over spaces."))
    assert _has_session(pg_dsn, sid)


class _HeldEditor:
    """A Dream editor that keeps its run (and Dream's connection) going until released."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()

    async def propose(self, records: Sequence[HistoryRecord], files: Mapping[str, str]) -> list[DreamEdit]:
        self.started.set()
        await self.release.wait()
        return []


def _held_by_others(pool: Pool) -> int:
    return int(pool.get_stats()["pool_size"]) - int(pool.get_stats()["pool_available"])


@pytest.mark.parametrize("size", [MIN_POOL_SIZE, 2], ids=["minimum", "two"])
async def test_a_pass_commits_while_dream_runs_and_both_locks_share_one_connection(
    session_ids: SessionIds, make_pool: Callable[[int], Pool], size: int
) -> None:
    pool = make_pool(MIN_POOL_SIZE)
    config = Config(lock_timeout_s=1.0)
    store = PostgresSessionStore(session_id=session_ids(), pool=pool, config=config)
    backend = PostgresLongTermBackend(store, config, ExtractiveSummarizer())
    editor = _HeldEditor()
    dream = PgDream(
        LongTermDb(pool, store.long_term_namespace, store.session_id, store.ensure_ready),
        editor=editor,
        lock_timeout_s=1.0,
    )
    store.append([[prepared(f"event {i}") for i in range(1, 5)]])
    backend.history.append("Constraints:\n- Always use yarn, never npm.", session_key="w", now=NOW)
    # Below the refusal's minimum (a pool resized after the store was made, the only way past it).
    pool.resize(1, size)
    held_in_pass: list[int] = []

    def locked_pass() -> int:
        """The scheduler's pass: the lock, a snapshot, the running summary, the commit, the history record."""
        store.lock_compaction()
        try:
            held_in_pass.append(_held_by_others(pool))
            snap = store.snapshot()
            anyio.from_thread.run(lambda: backend.summaries.merge_running_summary(snap.events[:2], now=NOW))
            full, hot = commit_plan(store, plan(snap, 2))
            backend.history.append(full.summary, session_key="w", now=NOW, chunk_id=full.chunk_id)
            store.append([[prepared("an append during the pass")]])
            return hot
        finally:
            store.unlock_compaction()

    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(dream.run, now=NOW))
        await editor.started.wait()  # Dream holds its lock from here on
        try:
            assert _held_by_others(pool) == 1  # the lock connection, no statement's
            assert await anyio.to_thread.run_sync(locked_pass) == 2  # seqs 3 and 4 stay hot
            assert held_in_pass == [1]  # both locks on that one connection
        finally:
            editor.release.set()
    assert _held_by_others(pool) == 0
    store.close()

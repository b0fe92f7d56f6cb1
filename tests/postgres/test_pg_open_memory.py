"""``open_memory(root, store="postgresql://...", session_id=...)``: the PostgreSQL store selected by its DSN.

A full round trip (append, compact through maintain, recall, close, reopen)
through the async and the sync entry points, a store object and a factory
passed as ``store=``, and the errors of a bad DSN or a bad combination of
arguments (aiden errors, passwords masked, nothing opened).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import aiden.sync
from aiden import Layout, SessionEvent, open_memory
from aiden.config import Config
from aiden.errors import ConfigError, InvalidIdError, StorageError
from aiden.extension import STORES_GROUP, looks_like_dsn
from aiden.storage.fs import Storage
from aiden.storage.postgres import PostgresSessionStore, postgres_store_factory, store_from_dsn
from aiden.storage.postgres.store import CHECKS
from aiden.testing.conformance_retry import (
    check_a_rotation_ends_the_retry_window,
    check_retries_return_the_stored_events,
)
from tests.helpers import wait_parked

pytestmark = [pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
_SECRET = "s3cret-pw"


def _said(i: int) -> SessionEvent:
    topic = "the deploy key lives in vault path secret/ci/deploy" if i == 3 else f"routine step {i} done"
    return SessionEvent(type="user_input", role="user", content=f"{topic}. " + "filler words " * 30)


def _uri(dsn: str) -> str:
    """The test server's DSN as a ``postgresql://`` URI (what users pass)."""
    p = conninfo_to_dict(dsn)
    return f"postgresql://{p['user']}@{p['host']}:{p['port']}/{p['dbname']}"


def _closed_port() -> int:
    # A port nothing listens on: bind, read the number, close.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.anyio
async def test_round_trip_append_compact_recall_close_reopen(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid, dsn = session_ids(), _uri(pg_dsn)
    async with open_memory(tmp_path, store=dsn, session_id=sid, context_window=4096) as memory:
        assert memory.recovery.checked == CHECKS and memory.recovery.unrecoverable == []
        appended = await memory.append_many(_said(i) for i in range(40))
        assert [e.seq for e in appended] == list(range(1, 41))
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted, outcome
        assert outcome.chunk_id is not None
        index = await memory.chunk_index()
        assert [c.chunk_id for c in index.chunks] == [outcome.chunk_id]
        hot = await memory.hot_window()
        assert [e.seq for e in hot] == [1, *range(index.last_seq + 1, 41)]
        hits = await memory.recall_session_chunks("deploy key vault")
        assert hits and hits[0].first_seq == 4 and hits[0].chunk_id == outcome.chunk_id

    # Nothing of the session went to files: the events and chunks live in the database.
    assert not Layout(tmp_path).events.exists()
    assert not Layout(tmp_path).index.exists()

    async with open_memory(tmp_path, store=dsn, session_id=sid, context_window=4096) as again:
        assert again.recovery.checked == CHECKS and again.recovery.changed is False
        assert await again.hot_window() == hot
        assert await again.chunk_index() == index
        hits = await again.recall_session_chunks("deploy key vault")
        assert hits and hits[0].chunk_id == outcome.chunk_id
        verbatim = await again.rehydrate(outcome.chunk_id, [4])
        assert [(e.seq, e.content) for e in verbatim] == [(4, appended[3].content)]
        assert (await again.append(_said(41))).seq == 41

    # Another session id in the same database is another, empty session.
    async with open_memory(tmp_path / "other", store=dsn, session_id=session_ids()) as other:
        assert await other.hot_window() == []
        assert (await other.append(_said(0))).seq == 1


def test_sync_open_memory_selects_the_store_by_dsn(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    with aiden.sync.open_memory(tmp_path / "a", store=pg_dsn, session_id=sid, context_window=4096) as memory:
        assert [e.seq for e in memory.append_many(_said(i) for i in range(40))] == list(range(1, 41))
        outcome = memory.maintain(manual=True)
        assert outcome.compacted and outcome.chunk_id is not None
        hot = memory.hot_window()
    # A second worker (its own root, its own recall cache) on the same session id.
    with aiden.sync.open_memory(tmp_path / "b", store=pg_dsn, session_id=sid, context_window=4096) as other:
        assert other.hot_window() == hot
        hits = other.recall_session_chunks("deploy key vault")
        assert [h.chunk_id for h in hits][:1] == [outcome.chunk_id]
        assert other.append(_said(41)).seq == 41


@pytest.mark.anyio
async def test_a_parked_memory_on_postgresql_starts_again_at_the_next_call(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    # Parked: only the host's task is left; the store (its pool) stays open.
    before = len(asyncio.all_tasks())
    config = Config(evict_after_idle_minutes=0.1 / 60)
    sid, dsn = session_ids(), _uri(pg_dsn)
    async with open_memory(tmp_path, store=dsn, session_id=sid, context_window=4096, config=config) as memory:
        assert [e.seq for e in await memory.append_many(_said(i) for i in range(40))] == list(range(1, 41))
        await wait_parked(before)
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted, outcome
        assert (await memory.append(_said(40))).seq == 41
        hits = await memory.recall_session_chunks("deploy key vault")
        assert hits and hits[0].first_seq == 4
    async with open_memory(tmp_path, store=dsn, session_id=sid, context_window=4096) as again:
        assert (await again.hot_window())[-1].seq == 41


@pytest.mark.anyio
async def test_a_store_object_or_a_factory_is_accepted(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    store = PostgresSessionStore(pg_dsn, sid)
    async with open_memory(tmp_path / "a", store=store) as memory:
        assert (await memory.append(_said(1))).seq == 1
    assert store.last_checks == CHECKS
    async with open_memory(tmp_path / "b", store=postgres_store_factory(pg_dsn, sid)) as memory:
        assert [e.seq for e in await memory.hot_window()] == [1]
    # The store_factory seam works as before.
    async with open_memory(tmp_path / "c", store_factory=postgres_store_factory(pg_dsn, sid)) as memory:
        assert (await memory.append(_said(2))).seq == 2


@pytest.mark.anyio
async def test_an_unreachable_server_is_a_storage_error_with_the_password_masked(tmp_path: Path) -> None:
    dsn = f"postgresql://aiden:{_SECRET}@127.0.0.1:{_closed_port()}/aiden"
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        async with open_memory(tmp_path, store=dsn, session_id="w1"):
            pytest.fail("opened a memory on a server that does not exist")
    message = str(caught.value)
    assert message.startswith("postgres: cannot connect with 'postgresql://aiden:***@127.0.0.1:")
    assert _SECRET not in message
    assert time.monotonic() - started < 10.0  # refused at once, not after the pool's 30 s timeout
    assert not Layout(tmp_path).events.exists()


@pytest.mark.anyio
async def test_a_login_refused_is_a_storage_error_with_the_password_masked(
    tmp_path: Path, pg_dsn: str
) -> None:
    # A role that does not exist: refused whatever the server's auth method (trust checks roles too).
    dsn = make_conninfo(pg_dsn, user="no_such_role_x", password=_SECRET)
    with pytest.raises(StorageError, match="no_such_role_x") as caught:
        async with open_memory(tmp_path, store=dsn, session_id="w1"):
            pytest.fail("logged in as a role that does not exist")
    assert _SECRET not in str(caught.value)
    assert "password=***" in str(caught.value)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        (f"postgresql://aiden:{_SECRET}@localhost/db?bogus_option=1", "is not a valid PostgreSQL DSN"),
        (f"host=localhost password={_SECRET} dbname", "is not a valid PostgreSQL DSN"),
        (f"mysql://aiden:{_SECRET}@localhost/db", "is not a PostgreSQL DSN"),
        ("./sessions/agent-7", "is not a PostgreSQL DSN"),
    ],
)
async def test_a_bad_dsn_is_a_config_error_with_the_password_masked(
    tmp_path: Path, dsn: str, expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected) as caught:
        async with open_memory(tmp_path, store=dsn):
            pytest.fail("opened a memory on a bad DSN")
    assert _SECRET not in str(caught.value)
    assert not Layout(tmp_path).events.exists()


@pytest.mark.anyio
async def test_bad_argument_combinations_are_refused_before_anything_opens(
    tmp_path: Path, pg_dsn: str
) -> None:
    with pytest.raises(InvalidIdError):
        async with open_memory(tmp_path, store=pg_dsn, session_id="../escape"):
            pytest.fail("opened a memory with a bad session id")
    with pytest.raises(ConfigError, match="not both"):
        async with open_memory(tmp_path, store=pg_dsn, store_factory=postgres_store_factory(pg_dsn)):
            pytest.fail("opened with store= and store_factory=")
    with pytest.raises(ConfigError, match="session_id= applies only to"):
        async with open_memory(tmp_path, session_id="w1"):
            pytest.fail("opened the file store with a session id it would ignore")
    with pytest.raises(ConfigError, match="not int"):
        async with open_memory(tmp_path, store=42):  # type: ignore[arg-type]
            pytest.fail("opened with store=42")
    assert not Layout(tmp_path).events.exists()


def test_the_postgresql_store_attaches_by_name() -> None:
    (opener,) = entry_points(group=STORES_GROUP, name="postgresql")
    assert opener.load() is store_from_dsn


def test_looks_like_dsn() -> None:
    assert [
        looks_like_dsn(s)
        for s in (
            "postgresql://u@h/db",
            "POSTGRES://h",
            "postgresql://",
            "host=h dbname=d",
            " dbname = d",
            "mysql://u@h/db",
            "/var/lib/aiden",
            "",
        )
    ] == [True, True, True, True, True, False, False, False]


def test_the_file_store_is_still_the_default(tmp_path: Path) -> None:
    from aiden.extension import select_store
    from aiden.storage.session import FileSessionStore

    store = select_store(None, None, FileSessionStore, Layout(tmp_path), Storage(), Config())
    try:
        assert isinstance(store, FileSessionStore)
    finally:
        store.close()


@pytest.mark.anyio
async def test_retries_return_the_stored_events(tmp_path: Path, pg_dsn: str, session_ids: SessionIds) -> None:
    sid, dsn = session_ids(), _uri(pg_dsn)
    await check_retries_return_the_stored_events(
        lambda: open_memory(tmp_path, store=dsn, session_id=sid, context_window=4096), count=40, reopen=True
    )


@pytest.mark.anyio
async def test_a_rotation_ends_the_retry_window(tmp_path: Path, pg_dsn: str, session_ids: SessionIds) -> None:
    sid, dsn = session_ids(), _uri(pg_dsn)
    await check_a_rotation_ends_the_retry_window(
        lambda: open_memory(tmp_path, store=dsn, session_id=sid, context_window=4096)
    )

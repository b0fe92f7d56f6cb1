"""Appends of many sessions on one pool commit together: one transaction, not one per session (#36).

``PostgresSessionStore.append_group`` takes the queued appends of every store on
the same pool; each batch is stored exactly as its store's own ``append``
would store it (gap-free seqs per session, ``event_id`` dedupe, a batch that
does not decode fails alone). Through ``open_memory``, 32 sessions that each
append one event at the same moment share transactions: the rows' ``xmin``
(the id of the transaction that inserted them) shows how many there were; and
16 sessions with 3 appenders each, a fifth of whose appends retry an
acknowledged ``event_id``, store every id once with gap-free seqs.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import msgspec
import psycopg
import pytest

from aiden import Memory, PostgresSessionStore, PreparedEvent, SessionEvent, open_memory
from aiden.events import encode_event
from aiden.storage.postgres import appends as append_path
from aiden.storage.postgres import open_pool

pytestmark = [pytest.mark.timeout(120)]

SessionIds = Callable[[], str]


def _event(text: str, event_id: str | None = None) -> PreparedEvent:
    line = encode_event(SessionEvent(type="user_input", role="user", content=text))
    return PreparedEvent(line, event_id)


@pytest.mark.parametrize(
    "statement_bytes", [append_path._STATEMENT_BYTES, 1], ids=["one statement", "one per event"]
)
def test_a_group_stores_each_batch_as_its_own_append_would(
    pg_dsn: str, session_ids: SessionIds, monkeypatch: pytest.MonkeyPatch, statement_bytes: int
) -> None:
    monkeypatch.setattr(append_path, "_STATEMENT_BYTES", statement_bytes)
    pool = open_pool(pg_dsn, max_size=4)
    a_id, b_id = session_ids(), session_ids()
    stores = [
        PostgresSessionStore(session_id=a_id, pool=pool),
        PostgresSessionStore(session_id=b_id, pool=pool),
        PostgresSessionStore(session_id=a_id, pool=pool),  # a second store of session a
        PostgresSessionStore(session_id=session_ids(), pool=pool),
    ]
    try:
        assert stores[0].append([[_event("a1", "id-a1")]]) == [[1]]
        group = stores[0].append_group
        assert all(s.append_group == group for s in stores)
        results = group.append_sessions(
            [
                (stores[0], [[_event("a2"), _event("a1 again", "id-a1")], [_event("a3", "id-a3")]]),
                (stores[1], [[_event("b1", "id-b1"), _event("b1 twice", "id-b1")]]),
                (stores[2], [[_event("a4", "id-a3"), _event("a5")]]),
                (stores[3], [[PreparedEvent(b"{not json", None)]]),
            ]
        )
        assert results[:3] == [[[2, -1], [3]], [[1, -1]], [[-3, 4]]]
        assert isinstance(results[3], msgspec.DecodeError)
        assert [e.content for e in stores[0].read_hot_window()] == ["a1", "a2", "a3", "a5"]
        assert [e.seq for e in stores[2].read_hot_window()] == [1, 2, 3, 4]
        assert [e.content for e in stores[1].read_hot_window()] == ["b1"]
        assert stores[3].read_hot_window() == []
        # Nothing a failed batch held is stored; the session's next append starts at 1.
        assert stores[3].append([[_event("d1"), _event("d2")]]) == [[1, 2]]
        assert [e.content for e in stores[3].read_hot_window()] == ["d1", "d2"]
    finally:
        for store in stores:
            store.close()
        pool.close()


def test_stores_on_different_pools_are_different_groups(pg_dsn: str, session_ids: SessionIds) -> None:
    first, second = open_pool(pg_dsn, max_size=3), open_pool(pg_dsn, max_size=3)
    a = PostgresSessionStore(session_id=session_ids(), pool=first)
    b = PostgresSessionStore(session_id=session_ids(), pool=second)
    try:
        assert a.append_group != b.append_group
        (error,) = a.append_group.append_sessions([(b, [[_event("x")]])])
        assert isinstance(error, Exception)
        assert b.read_hot_window() == []
    finally:
        a.close()
        b.close()
        first.close()
        second.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sessions_appending_at_once_share_transactions(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sessions = 32
    dsn = pg_dsn + f" application_name=aiden-group-{uuid.uuid4().hex[:8]}"
    ids = [session_ids() for _ in range(sessions)]
    async with AsyncExitStack() as stack:
        memories = [
            await stack.enter_async_context(open_memory(tmp_path / f"m{i}", store=dsn, session_id=sid))
            for i, sid in enumerate(ids)
        ]
        for memory in memories:  # each session's rows exist before the measured appends
            await memory.append(SessionEvent(type="system_event", role="system", content="start"))

        async def one(memory: Memory, i: int) -> None:
            await memory.append(SessionEvent(type="user_input", role="user", content=f"turn of {i}"))

        async with anyio.create_task_group() as tg:
            for i, memory in enumerate(memories):
                tg.start_soon(one, memory, i)
        for i, memory in enumerate(memories):
            assert [e.content for e in await memory.hot_window()] == ["start", f"turn of {i}"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT e.xmin::text) FROM aiden_sessions s"
            " JOIN aiden_events e ON e.generation = s.generation"
            " WHERE s.session_id = ANY(%s) AND e.seq = 2",
            (ids,),
        ).fetchone()
    assert row is not None
    events, transactions = int(row[0]), int(row[1])
    assert events == sessions
    # One transaction per session before; a few now (the first ones start before the rest queue).
    assert transactions <= sessions // 2, transactions


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_retries_across_shared_transactions_are_stored_once_and_seqs_stay_gap_free(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    rng = random.Random(7)
    sessions, appenders, appends = 16, 3, 30
    async with AsyncExitStack() as stack:
        memories = [
            await stack.enter_async_context(
                open_memory(tmp_path / f"m{i}", store=pg_dsn, session_id=session_ids())
            )
            for i in range(sessions)
        ]
        acked: list[set[str]] = [set() for _ in range(sessions)]

        async def appender(i: int, who: int) -> None:
            for k in range(appends):
                # A fifth of the appends retry an id this session already acknowledged.
                retry = acked[i] and rng.random() < 0.2
                eid = rng.choice(sorted(acked[i])) if retry else f"a{who}-{k}"
                stored = await memories[i].append(
                    SessionEvent(type="user_input", role="user", content=eid, event_id=eid)
                )
                assert (stored.event_id, stored.content) == (eid, eid)
                acked[i].add(eid)

        async with anyio.create_task_group() as tg:
            for i in range(sessions):
                for who in range(appenders):
                    tg.start_soon(appender, i, who)
        for i, memory in enumerate(memories):
            hot = await memory.hot_window()
            assert [e.seq for e in hot] == list(range(1, len(hot) + 1))
            assert sorted(e.event_id or "" for e in hot) == sorted(acked[i])

"""``open_memory(root, store="postgresql://...", session_id=...)`` keeps long-term memory in the database.

Two workers of one agent (different roots, one session id) share it through
the public API: a memory one saves is in the other's prompt layer, the
history one's compaction records is what the other's Dream folds, the
versions are one log, a checkpoint reaches the next session; nothing of it is written
under either root.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec
import pytest

from aiden import Layout, SessionEvent, open_memory
from aiden.testing import SlowSummarizer
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
YARN = "Always use yarn, never npm."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _said(i: int) -> SessionEvent:
    topic = "the deploy key lives in vault path secret/ci/deploy" if i == 3 else f"routine step {i} done"
    return SessionEvent(type="user_input", role="user", content=f"{topic}. " + "filler words " * 30)


async def test_two_workers_of_one_agent_share_long_term_memory(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    async with open_memory(tmp_path / "a", store=pg_dsn, session_id=sid, context_window=4096) as first:
        answer = json.loads(
            await first.handle_tool_call(
                "save_memory", {"type": "preference", "title": "Package manager", "content": YARN}
            )
        )
        memory_id = answer["saved"]["id"]
        await first.append_many(_said(i) for i in range(40))
        outcome = await first.maintain(manual=True)
        assert outcome.compacted and outcome.chunk_id is not None
        await first.append(SessionEvent(type="user_input", role="user", content="I prefer tabs over spaces."))
        path = await first.checkpoint()
        assert path is not None and path.startswith(f"postgres:{sid}/sessions/")

        async with open_memory(tmp_path / "b", store=pg_dsn, session_id=sid, context_window=4096) as second:
            layer = second.long_term_layer
            assert "I prefer tabs over spaces." not in layer  # its own session's summary: in its prompt already
            assert f"**Package manager**: {YARN} ({memory_id})" in layer  # the profile of the shared entries
            dreamed = await second.dream()
            assert (dreamed.ran, dreamed.records, dreamed.cursor) == (True, 1, 1)  # the chunk first compacted
            assert [v.commit_id for v in await first.dream_log()] == [dreamed.commit_id]
            assert (await first.dream()).ran is False  # nothing new for anyone
            forgot = json.loads(await second.handle_tool_call("forget_memory", {"id": memory_id}))
            assert forgot == {"forgotten": memory_id}
        answer = json.loads(await first.handle_tool_call("forget_memory", {"id": memory_id}))
        assert answer == {"error": f"forget_memory: no memory with id {memory_id!r}"}

    for root in ("a", "b"):
        assert not Layout(tmp_path / root).long_term.exists()


async def test_the_session_summary_written_at_close_reaches_the_next_worker(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    async with open_memory(tmp_path / "a", store=pg_dsn, session_id=sid) as first:
        await first.append(SessionEvent(type="user_input", role="user", content="I prefer tabs over spaces."))
        assert first.long_term_layer == ""
    async with open_memory(tmp_path / "b", store=pg_dsn, session_id=sid) as second:
        assert second.long_term_layer == ""  # the same session: its own summary is not earlier knowledge
        await second.rotate()
        assert "I prefer tabs over spaces." in second.long_term_layer
    # Another agent (session id) has its own long-term memory.
    async with open_memory(tmp_path / "c", store=pg_dsn, session_id=session_ids()) as other:
        assert other.long_term_layer == ""


def test_only_a_postgres_session_store_brings_its_long_term_backend(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    from aiden.config import Config
    from aiden.longterm.postgres.backend import PostgresLongTermBackend
    from aiden.longterm.service import select_long_term
    from aiden.storage.postgres import PostgresSessionStore
    from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
    from aiden.testing import MemorySessionStore

    summarizer = ExtractiveSummarizer()
    assert select_long_term(MemorySessionStore(), Config(), summarizer) is None  # the files under root
    store = PostgresSessionStore(pg_dsn, session_ids(), long_term_namespace="team-x")
    try:
        factory = select_long_term(store, Config(), summarizer)
        assert factory is not None
        send, receive = anyio.create_memory_object_stream[None](1)
        with send, receive:
            backend = factory(send)
            assert isinstance(backend, PostgresLongTermBackend) and backend.namespace == "team-x"
    finally:
        store.close()


async def test_sessions_naming_one_namespace_share_it(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    from aiden.storage.postgres import postgres_store_factory

    team = f"{session_ids()}-team"
    one = postgres_store_factory(pg_dsn, session_ids(), long_term_namespace=team)
    async with open_memory(tmp_path / "a", store=one) as first:
        answer = json.loads(
            await first.handle_tool_call(
                "save_memory", {"type": "rule", "title": "Reviews", "content": "Two approvals."}
            )
        )
    other = postgres_store_factory(pg_dsn, session_ids(), long_term_namespace=team)
    async with open_memory(tmp_path / "b", store=other) as second:
        assert f"**Reviews**: Two approvals. ({answer['saved']['id']})" in second.long_term_layer
        assert await second.hot_window() == []  # another session: its own events


async def test_close_with_a_merge_in_flight_on_a_hung_summarizer_writes_the_summary_beside_it(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds, caplog: pytest.LogCaptureFixture
) -> None:
    # As on files (tests/longterm/test_close_deadline.py): the close used to wait behind the merge,
    # which holds the store's ordering lock across its summarizer call, for the whole deadline.
    sid = session_ids()
    config = msgspec.structs.replace(
        SMALL_MANUAL, summarizer_timeout_s=10_000.0, close_timeout_s=0.2, count_compress_after_events=5
    )
    hung = SlowSummarizer(10_000.0)
    with caplog.at_level(logging.WARNING):
        async with open_memory(
            tmp_path / "a", store=pg_dsn, session_id=sid, config=config, summarizer=hung
        ) as memory:
            for n in range(12):
                await memory.append(
                    SessionEvent(type="user_input", role="user", content=f"decided kafka {n}")
                )
            memory.request_maintenance()
            with anyio.fail_after(30):
                await hung.wait_started()  # the pass's merge is in flight, on the hung summarizer
    assert hung.calls_finished == 0
    assert (
        "closing: a running-summary merge is still waiting for the summarizer after 0.2s (close_timeout_s); "
        "writing the session summary beside it, the merge is cancelled"
    ) in {r.getMessage() for r in caplog.records}
    async with open_memory(tmp_path / "b", store=pg_dsn, session_id=sid) as second:
        await second.rotate()  # the summary is the session's own until a new session starts
        assert "decided kafka 11" in second.long_term_layer

"""The whole runtime on the PostgreSQL store: two workers (two roots) on one session id.

The first worker appends and compacts with the default extractive summarizer;
the second, opened on the same session id with its own root (its own recall
cache), sees the hot window and the chunk and finds it by recall through the
change feed. No session file is written under either root.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiden import Layout, SessionEvent, open_memory
from aiden.storage.postgres import postgres_store_factory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both event loops: the store is synchronous, called from worker threads under either."""
    return str(request.param)


def _said(i: int) -> SessionEvent:
    topic = "the deploy key lives in vault path secret/ci/deploy" if i == 3 else f"routine step {i} done"
    return SessionEvent(type="user_input", role="user", content=f"{topic}. " + "filler words " * 30)


async def test_append_compact_recall_across_two_workers(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    factory = postgres_store_factory(pg_dsn, session_ids())
    first, second = tmp_path / "worker-1", tmp_path / "worker-2"
    async with open_memory(first, store_factory=factory, context_window=4096) as memory:
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

    async with open_memory(second, store_factory=factory, context_window=4096) as other:
        assert await other.hot_window() == hot
        assert (await other.chunk_index()) == index
        hits = await other.recall_session_chunks("deploy key vault")
        assert hits and hits[0].chunk_id == outcome.chunk_id
        verbatim = await other.rehydrate(outcome.chunk_id, [4])
        assert [(e.seq, e.content) for e in verbatim] == [(4, appended[3].content)]
        assert (await other.append(_said(41))).seq == 41

    for root in (first, second):
        assert not Layout(root).events.exists()
        assert not Layout(root).index.exists()

"""RecallIndex and RecallActor following a store's change feed: MemorySessionStore, no session files."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from aiden.actors.mailbox import Latest
from aiden.actors.recall import RecallActor, RecallSession
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.messages import CloseIndex, Codec, RecallHits, RecallInbox, RecallOutbox, RecallQuery, RecallSynced
from aiden.recall.index import RecallIndex
from aiden.recall.tool import RecallStats
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.session import FileSessionStore
from aiden.testing import MemorySessionStore
from aiden.testing.storekit import compact, prepared


def said(store: MemorySessionStore, *texts: str) -> list[int]:
    """Append user inputs; their seqs."""
    return store.append([[prepared(SessionEvent(type="user_input", content=t)) for t in texts]])[0]


@pytest.fixture
def store() -> MemorySessionStore:
    return MemorySessionStore()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "recall.sqlite3"


def test_memory_store_feed_finds_a_compacted_event(store: MemorySessionStore, db_path: Path) -> None:
    said(store, "we picked the flamingo protocol", "then lunch", "still hot: flamingo later")
    entry = compact(store, 2, summary="protocol choice")[0]
    index = RecallIndex(store, Config(), db_path=db_path)
    try:
        hits = index.search("flamingo")
        # Only the compacted event: the hot window is not recall's business.
        assert [(h.chunk_id, h.source, h.kind, h.seq, h.text) for h in hits] == [
            (entry.chunk_id, "active", "event", 1, "we picked the flamingo protocol")
        ]
        assert [e.content for e in index.rehydrate(entry.chunk_id)] == [
            "we picked the flamingo protocol",
            "then lunch",
        ]
        lookup = index.lookup(entry.chunk_id)
        assert lookup is not None and lookup.text == "protocol choice"
        # A later commit is picked up incrementally, no rebuild.
        said(store, "a pelican arrived")
        later = compact(store, 4)[0]
        assert [h.chunk_id for h in index.search("pelican")] == [later.chunk_id]
        assert sorted(h.chunk_id for h in index.search("flamingo")) == [entry.chunk_id, later.chunk_id]
        assert index.stats().rebuilds == 1
        assert index.problems == []
    finally:
        index.close()


def test_replaced_summary_and_rotation(store: MemorySessionStore, db_path: Path) -> None:
    said(store, "the heron event", "more")
    entry = compact(store, 2, summary="pending summary", degraded=True)[0]
    index = RecallIndex(store, Config(), db_path=db_path)
    try:
        assert [h.degraded for h in index.search("heron")] == [True]
        assert store.replace_summary(entry.chunk_id, "a grey heron was seen")
        lookup = index.lookup(entry.chunk_id)
        assert lookup is not None and (lookup.text, lookup.degraded) == ("a grey heron was seen", False)
        assert index.stats().rebuilds == 1
        store.rotate("closed-1")
        assert index.search("heron") == []
        assert index.last_rebuild_reason == "reset"
        said(store, "a new session about herons")
        new = compact(store, 1)[0]
        assert [h.chunk_id for h in index.search("heron")] == [new.chunk_id]
    finally:
        index.close()


def test_a_reopened_index_continues_from_its_stored_token(store: MemorySessionStore, db_path: Path) -> None:
    said(store, "otter one", "otter two", "otter three")
    compact(store, 1)
    first = RecallIndex(store, Config(), db_path=db_path)
    assert len(first.search("otter")) == 1
    first.close()
    compact(store, 3)
    again = RecallIndex(store, Config(), db_path=db_path)
    try:
        assert sorted(h.seq or 0 for h in again.search("otter")) == [1, 2, 3]
        assert again.stats().rebuilds == 0
    finally:
        again.close()


def test_the_database_directory_is_created(store: MemorySessionStore, tmp_path: Path) -> None:
    said(store, "a lonely ibis", "filler")
    compact(store, 2)
    index = RecallIndex(store, Config(), db_path=tmp_path / "not" / "yet" / "recall.sqlite3")
    try:
        assert [h.seq for h in index.search("ibis")] == [1]
        assert (tmp_path / "not" / "yet" / "recall.sqlite3").exists()
    finally:
        index.close()


@pytest.mark.anyio
async def test_recall_actor_follows_the_given_feed(store: MemorySessionStore, tmp_path: Path) -> None:
    said(store, "the actor finds the narwhal", "filler")
    entry = compact(store, 2)[0]
    layout = Layout(tmp_path)  # only for the database's path: session/ is created for it
    actor = RecallActor()
    replies_send, replies_recv = anyio.create_memory_object_stream[RecallOutbox](1)
    stats: Latest[RecallStats | None] = Latest(None)
    actor.attach(3, RecallSession(layout, Storage(), Config(), None, store, stats, replies_send.send_nowait))
    inbox: Codec[RecallInbox] = Codec(RecallInbox)
    async with anyio.create_task_group() as tg:
        tg.start_soon(actor.run)
        with actor.sender() as send, replies_send, replies_recv:
            await send.send(inbox.encode(RecallQuery(session=3, request_id=7, query="narwhal")))
            reply = await replies_recv.receive()
            await send.send(inbox.encode(CloseIndex(3, 8)))
            closed = await replies_recv.receive()
        tg.cancel_scope.cancel()  # the host stops
    assert isinstance(reply, RecallHits) and reply.session == 3
    assert [(h.chunk_id, h.seq) for h in reply.hits] == [(entry.chunk_id, 1)]
    assert closed == RecallSynced(3, 8)
    assert stats.value is not None and stats.value.recall_calls == 1
    assert layout.recall_db.exists()


def test_file_store_feed_through_a_rotation(tmp_path: Path) -> None:
    """The runtime's shape once it passes ``feed=store``: the database in session/, the store's feed."""
    store = FileSessionStore(Layout(tmp_path), Storage(), Config())
    store.recover()
    try:
        store.append([[prepared(SessionEvent(type="user_input", content=t)) for t in ("a quokka", "more")]])
        first = compact(store, 2)[0]
        index = RecallIndex(store, Config(), db_path=store.layout.recall_db)
        try:
            assert [h.chunk_id for h in index.search("quokka")] == [first.chunk_id]
            assert [e.seq for e in index.rehydrate(first.chunk_id, [2])] == [2]
            store.rotate("closed-1")
            assert index.search("quokka") == []
            store.append([[prepared(SessionEvent(type="user_input", content="a new quokka"))]])
            again = compact(store, 1)[0]
            assert [h.chunk_id for h in index.search("quokka")] == [again.chunk_id]
            assert store.layout.recall_db.exists()
        finally:
            index.close()
    finally:
        store.close()

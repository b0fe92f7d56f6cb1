"""The whole runtime on :class:`~aiden.testing.MemorySessionStore`: no session file is ever written.

Every actor reaches session data through the store protocol only, so a store
that keeps everything in memory runs the full loop: append, compaction, recall
through the change feed, rehydrate, prompt building and rotation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiden import Config, Layout, SessionEvent, SessionStore, Storage, open_memory
from aiden.testing import MemorySessionStore
from aiden.testing.conformance_retry import check_retries_return_the_stored_events

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def _said(i: int) -> SessionEvent:
    topic = "the deploy key lives in vault path secret/ci/deploy" if i == 3 else f"routine step {i} done"
    return SessionEvent(type="user_input", role="user", content=f"{topic}. " + "filler words " * 30)


async def test_append_compact_recall_rehydrate_build_and_rotate(tmp_path: Path) -> None:
    stores: list[MemorySessionStore] = []

    def factory(layout: Layout, storage: Storage, config: Config) -> SessionStore:
        stores.append(MemorySessionStore(config))
        return stores[-1]

    root = tmp_path / "agent"
    async with open_memory(root, store_factory=factory, context_window=4096) as memory:
        appended = await memory.append_many(_said(i) for i in range(40))
        assert [e.seq for e in appended] == list(range(1, 41))
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted, outcome
        assert outcome.chunk_id is not None
        index = await memory.chunk_index()
        assert [c.chunk_id for c in index.chunks] == [outcome.chunk_id]
        hot = await memory.hot_window()
        # The root input (the session's first user input) stays hot through every compaction.
        assert [e.seq for e in hot] == [1, *range(index.last_seq + 1, 41)]

        hits = await memory.recall_session_chunks("deploy key vault")
        assert hits and hits[0].first_seq == 4 and hits[0].chunk_id == outcome.chunk_id
        verbatim = await memory.rehydrate(outcome.chunk_id, [4])
        assert [(e.seq, e.content) for e in verbatim] == [(4, appended[3].content)]
        assert (await memory.read_event(4)) == appended[3]

        built = await memory.build_messages()
        assert built.messages[-1]["content"] == appended[-1].content

        closed = await memory.rotate("first-session")
        assert closed == "first-session"
        assert await memory.hot_window() == []
        assert (await memory.append(_said(99))).seq == 1

    (store,) = stores
    assert list(store.archived) == ["first-session"]
    assert [e.seq for e in store.archived["first-session"].events] == [1, *range(index.last_seq + 1, 41)]
    # Session data never touched the file system: only long-term memory and the recall cache did.
    assert not Layout(root).events.exists()
    assert not Layout(root).index.exists()


async def test_retries_return_the_stored_events(tmp_path: Path) -> None:
    store = MemorySessionStore(Config())

    def factory(layout: Layout, storage: Storage, config: Config) -> SessionStore:
        return store  # the same store on every open: the session persists across the reopen

    await check_retries_return_the_stored_events(
        lambda: open_memory(tmp_path / "agent", store_factory=factory, context_window=4096),
        count=40,
        reopen=True,
    )


class _StoreBeforeAppendGroups:
    """A store written against the protocol before ``append_group`` existed: everything else forwarded."""

    def __init__(self) -> None:
        self._store = MemorySessionStore()

    def __getattr__(self, name: str) -> object:
        if name == "append_group":
            raise AttributeError(name)
        return getattr(self._store, name)


async def test_a_store_without_append_group_appends_alone(tmp_path: Path) -> None:
    async with open_memory(tmp_path, store=_StoreBeforeAppendGroups()) as memory:  # type: ignore[arg-type]
        stored = await memory.append_many(_said(i) for i in range(3))
        assert [e.seq for e in stored] == [1, 2, 3]
        assert [e.seq for e in await memory.hot_window()] == [1, 2, 3]

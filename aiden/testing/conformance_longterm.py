"""The conformance suite every long-term backend must pass (:mod:`aiden.longterm.backend`'s guarantees).

Each ``check_*`` in :data:`CHECKS` is a coroutine function taking a
:class:`~aiden.testing.ltkit.LongTermKit` and raising AssertionError on a
violation; run each under anyio (asyncio or trio), with real threads. The
entry and history checks are here, the summary and Dream checks in
:mod:`aiden.testing.conformance_longterm_dream`; :data:`CHECKS` lists all.
Workers are stood in for by a backend and its :meth:`~LongTermKit.twin`
(another process's view of the same storage), their concurrent calls by
worker threads. No pytest here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

import anyio

from aiden.config import Config
from aiden.errors import InvalidIdError, MemoryEntryError
from aiden.longterm.backend import EntryStore, HistoryLog
from aiden.longterm.dream import DreamOutcome
from aiden.longterm.history import DEFAULT_MAX_RECORD_CHARS
from aiden.longterm.store import render_profile
from aiden.testing.conformance_longterm_dream import (
    check_cap_keeps_the_newest_summaries_and_digests_the_rest,
    check_dream_records_versions_and_restores_them,
    check_dream_runs_once_across_workers,
    check_running_summary_merges_are_idempotent_and_shared,
    check_session_summary_is_one_per_session_and_feeds_the_layer,
    check_summaries_order_by_write_and_the_cap_merges_every_one,
    check_the_block_merges_the_digest_and_every_kept_summary,
)
from aiden.testing.ltkit import NOW, LongTermKit, raises

__all__ = [
    "CHECKS",
    "check_cap_keeps_the_newest_summaries_and_digests_the_rest",
    "check_concurrent_history_appends_are_unique_and_gap_free",
    "check_concurrent_saves_and_forgets_from_two_workers_keep_every_row",
    "check_dream_records_versions_and_restores_them",
    "check_dream_runs_once_across_workers",
    "check_expired_entries_are_never_returned",
    "check_fresh_backend_is_empty",
    "check_history_cursors_records_and_retries",
    "check_profile_rebuilds_only_on_change_and_feeds_the_layer",
    "check_running_summary_merges_are_idempotent_and_shared",
    "check_save_replace_forget",
    "check_search_ranks_by_matching_words",
    "check_session_summary_is_one_per_session_and_feeds_the_layer",
    "check_summaries_order_by_write_and_the_cap_merges_every_one",
    "check_the_block_merges_the_digest_and_every_kept_summary",
]


async def check_fresh_backend_is_empty(kit: LongTermKit) -> None:
    """Nothing is stored before the first write; Dream has nothing to do."""
    backend = kit.fresh()
    store, history = backend.entries, backend.history
    assert await store.entries(now=NOW) == []
    assert await store.get("m-1", now=NOW) is None
    assert await store.search("anything at all", now=NOW) == []
    assert (history.cursor(), history.dream_cursor(), history.read_after(0)) == (0, 0, [])
    assert (backend.has_profile(), backend.has_running_summary()) == (False, False)
    assert backend.load_layer(Config()) == ""
    assert await backend.dream().dream_log() == []
    assert await backend.dream().run(now=NOW) == DreamOutcome(ran=False, cursor=0)


async def check_save_replace_forget(kit: LongTermKit) -> None:
    """Saves, a replace (it moves last), forgets; bad input is refused and stores nothing."""
    store = kit.fresh().entries
    a = await store.save(
        type="fact", title="API port", content="The API listens on 8080.", now=NOW, memory_id="m-a"
    )
    b = await store.save(
        type="preference", title="Package manager", content="Always use yarn.", now=NOW + 1, memory_id="m-b"
    )
    assert await store.entries(now=NOW + 2) == [a, b]
    a2 = await store.save(
        type="fact", title="API  port\n", content=" The API listens on 9090. ", now=NOW + 3, memory_id="m-a"
    )
    assert (a2.title, a2.content, a2.created_at) == ("API port", "The API listens on 9090.", NOW + 3)
    assert await store.entries(now=NOW + 4) == [b, a2]
    assert await store.get("m-a", now=NOW + 4) == a2
    assert await store.entries(now=NOW + 4, types=["preference"]) == [b]
    made = await store.save(type="rule", title="Reviews", content="Every change gets a review.", now=NOW + 5)
    assert made.id.startswith(f"mem-{int(NOW + 5)}-")
    assert await store.forget("m-a") is True
    assert await store.forget("m-a") is False
    assert await store.get("m-a", now=NOW + 6) is None
    await raises(InvalidIdError, lambda: store.get("../etc", now=NOW))
    await raises(InvalidIdError, lambda: store.forget("a/b"))
    await raises(InvalidIdError, lambda: _save(store, memory_id="bad id"))
    await raises(MemoryEntryError, lambda: _save(store, type="opinion"))
    await raises(MemoryEntryError, lambda: _save(store, title=" "))
    await raises(MemoryEntryError, lambda: _save(store, expires_at=NOW - 1))
    assert await store.entries(now=NOW + 6) == [b, made]


def _save(store: EntryStore, **overrides: object) -> Awaitable[object]:
    fields: dict[str, object] = {"type": "fact", "title": "T", "content": "C", "now": NOW, **overrides}
    return store.save(**fields)  # type: ignore[arg-type]  # a deliberately loose call: bad values are the point


async def check_expired_entries_are_never_returned(kit: LongTermKit) -> None:
    """From the instant ``now`` reaches ``expires_at`` an entry is gone from get, entries and search."""
    store = kit.fresh().entries
    short = await store.save(
        type="fact",
        title="Deploy freeze",
        content="No deploys.",
        now=NOW,
        expires_at=NOW + 10,
        memory_id="m-s",
    )
    keep = await store.save(
        type="fact", title="Deploy window", content="Tuesdays.", now=NOW + 1, memory_id="m-k"
    )
    assert await store.entries(now=NOW + 9.5) == [short, keep]
    assert await store.search("deploy", now=NOW + 9.5) == [keep, short]
    assert await store.get("m-s", now=NOW + 10) is None
    assert await store.entries(now=NOW + 10) == [keep]
    assert await store.search("deploy freeze", now=NOW + 10) == [keep]
    assert await store.entries(now=NOW + 10, types=["fact"]) == [keep]
    assert await store.forget("m-s") is True  # an expired entry can still be removed


async def check_search_ranks_by_matching_words(kit: LongTermKit) -> None:
    """Most matching words first (a title word counts twice), then newest; ``k`` and ``types`` apply."""
    store = kit.fresh().entries
    cache = await store.save(
        type="fact", title="Redis cache", content="Redis holds the session cache.", now=NOW
    )
    orders = await store.save(
        type="fact", title="Database", content="Postgres stores orders; Redis is only a cache.", now=NOW + 1
    )
    style = await store.save(type="preference", title="Style", content="Short answers.", now=NOW + 2)
    assert await store.search("redis cache", now=NOW + 3) == [cache, orders]
    assert await store.search("postgres orders redis", now=NOW + 3) == [orders, cache]
    assert await store.search("redis", now=NOW + 3, k=1) == [cache]
    assert await store.search("kubernetes", now=NOW + 3) == []
    assert await store.search("redis", now=NOW + 3, types=["preference"]) == []
    assert await store.search("", now=NOW + 3) == [style, orders, cache]  # no words: the newest


async def check_profile_rebuilds_only_on_change_and_feeds_the_layer(kit: LongTermKit) -> None:
    """The profile renders the unexpired entries; a rebuild says whether it changed; every worker loads it."""
    backend = kit.fresh()
    store = backend.entries
    assert await store.rebuild_profile(now=NOW) is True
    assert backend.has_profile()
    entry = await store.save(type="preference", title="Package manager", content="Always use yarn.", now=NOW)
    assert await store.rebuild_profile(now=NOW + 1) is True
    assert await store.rebuild_profile(now=NOW + 2) is False
    layer = backend.load_layer(Config())
    assert layer == render_profile([entry], now=NOW + 1).strip()
    assert kit.twin(backend).load_layer(Config()) == layer


async def check_concurrent_saves_and_forgets_from_two_workers_keep_every_row(kit: LongTermKit) -> None:
    """Two workers saving and forgetting at once never drop each other's rows; both see the same set."""
    first = kit.fresh()
    second = kit.twin(first)

    async def work(store: EntryStore, tag: str) -> None:
        for i in range(8):
            await store.save(
                type="fact",
                title=f"{tag} {i}",
                content=f"Fact {i} of {tag}.",
                now=NOW + i,
                memory_id=f"{tag}-{i}",
            )
            if i % 2:
                assert await store.forget(f"{tag}-{i - 1}") is True

    async with anyio.create_task_group() as tg:
        tg.start_soon(work, first.entries, "a")
        tg.start_soon(work, second.entries, "b")
    want = {f"{tag}-{i}" for tag in "ab" for i in range(1, 8, 2)}
    for backend in (first, second):
        assert {e.id for e in await backend.entries.entries(now=NOW + 10)} == want


async def check_history_cursors_records_and_retries(kit: LongTermKit) -> None:
    """Cursors 1, 2, 3...; records cleaned and bounded; a chunk recorded once; the Dream cursor is shared."""
    backend = kit.fresh()
    history = backend.history
    first = history.append(
        "<think>private</think> Fixed the flaky test by pinning the seed.",
        session_key="w1",
        now=NOW,
        chunk_id="c-1",
    )
    assert (first.cursor, first.content, first.session_key, first.chunk_id, first.timestamp) == (
        1,
        "Fixed the flaky test by pinning the seed.",
        "w1",
        "c-1",
        "2026-01-01T00:00:00Z",
    )
    second = history.append("Second.", session_key="k" * 200, now=NOW + 1)
    assert (second.cursor, second.session_key) == (2, "k" * 128)
    assert history.append("a retry of the chunk", session_key="w2", now=NOW + 2, chunk_id="c-1") == first
    long = history.append("word " * 2000, session_key="w1", now=NOW + 3)
    assert long.cursor == 3 and len(long.content) == DEFAULT_MAX_RECORD_CHARS
    assert long.content.endswith(" [... truncated]")
    assert history.cursor() == 3
    assert history.read_after(0) == [first, second, long]
    assert history.read_after(1, limit=1) == [second]
    assert history.read_after(3) == []
    history.set_dream_cursor(2)
    other = kit.twin(backend).history
    assert (other.dream_cursor(), other.cursor(), other.read_after(0)) == (2, 3, [first, second, long])
    history.close()
    assert history.append("After close.", session_key="w1", now=NOW + 4).cursor == 4  # still usable


async def check_concurrent_history_appends_are_unique_and_gap_free(kit: LongTermKit) -> None:
    """Two workers appending at once: cursors 1..n, each once; a shared chunk id lands once; order kept."""
    first = kit.fresh()
    second = kit.twin(first)

    def work(history: HistoryLog, tag: str) -> None:
        for i in range(12):
            chunk = f"shared-{i}" if i % 3 == 0 else ""
            history.append(f"{tag} record {i}", session_key=tag, now=NOW + i, chunk_id=chunk)

    async with anyio.create_task_group() as tg:
        for history, tag in ((first.history, "a"), (second.history, "b")):
            tg.start_soon(_in_thread, work, history, tag)
    records = first.history.read_after(0)
    assert [r.cursor for r in records] == list(range(1, 21))  # 24 appends, 4 chunk ids recorded once
    assert first.history.cursor() == second.history.cursor() == 20
    chunks = Counter(r.chunk_id for r in records if r.chunk_id)
    assert chunks == Counter({f"shared-{i}": 1 for i in range(0, 12, 3)})
    for tag in "ab":
        own = [int(r.content.rsplit(" ", 1)[1]) for r in records if r.session_key == tag and not r.chunk_id]
        assert own == [i for i in range(12) if i % 3], own  # each worker's records in its order


async def _in_thread(work: Callable[[HistoryLog, str], None], history: HistoryLog, tag: str) -> None:
    await anyio.to_thread.run_sync(work, history, tag)


CHECKS: tuple[Callable[[LongTermKit], Awaitable[None]], ...] = (
    check_fresh_backend_is_empty,
    check_save_replace_forget,
    check_expired_entries_are_never_returned,
    check_search_ranks_by_matching_words,
    check_profile_rebuilds_only_on_change_and_feeds_the_layer,
    check_concurrent_saves_and_forgets_from_two_workers_keep_every_row,
    check_history_cursors_records_and_retries,
    check_concurrent_history_appends_are_unique_and_gap_free,
    check_running_summary_merges_are_idempotent_and_shared,
    check_session_summary_is_one_per_session_and_feeds_the_layer,
    check_cap_keeps_the_newest_summaries_and_digests_the_rest,
    check_summaries_order_by_write_and_the_cap_merges_every_one,
    check_the_block_merges_the_digest_and_every_kept_summary,
    check_dream_records_versions_and_restores_them,
    check_dream_runs_once_across_workers,
)
"""Every check, in the order a failure is easiest to read."""

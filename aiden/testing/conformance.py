"""The conformance suite every :class:`~aiden.storage.protocol.SessionStore` backend must pass.

DESIGN section 4's invariants as plain functions: each ``check_*`` in
:data:`CHECKS` takes a :data:`~aiden.testing.storekit.StoreFactory` (a fresh,
empty, recovered store per call) and raises AssertionError on a violation;
:func:`check_reopen_keeps_everything` also takes a ``reopen`` (None for a
backend that does not persist) and :func:`check_random_appends_and_commits`
is a hypothesis property. No pytest here: run them from any test runner.
Stores are assumed to be built with the default :class:`~aiden.config.Config`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgspec

from aiden.errors import CommitConflict, CorruptionError, InvalidIdError, StorageError
from aiden.events import SessionEvent
from aiden.storage.chunks import ChunkFile, ChunkIndex, chunk_id_for, encode_chunk
from aiden.storage.protocol import RecoveryReport, SessionStore, Snapshot
from aiden.testing.conformance_property import check_random_appends_and_commits
from aiden.testing.storekit import (
    Reopen,
    StoreFactory,
    commit_plan,
    compact,
    expect_raises,
    plan,
    prepared,
    seqs_of,
    stored,
    summary_for,
)

__all__ = [
    "CHECKS",
    "check_acknowledged_batch_is_readable",
    "check_commit_conflict_on_a_stale_snapshot_changes_nothing",
    "check_commit_trims_exactly_the_covered_events",
    "check_compaction_lock_can_be_retaken",
    "check_dedupe_across_batches",
    "check_dedupe_after_compaction",
    "check_dedupe_within_a_batch",
    "check_events_without_id_never_dedupe",
    "check_fresh_store_is_empty",
    "check_kept_event_compacted_later_stays_readable",
    "check_kept_seqs_stay_hot",
    "check_random_appends_and_commits",
    "check_read_chunk_returns_verbatim_events",
    "check_read_event_finds_compacted_events",
    "check_recover_is_an_idempotent_noop",
    "check_reopen_keeps_everything",
    "check_replace_summary_on_live_and_unknown_chunks",
    "check_rotate_empties_the_session_and_forgets_ids",
    "check_seqs_are_gap_free_across_batches_and_requests",
    "check_seqs_continue_after_the_whole_window_was_compacted",
]


@contextmanager
def _opened(make_store: StoreFactory) -> Iterator[SessionStore]:
    store = make_store()
    try:
        yield store
    finally:
        store.close()


def _fill(store: SessionStore, count: int) -> list[SessionEvent]:
    """Append ``e1..e<count>`` as one request; the stored events expected back."""
    assert store.append([[prepared(f"e{i}") for i in range(1, count + 1)]]) == [list(range(1, count + 1))]
    return [stored(f"e{i}", i) for i in range(1, count + 1)]


def _state(store: SessionStore, last_seq: int) -> tuple[list[SessionEvent], ChunkIndex, str, list[SessionEvent]]:
    return store.read_hot_window(), store.load_index(), store.read_summary(), store.read_events(range(1, last_seq + 1))


def check_fresh_store_is_empty(make_store: StoreFactory) -> None:
    """Nothing is stored before the first append."""
    with _opened(make_store) as s:
        assert s.read_hot_window() == []
        assert s.load_index() == ChunkIndex()
        assert s.read_summary() == ""
        assert s.read_event(1) is None
        assert s.read_events([1, 2]) == []
        assert s.snapshot() == Snapshot([], ChunkIndex(), 0)


def check_seqs_are_gap_free_across_batches_and_requests(make_store: StoreFactory) -> None:
    """Seqs are 1, 2, 3, ... across requests of one batch and across batches; empty ones take none."""
    with _opened(make_store) as s:
        assert s.append([[prepared("a"), prepared("b")], [prepared("c")]]) == [[1, 2], [3]]
        assert s.append([[prepared("d")]]) == [[4]]
        assert s.append([[], [prepared("e"), prepared("f"), prepared("g")]]) == [[], [5, 6, 7]]
        assert s.append([]) == []
        assert s.append([[]]) == [[]]
        assert s.append([[prepared("h")]]) == [[8]]
        assert s.read_hot_window() == [stored(c, i) for i, c in enumerate("abcdefgh", 1)]


def check_acknowledged_batch_is_readable(make_store: StoreFactory) -> None:
    """Once append returns, every event reads back exactly (hot window, by seq, by seqs, snapshot)."""
    with _opened(make_store) as s:
        assert s.append([[prepared("x", event_id="id-x"), prepared("y")], [prepared("z")]]) == [[1, 2], [3]]
        expected = [stored("x", 1, event_id="id-x"), stored("y", 2), stored("z", 3)]
        assert s.read_hot_window() == expected
        assert [s.read_event(q) for q in (1, 2, 3)] == expected
        assert (s.read_event(0), s.read_event(4)) == (None, None)
        assert s.read_events([3, 1, 1, 99]) == [expected[0], expected[2]]
        assert s.snapshot() == Snapshot(expected, ChunkIndex(), 0)


def check_dedupe_within_a_batch(make_store: StoreFactory) -> None:
    """A repeated event_id in one batch (same or another request) is stored once; all get its seq."""
    with _opened(make_store) as s:
        batch = [[prepared("a", event_id="k"), prepared("b", event_id="k")], [prepared("c", event_id="k"), prepared("d")]]
        assert s.append(batch) == [[1, 1], [1, 2]]
        assert s.read_hot_window() == [stored("a", 1, event_id="k"), stored("d", 2)]


def check_dedupe_across_batches(make_store: StoreFactory) -> None:
    """A stored event_id appended again returns the stored seq and stores nothing."""
    with _opened(make_store) as s:
        assert s.append([[prepared("a", event_id="k1"), prepared("b", event_id="k2")]]) == [[1, 2]]
        again = [[prepared("other", event_id="k2"), prepared("c", event_id="k3"), prepared("again", event_id="k1")]]
        assert s.append(again) == [[2, 3, 1]]
        assert s.read_hot_window() == [
            stored("a", 1, event_id="k1"), stored("b", 2, event_id="k2"), stored("c", 3, event_id="k3")
        ]


def check_events_without_id_never_dedupe(make_store: StoreFactory) -> None:
    """Equal events without event_id are distinct events."""
    with _opened(make_store) as s:
        assert s.append([[prepared("same"), prepared("same")]]) == [[1, 2]]
        assert s.append([[prepared("same")]]) == [[3]]
        assert s.read_hot_window() == [stored("same", 1), stored("same", 2), stored("same", 3)]


def check_dedupe_after_compaction(make_store: StoreFactory) -> None:
    """An event_id of a compacted event still dedupes to its stored seq."""
    with _opened(make_store) as s:
        ids = [prepared("a", event_id="k1"), prepared("b", event_id="k2"), prepared("c", event_id="k3")]
        assert s.append([ids]) == [[1, 2, 3]]
        compact(s, 2)
        more = [[prepared("x", event_id="k1"), prepared("y", event_id="k3"), prepared("d", event_id="k4")]]
        assert s.append(more) == [[1, 3, 4]]
        assert s.read_hot_window() == [stored("c", 3, event_id="k3"), stored("d", 4, event_id="k4")]
        assert s.read_event(1) == stored("a", 1, event_id="k1")


def check_commit_trims_exactly_the_covered_events(make_store: StoreFactory) -> None:
    """A commit stores the chunk, trims what it covers and keeps what was appended after the snapshot."""
    with _opened(make_store) as s:
        first = _fill(s, 5)
        s.lock_compaction()
        try:
            snap = s.snapshot()
            assert snap == Snapshot(first, ChunkIndex(), 0)
            p = plan(snap, 3)
            assert s.append([[prepared("e6")], [prepared("e7")]]) == [[6], [7]]  # during the pass
            full, kept = commit_plan(s, p)
        finally:
            s.unlock_compaction()
        everything = [*first, stored("e6", 6), stored("e7", 7)]
        assert full == encode_chunk(p.entry, p.events)[1]
        assert (full.first_seq, full.last_seq, full.count) == (1, 3, 3)
        assert kept == 4
        assert s.read_hot_window() == everything[3:]
        index = s.load_index()
        assert index == msgspec.structs.replace(p.next_index, chunks=[full])
        assert index.last_seq == 3
        assert s.read_summary() == summary_for(index)
        assert s.snapshot() == Snapshot(everything[3:], index, 0)
        assert s.read_events(range(1, 8)) == everything


def check_kept_seqs_stay_hot(make_store: StoreFactory) -> None:
    """Kept seqs inside a chunk's range stay in the hot window, also across later commits."""
    with _opened(make_store) as s:
        ev = _fill(s, 6)
        full, kept = compact(s, 4, kept={2, 3})
        assert (full.kept_seqs, full.count, kept) == ([2, 3], 2, 4)
        assert s.read_hot_window() == [ev[1], ev[2], ev[4], ev[5]]
        assert s.read_chunk(full.chunk_id).events == [ev[0], ev[3]]
        second, kept = compact(s, 6, kept={2, 3})
        assert (second.first_seq, second.kept_seqs, kept) == (5, [], 2)
        assert s.read_hot_window() == [ev[1], ev[2]]
        assert [s.read_event(q) for q in range(1, 7)] == ev
        assert s.read_events(range(1, 7)) == ev


def check_kept_event_compacted_later_stays_readable(make_store: StoreFactory) -> None:
    """An event one chunk kept hot and a later chunk compacts (an old pin let go): every seq stays readable.

    The later chunk's range then overlaps the earlier one's.
    """
    with _opened(make_store) as s:
        ev = _fill(s, 6)
        compact(s, 4, kept={2})
        later, kept = compact(s, 5)
        assert (later.first_seq, later.last_seq, later.count, kept) == (2, 5, 2, 1)
        assert s.read_hot_window() == [ev[5]]
        assert s.read_chunk(later.chunk_id).events == [ev[1], ev[4]]
        assert s.read_events(range(1, 7)) == ev
        assert [s.read_event(q) for q in range(1, 7)] == ev


def check_commit_conflict_on_a_stale_snapshot_changes_nothing(make_store: StoreFactory) -> None:
    """A commit planned from a snapshot older than the index raises CommitConflict and stores nothing."""
    with _opened(make_store) as s:
        ev = _fill(s, 4)
        s.lock_compaction()
        try:
            stale = s.snapshot()
            commit_plan(s, plan(stale, 2))
            before = _state(s, 4)
            expect_raises(CommitConflict, lambda: commit_plan(s, plan(stale, 3)))
            assert _state(s, 4) == before
        finally:
            s.unlock_compaction()
        assert before[3] == ev
        expect_raises(CorruptionError, lambda: s.read_chunk(chunk_id_for(1, 3)))


def check_read_event_finds_compacted_events(make_store: StoreFactory) -> None:
    """read_event and read_events find events in any chunk and in the hot window."""
    with _opened(make_store) as s:
        ev = _fill(s, 9)
        compact(s, 3)
        compact(s, 6)
        assert s.append([[prepared("e10")]]) == [[10]]
        ev.append(stored("e10", 10))
        compact(s, 8)
        assert seqs_of(s.read_hot_window()) == [9, 10]
        assert [s.read_event(q) for q in range(1, 11)] == ev
        assert s.read_events(list(reversed(range(0, 12)))) == ev
        assert s.read_events([]) == []


def check_read_chunk_returns_verbatim_events(make_store: StoreFactory) -> None:
    """read_chunk returns the committed entry and the events exactly as stored; unknown ids are CorruptionError."""
    rich = SessionEvent(
        type="tool_result", content="out", role="tool", tool_name="grep", tool_call_id="c1", timestamp=1.5,
        meta={"exit": 0, "nested": {"k": [1, "two", None]}}, event_id="r1",
    )
    with _opened(make_store) as s:
        assert s.append([[prepared("q"), prepared(rich)], [prepared("last")]]) == [[1, 2], [3]]
        full, _ = compact(s, 2)
        assert s.read_chunk(full.chunk_id) == ChunkFile(full, [stored("q", 1), stored(rich, 2)])
        assert s.load_index().chunks == [full]
        expect_raises(CorruptionError, lambda: s.read_chunk("chunk_unknown"))


def check_replace_summary_on_live_and_unknown_chunks(make_store: StoreFactory) -> None:
    """replace_summary rewrites a live chunk's summary (entry, chunk, summary.md); an unknown id changes nothing."""
    with _opened(make_store) as s:
        ev = _fill(s, 3)
        full, _ = compact(s, 2, summary="raw breadcrumb", degraded=True)
        before = _state(s, 3)
        s.lock_compaction()
        try:
            assert s.replace_summary("chunk_unknown", "nothing") is False
            assert _state(s, 3) == before
            assert s.replace_summary(full.chunk_id, "the real summary") is True
        finally:
            s.unlock_compaction()
        expected = msgspec.structs.replace(full, summary="the real summary", degraded=False)
        index = s.load_index()
        assert index.chunks == [expected]
        assert s.read_chunk(full.chunk_id) == ChunkFile(expected, ev[:2])
        assert s.read_summary() == summary_for(index)
        assert s.read_hot_window() == ev[2:]


def check_rotate_empties_the_session_and_forgets_ids(make_store: StoreFactory) -> None:
    """rotate starts an empty session: no events, chunks or summary; seqs from 1; old event ids unknown."""
    with _opened(make_store) as s:
        assert s.append([[prepared("a", event_id="k1"), prepared("b")]]) == [[1, 2]]
        compact(s, 1)
        assert s.append([[prepared("c", event_id="k2")]]) == [[3]]
        assert s.rotate("closed-1") == "closed-1"
        assert s.read_hot_window() == []
        assert (s.load_index(), s.read_summary()) == (ChunkIndex(), "")
        assert s.read_events([1, 2, 3]) == []
        assert s.snapshot() == Snapshot([], ChunkIndex(), 0)
        assert s.append([[prepared("new", event_id="k1"), prepared("n2", event_id="k2")]]) == [[1, 2]]
        fresh = [stored("new", 1, event_id="k1"), stored("n2", 2, event_id="k2")]
        assert s.read_hot_window() == fresh
        expect_raises(StorageError, lambda: s.rotate("closed-1"))
        expect_raises(InvalidIdError, lambda: s.rotate("../escape"))
        assert s.read_hot_window() == fresh


def check_recover_is_an_idempotent_noop(make_store: StoreFactory) -> None:
    """recover() on a healthy store reports and changes nothing, however often it runs."""
    with _opened(make_store) as s:
        assert s.recover() == RecoveryReport()
        assert s.recover().changed is False
        _fill(s, 4)
        compact(s, 2)
        assert s.append([[prepared("e5")]]) == [[5]]
        before = _state(s, 5)
        assert s.recover() == RecoveryReport()
        assert s.recover() == RecoveryReport()
        assert _state(s, 5) == before
        assert s.append([[prepared("e6")]]) == [[6]]


def check_seqs_continue_after_the_whole_window_was_compacted(make_store: StoreFactory) -> None:
    """A commit that empties the hot window never lets a seq be handed out again."""
    with _opened(make_store) as s:
        ev = _fill(s, 3)
        assert compact(s, 3)[1] == 0
        assert s.read_hot_window() == []
        assert s.append([[prepared("e4")]]) == [[4]]
        assert compact(s, 4)[1] == 0
        assert s.append([[prepared("e5")]]) == [[5]]
        assert s.read_events(range(1, 6)) == [*ev, stored("e4", 4), stored("e5", 5)]


def check_compaction_lock_can_be_retaken(make_store: StoreFactory) -> None:
    """The compaction lock is released by unlock and can be taken again; appends go on while it is held."""
    with _opened(make_store) as s:
        s.lock_compaction()
        assert s.append([[prepared("a")]]) == [[1]]
        assert s.read_hot_window() == [stored("a", 1)]
        s.unlock_compaction()
        s.lock_compaction()
        s.unlock_compaction()
        assert compact(s, 1)[1] == 0


def check_reopen_keeps_everything(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A closed and reopened store has every event, chunk, summary, id and seq; nothing when ``reopen`` is None."""
    if reopen is None:
        return
    s = make_store()
    try:
        assert s.append([[prepared("a", event_id="k1"), prepared("b"), prepared("c", event_id="k2")]]) == [[1, 2, 3]]
        compact(s, 2, summary="first", degraded=True)
        assert s.append([[prepared("d", event_id="k3")]]) == [[4]]
        before = _state(s, 4)
    finally:
        s.close()
    s = reopen(s)
    try:
        assert _state(s, 4) == before
        more = [[prepared("x", event_id="k1"), prepared("y", event_id="k3"), prepared("e")]]
        assert s.append(more) == [[1, 4, 5]]
        assert compact(s, 5)[1] == 0
    finally:
        s.close()
    s = reopen(s)
    try:
        assert s.read_hot_window() == []
        assert s.append([[prepared("f"), prepared("again", event_id="k2")]]) == [[6, 3]]
        assert s.read_events(range(1, 7))[-1] == stored("f", 6)
    finally:
        s.close()


CHECKS: tuple[Callable[[StoreFactory], None], ...] = (
    check_fresh_store_is_empty,
    check_seqs_are_gap_free_across_batches_and_requests,
    check_acknowledged_batch_is_readable,
    check_dedupe_within_a_batch,
    check_dedupe_across_batches,
    check_events_without_id_never_dedupe,
    check_dedupe_after_compaction,
    check_commit_trims_exactly_the_covered_events,
    check_kept_seqs_stay_hot,
    check_kept_event_compacted_later_stays_readable,
    check_commit_conflict_on_a_stale_snapshot_changes_nothing,
    check_read_event_finds_compacted_events,
    check_read_chunk_returns_verbatim_events,
    check_replace_summary_on_live_and_unknown_chunks,
    check_rotate_empties_the_session_and_forgets_ids,
    check_recover_is_an_idempotent_noop,
    check_seqs_continue_after_the_whole_window_was_compacted,
    check_compaction_lock_can_be_retaken,
)
"""Every check taking only a store factory (the property and the reopen check take more)."""

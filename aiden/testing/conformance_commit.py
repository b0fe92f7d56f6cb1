"""The conformance checks of compaction commits: what a commit stores, trims, keeps, refuses and rewrites.

Part of the suite in :mod:`aiden.testing.conformance` (which lists them in
``CHECKS``); each takes a fresh-store factory and raises AssertionError.
"""

from __future__ import annotations

import msgspec

from aiden.errors import CommitConflict, CorruptionError
from aiden.events import SessionEvent
from aiden.storage.chunks import ChunkFile, ChunkIndex, chunk_id_for, encode_chunk
from aiden.storage.protocol import Snapshot
from aiden.testing.storekit import (
    StoreFactory,
    commit_plan,
    compact,
    expect_raises,
    fill,
    opened,
    plan,
    prepared,
    seqs_of,
    state_of,
    stored,
    summary_for,
)

__all__ = [
    "check_commit_conflict_on_a_stale_snapshot_changes_nothing",
    "check_commit_trims_exactly_the_covered_events",
    "check_kept_event_compacted_later_stays_readable",
    "check_pin_let_go_stays_readable_once_sealed",
    "check_kept_seqs_stay_hot",
    "check_read_chunk_returns_verbatim_events",
    "check_read_event_finds_compacted_events",
    "check_replace_summary_on_live_and_unknown_chunks",
    "check_seqs_continue_after_the_whole_window_was_compacted",
]


def check_commit_trims_exactly_the_covered_events(make_store: StoreFactory) -> None:
    """A commit stores the chunk, trims what it covers and keeps what was appended after the snapshot."""
    with opened(make_store) as s:
        first = fill(s, 5)
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
    with opened(make_store) as s:
        ev = fill(s, 6)
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
    with opened(make_store) as s:
        ev = fill(s, 6)
        compact(s, 4, kept={2})
        later, kept = compact(s, 5)
        assert (later.first_seq, later.last_seq, later.count, kept) == (2, 5, 2, 1)
        assert s.read_hot_window() == [ev[5]]
        assert s.read_chunk(later.chunk_id).events == [ev[1], ev[4]]
        assert s.read_events(range(1, 7)) == ev
        assert [s.read_event(q) for q in range(1, 7)] == ev


def check_pin_let_go_stays_readable_once_sealed(make_store: StoreFactory) -> None:
    """A pin kept across many chunks, then compacted by a chunk that is later sealed: every seq stays readable.

    The letting-go chunk (seq 1-21) starts below its segment's first seq and
    overlaps every sealed chunk before it.
    """
    with opened(make_store) as s:
        ev = fill(s, 52)
        for last in range(2, 21):
            compact(s, last, kept={1})
        let_go, _ = compact(s, 21)
        for last in range(22, 51):
            compact(s, last)
        index = s.load_index()
        assert (let_go.first_seq, let_go.last_seq, let_go.count) == (1, 21, 2)
        assert [(g.first_seq, g.last_seq, g.chunks) for g in index.segments] == [(2, 33, 32)]
        assert let_go.chunk_id not in [e.chunk_id for e in index.chunks]
        assert s.read_hot_window() == ev[50:]
        assert s.read_events(range(1, 53)) == ev
        assert [s.read_event(q) for q in range(1, 53)] == ev
        assert s.read_event(53) is None


def check_commit_conflict_on_a_stale_snapshot_changes_nothing(make_store: StoreFactory) -> None:
    """A commit planned from a snapshot older than the index raises CommitConflict and stores nothing."""
    with opened(make_store) as s:
        ev = fill(s, 4)
        s.lock_compaction()
        try:
            stale = s.snapshot()
            commit_plan(s, plan(stale, 2))
            before = state_of(s, 4)
            expect_raises(CommitConflict, lambda: commit_plan(s, plan(stale, 3)))
            assert state_of(s, 4) == before
        finally:
            s.unlock_compaction()
        assert before[3] == ev
        expect_raises(CorruptionError, lambda: s.read_chunk(chunk_id_for(1, 3)))


def check_read_event_finds_compacted_events(make_store: StoreFactory) -> None:
    """read_event and read_events find events in any chunk and in the hot window."""
    with opened(make_store) as s:
        ev = fill(s, 9)
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
    with opened(make_store) as s:
        assert s.append([[prepared("q"), prepared(rich)], [prepared("last")]]) == [[1, 2], [3]]
        full, _ = compact(s, 2)
        assert s.read_chunk(full.chunk_id) == ChunkFile(full, [stored("q", 1), stored(rich, 2)])
        assert s.load_index().chunks == [full]
        expect_raises(CorruptionError, lambda: s.read_chunk("chunk_unknown"))


def check_replace_summary_on_live_and_unknown_chunks(make_store: StoreFactory) -> None:
    """replace_summary rewrites a live chunk's summary (entry, chunk, summary.md); an unknown id changes nothing."""
    with opened(make_store) as s:
        ev = fill(s, 3)
        full, _ = compact(s, 2, summary="raw breadcrumb", degraded=True)
        before = state_of(s, 3)
        s.lock_compaction()
        try:
            assert s.replace_summary("chunk_unknown", "nothing") is False
            assert state_of(s, 3) == before
            assert s.replace_summary(full.chunk_id, "the real summary") is True
        finally:
            s.unlock_compaction()
        expected = msgspec.structs.replace(full, summary="the real summary", degraded=False)
        index = s.load_index()
        assert index.chunks == [expected]
        assert s.read_chunk(full.chunk_id) == ChunkFile(expected, ev[:2])
        assert s.read_summary() == summary_for(index)
        assert s.read_hot_window() == ev[2:]


def check_seqs_continue_after_the_whole_window_was_compacted(make_store: StoreFactory) -> None:
    """A commit that empties the hot window never lets a seq be handed out again."""
    with opened(make_store) as s:
        ev = fill(s, 3)
        assert compact(s, 3)[1] == 0
        assert s.read_hot_window() == []
        assert s.append([[prepared("e4")]]) == [[4]]
        assert compact(s, 4)[1] == 0
        assert s.append([[prepared("e5")]]) == [[5]]
        assert s.read_events(range(1, 6)) == [*ev, stored("e4", 4), stored("e5", 5)]

"""The conformance suite every :class:`~aiden.storage.protocol.SessionStore` backend must pass.

DESIGN section 4's invariants as plain functions: each ``check_*`` in
:data:`CHECKS` takes a :data:`~aiden.testing.storekit.StoreFactory` (a fresh,
empty, recovered store per call) and raises AssertionError on a violation;
:func:`check_reopen_keeps_everything` also takes a ``reopen`` (None for a
backend that does not persist) and :func:`check_random_appends_and_commits`
is a hypothesis property. The commit checks live in
:mod:`aiden.testing.conformance_commit`, all are listed here. No pytest here: run them from any test runner.
Stores are assumed to be built with the default :class:`~aiden.config.Config`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aiden.config import Config
from aiden.errors import InvalidIdError, LockError, StorageError
from aiden.storage.chunks import ChunkIndex
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import RecoveryReport, SessionStore, Snapshot
from aiden.storage.session import FileSessionStore
from aiden.testing.conformance_commit import (
    check_commit_conflict_on_a_stale_snapshot_changes_nothing,
    check_commit_trims_exactly_the_covered_events,
    check_kept_event_compacted_later_stays_readable,
    check_kept_seqs_stay_hot,
    check_pin_let_go_stays_readable_once_sealed,
    check_read_chunk_returns_verbatim_events,
    check_read_event_finds_compacted_events,
    check_replace_summary_on_live_and_unknown_chunks,
    check_seqs_continue_after_the_whole_window_was_compacted,
)
from aiden.testing.conformance_property import check_random_appends_and_commits
from aiden.testing.storekit import (
    Reopen,
    StoreFactory,
    compact,
    expect_raises,
    fill,
    opened,
    prepared,
    state_of,
    stored,
)

__all__ = [
    "CHECKS",
    "check_acknowledged_batch_is_readable",
    "check_commit_conflict_on_a_stale_snapshot_changes_nothing",
    "check_commit_trims_exactly_the_covered_events",
    "check_compaction_lock_can_be_retaken",
    "check_compaction_lock_is_not_reentrant",
    "check_dedupe_across_batches",
    "check_dedupe_after_compaction",
    "check_dedupe_within_a_batch",
    "check_events_without_id_never_dedupe",
    "check_fresh_store_is_empty",
    "check_release_keeps_the_session_as_it_was",
    "check_kept_event_compacted_later_stays_readable",
    "check_kept_seqs_stay_hot",
    "check_pin_let_go_stays_readable_once_sealed",
    "check_random_appends_and_commits",
    "check_read_chunk_returns_verbatim_events",
    "check_read_event_finds_compacted_events",
    "check_recover_is_an_idempotent_noop",
    "check_reopen_keeps_everything",
    "check_replace_summary_on_live_and_unknown_chunks",
    "check_retry_reads_back_the_stored_event",
    "check_rotate_empties_the_session_and_forgets_ids",
    "check_seqs_are_gap_free_across_batches_and_requests",
    "check_seqs_continue_after_the_whole_window_was_compacted",
    "check_survey_root_shows_the_helper_this_hot_window",
]


def check_fresh_store_is_empty(make_store: StoreFactory) -> None:
    """Nothing is stored before the first append."""
    with opened(make_store) as s:
        assert s.read_hot_window() == []
        assert s.load_index() == ChunkIndex()
        assert s.read_summary() == ""
        assert s.read_event(1) is None
        assert s.read_events([1, 2]) == []
        assert s.snapshot() == Snapshot([], ChunkIndex(), 0)


def check_seqs_are_gap_free_across_batches_and_requests(make_store: StoreFactory) -> None:
    """Seqs are 1, 2, 3, ... across requests of one batch and across batches; empty ones take none."""
    with opened(make_store) as s:
        assert s.append([[prepared("a"), prepared("b")], [prepared("c")]]) == [[1, 2], [3]]
        assert s.append([[prepared("d")]]) == [[4]]
        assert s.append([[], [prepared("e"), prepared("f"), prepared("g")]]) == [[], [5, 6, 7]]
        assert s.append([]) == []
        assert s.append([[]]) == [[]]
        assert s.append([[prepared("h")]]) == [[8]]
        assert s.read_hot_window() == [stored(c, i) for i, c in enumerate("abcdefgh", 1)]


def check_acknowledged_batch_is_readable(make_store: StoreFactory) -> None:
    """Once append returns, every event reads back exactly (hot window, by seq, by seqs, snapshot)."""
    with opened(make_store) as s:
        assert s.append([[prepared("x", event_id="id-x"), prepared("y")], [prepared("z")]]) == [[1, 2], [3]]
        expected = [stored("x", 1, event_id="id-x"), stored("y", 2), stored("z", 3)]
        assert s.read_hot_window() == expected
        assert [s.read_event(q) for q in (1, 2, 3)] == expected
        assert (s.read_event(0), s.read_event(4)) == (None, None)
        assert s.read_events([3, 1, 1, 99]) == [expected[0], expected[2]]
        assert s.snapshot() == Snapshot(expected, ChunkIndex(), 0)


def check_dedupe_within_a_batch(make_store: StoreFactory) -> None:
    """A repeated event_id in one batch (same or another request) is stored once; repeats report ``-seq``."""
    with opened(make_store) as s:
        batch = [[prepared("a", event_id="k"), prepared("b", event_id="k")], [prepared("c", event_id="k"), prepared("d")]]
        assert s.append(batch) == [[1, -1], [-1, 2]]
        assert s.read_hot_window() == [stored("a", 1, event_id="k"), stored("d", 2)]


def check_dedupe_across_batches(make_store: StoreFactory) -> None:
    """A stored event_id appended again reports its stored seq negated and stores nothing."""
    with opened(make_store) as s:
        assert s.append([[prepared("a", event_id="k1"), prepared("b", event_id="k2")]]) == [[1, 2]]
        again = [[prepared("other", event_id="k2"), prepared("c", event_id="k3"), prepared("again", event_id="k1")]]
        assert s.append(again) == [[-2, 3, -1]]
        assert s.read_hot_window() == [
            stored("a", 1, event_id="k1"), stored("b", 2, event_id="k2"), stored("c", 3, event_id="k3")
        ]


def check_events_without_id_never_dedupe(make_store: StoreFactory) -> None:
    """Equal events without event_id are distinct events."""
    with opened(make_store) as s:
        assert s.append([[prepared("same"), prepared("same")]]) == [[1, 2]]
        assert s.append([[prepared("same")]]) == [[3]]
        assert s.read_hot_window() == [stored("same", 1), stored("same", 2), stored("same", 3)]


def check_dedupe_after_compaction(make_store: StoreFactory) -> None:
    """An event_id of a compacted event still dedupes to its stored seq (reported negated)."""
    with opened(make_store) as s:
        ids = [prepared("a", event_id="k1"), prepared("b", event_id="k2"), prepared("c", event_id="k3")]
        assert s.append([ids]) == [[1, 2, 3]]
        compact(s, 2)
        more = [[prepared("x", event_id="k1"), prepared("y", event_id="k3"), prepared("d", event_id="k4")]]
        assert s.append(more) == [[-1, -3, 4]]
        assert s.read_hot_window() == [stored("c", 3, event_id="k3"), stored("d", 4, event_id="k4")]
        assert s.read_event(1) == stored("a", 1, event_id="k1")


def check_retry_reads_back_the_stored_event(make_store: StoreFactory) -> None:
    """A retry (a known event_id, other content) is reported as ``-seq``; that seq reads the stored event."""
    with opened(make_store) as s:
        first = [prepared(c, event_id=f"r{i}") for i, c in enumerate(["one", "two", "three"], 1)]
        assert s.append([first]) == [[1, 2, 3]]
        compact(s, 2)
        retry = [prepared("x", event_id="r1"), prepared("four", event_id="r4"), prepared("y", event_id="r3")]
        assert s.append([retry, [prepared("FOUR", event_id="r4")]]) == [[-1, 4, -3], [-4]]
        expected = [stored(c, q, event_id=f"r{q}") for c, q in [("one", 1), ("three", 3), ("four", 4)]]
        assert s.read_events([1, 3, 4]) == expected  # compacted, hot, and stored by the same batch
        assert s.read_hot_window() == expected[1:]


def check_rotate_empties_the_session_and_forgets_ids(make_store: StoreFactory) -> None:
    """rotate starts an empty session: no events, chunks or summary; seqs from 1; old event ids unknown."""
    with opened(make_store) as s:
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
    with opened(make_store) as s:
        assert s.recover().findings() == RecoveryReport()
        assert s.recover().changed is False
        fill(s, 4)
        compact(s, 2)
        assert s.append([[prepared("e5")]]) == [[5]]
        before = state_of(s, 5)
        assert s.recover().findings() == RecoveryReport()
        assert s.recover().findings() == RecoveryReport()
        assert state_of(s, 5) == before
        assert s.append([[prepared("e6")]]) == [[6]]


def check_compaction_lock_can_be_retaken(make_store: StoreFactory) -> None:
    """The compaction lock is released by unlock and can be taken again; appends go on while it is held."""
    with opened(make_store) as s:
        s.lock_compaction()
        assert s.append([[prepared("a")]]) == [[1]]
        assert s.read_hot_window() == [stored("a", 1)]
        s.unlock_compaction()
        s.lock_compaction()
        s.unlock_compaction()
        assert compact(s, 1)[1] == 0


def check_compaction_lock_is_not_reentrant(make_store: StoreFactory) -> None:
    """Taking the compaction lock a store already holds raises :class:`LockError`; the lock stays held."""
    with opened(make_store) as s:
        s.lock_compaction()
        expect_raises(LockError, s.lock_compaction)
        s.unlock_compaction()
        s.lock_compaction()  # the failed retake left it consistent: free, then taken again
        s.unlock_compaction()


def check_release_keeps_the_session_as_it_was(make_store: StoreFactory) -> None:
    """After :meth:`~aiden.storage.protocol.SessionStore.release` (an idle session's), every call
    works as before: seqs continue, known event ids dedupe (hot and compacted), reads are unchanged."""
    with opened(make_store) as s:
        assert s.append([[prepared("a", event_id="k1"), prepared("b", event_id="k2"), prepared("c")]]) == [[1, 2, 3]]
        compact(s, 1)
        before = state_of(s, 3)
        s.release()
        assert state_of(s, 3) == before
        s.release()
        assert s.append([[prepared("again", event_id="k1"), prepared("d", event_id="k4")]]) == [[-1, 4]]
        s.release()
        assert s.append([[prepared("b again", event_id="k2"), prepared("e")]]) == [[-2, 5]]
        assert [e.seq for e in s.read_hot_window()] == [2, 3, 4, 5]
        s.release()
        compact(s, 4)
        assert [e.seq for e in s.read_hot_window()] == [5]
        assert s.append([[prepared("f")]]) == [[6]]


def check_survey_root_shows_the_helper_this_hot_window(make_store: StoreFactory) -> None:
    """survey_root offers no root for an empty hot window nor below ``min_bytes``; a root it offers
    shows the helper process (a plain file store opened there) the hot window and index this store has."""
    with opened(make_store) as s:
        assert s.survey_root(1) is None
        fill(s, 6)
        compact(s, 3)
        assert s.survey_root(1 << 62) is None
        _assert_the_helper_sees_it(s, s.survey_root(0))
        compact(s, 6)  # the whole window: nothing hot is left to survey
        assert s.survey_root(1) is None


def _assert_the_helper_sees_it(s: SessionStore, root: str | None) -> None:
    if root is None:  # the backend surveys in this process only
        return
    assert Path(root).is_dir()
    there = FileSessionStore(Layout(Path(root)), Storage(), Config())
    s.lock_compaction()  # as the scheduler holds it while the helper surveys
    try:
        assert there.snapshot() == s.snapshot()
    finally:
        s.unlock_compaction()
        there.close()


def check_reopen_keeps_everything(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A closed and reopened store has every event, chunk, summary, id and seq; nothing when ``reopen`` is None."""
    if reopen is None:
        return
    s = make_store()
    try:
        assert s.append([[prepared("a", event_id="k1"), prepared("b"), prepared("c", event_id="k2")]]) == [[1, 2, 3]]
        compact(s, 2, summary="first", degraded=True)
        assert s.append([[prepared("d", event_id="k3")]]) == [[4]]
        before = state_of(s, 4)
    finally:
        s.close()
    s = reopen(s)
    try:
        assert state_of(s, 4) == before
        more = [[prepared("x", event_id="k1"), prepared("y", event_id="k3"), prepared("e")]]
        assert s.append(more) == [[-1, -4, 5]]
        assert s.read_events([1, 4]) == [stored("a", 1, event_id="k1"), stored("d", 4, event_id="k3")]
        assert compact(s, 5)[1] == 0
    finally:
        s.close()
    s = reopen(s)
    try:
        assert s.read_hot_window() == []
        assert s.append([[prepared("f"), prepared("again", event_id="k2")]]) == [[6, -3]]
        assert s.read_events(range(1, 7))[-1] == stored("f", 6)
        assert s.read_event(3) == stored("c", 3, event_id="k2")  # compacted and reopened: a retry reads it
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
    check_retry_reads_back_the_stored_event,
    check_commit_trims_exactly_the_covered_events,
    check_kept_seqs_stay_hot,
    check_kept_event_compacted_later_stays_readable,
    check_pin_let_go_stays_readable_once_sealed,
    check_commit_conflict_on_a_stale_snapshot_changes_nothing,
    check_read_event_finds_compacted_events,
    check_read_chunk_returns_verbatim_events,
    check_replace_summary_on_live_and_unknown_chunks,
    check_rotate_empties_the_session_and_forgets_ids,
    check_recover_is_an_idempotent_noop,
    check_seqs_continue_after_the_whole_window_was_compacted,
    check_compaction_lock_can_be_retaken,
    check_compaction_lock_is_not_reentrant,
    check_survey_root_shows_the_helper_this_hot_window,
    check_release_keeps_the_session_as_it_was,
)
"""Every check taking only a store factory (the property and the reopen check take more)."""


"""The change feed checks every :class:`~aiden.storage.protocol.SessionStore` must pass.

What :class:`~aiden.storage.protocol.ChangeFeed` promises, as plain
functions in the style of :mod:`aiden.testing.conformance`: each ``check_*``
in :data:`CHECKS` takes a :data:`~aiden.testing.storekit.StoreFactory` and
raises AssertionError on a violation; :func:`check_stale_token_after_reopen`
also takes a ``reopen`` (None for a backend that does not persist). No
pytest here: run them from any test runner.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from aiden.config import Config
from aiden.storage.chunks import SEGMENT_SIZE, ChunkEntry
from aiden.storage.protocol import ChangeToken, ChunkChanges, SessionStore
from aiden.testing.storekit import Reopen, StoreFactory, compact, fill, opened, prepared

__all__ = [
    "CHECKS",
    "check_each_commit_appears_once_in_order",
    "check_followers_agree_across_sealed_segments",
    "check_fresh_store_starts_with_an_empty_reset",
    "check_replaced_summary_is_reported",
    "check_rotation_resets_the_feed",
    "check_stale_token_after_reopen",
    "check_token_of_another_store_or_ahead_resets",
    "check_unchanged_store_returns_nothing",
]


def _ids(changes: ChunkChanges) -> list[str]:
    return [c.chunk_id for c in changes.chunks]


def _follow(store: SessionStore, token: ChangeToken | None) -> tuple[list[str], ChangeToken]:
    changes = store.chunks_since(token)
    assert not changes.reset or token is None, "an appending session must not reset a follower"
    assert changes.problems == []
    return _ids(changes), changes.token


def check_fresh_store_starts_with_an_empty_reset(make_store: StoreFactory) -> None:
    """From ``None`` the feed resets; an empty session has no chunks; its token answers nothing."""
    with opened(make_store) as s:
        first = s.chunks_since(None)
        assert first.reset
        assert (first.chunks, first.problems, first.updated) == ([], [], [])
        assert first.token == s.change_token()
        again = s.chunks_since(first.token)
        assert (again.reset, again.chunks, again.token) == (False, [], first.token)


def check_each_commit_appears_once_in_order(make_store: StoreFactory) -> None:
    """Successive calls deliver every committed chunk once, in commit order, verbatim."""
    with opened(make_store) as s:
        fill(s, 12)
        one = compact(s, 3)[0]
        start = s.chunks_since(None)
        assert start.reset
        assert start.chunks == [s.read_chunk(one.chunk_id)]
        assert start.chunks[0].entry == one
        committed = [compact(s, q)[0] for q in (5, 9)]
        changes = s.chunks_since(start.token)
        assert not changes.reset
        assert [c.entry for c in changes.chunks] == committed
        assert changes.chunks == [s.read_chunk(e.chunk_id) for e in committed]
        assert changes.token == s.change_token()
        last = compact(s, 12)[0]
        assert _follow(s, changes.token)[0] == [last.chunk_id]


def check_unchanged_store_returns_nothing(make_store: StoreFactory) -> None:
    """A current token yields no chunks and no reset, also after appends (they commit no chunk)."""
    with opened(make_store) as s:
        fill(s, 6)
        compact(s, 4)
        token = s.chunks_since(None).token
        assert token == s.change_token()
        for _ in range(2):
            changes = s.chunks_since(token)
            assert (changes.reset, changes.chunks, changes.problems, changes.token) == (False, [], [], token)
        assert s.append([[prepared("later")]]) == [[7]]
        after_append = s.chunks_since(token)
        assert (after_append.reset, after_append.chunks) == (False, [])


def check_followers_agree_across_sealed_segments(make_store: StoreFactory) -> None:
    """Past segment sealing, a follower asking after every commit and one asking rarely see the same."""
    count = Config().summary_max_chunks + 1 + SEGMENT_SIZE + 2
    with opened(make_store) as s:
        fill(s, count)
        eager: list[str] = []
        eager_token: ChangeToken | None = None
        lazy: list[str] = []
        lazy_token: ChangeToken | None = None
        committed: list[str] = []
        for q in range(1, count + 1):
            committed.append(compact(s, q)[0].chunk_id)
            got, eager_token = _follow(s, eager_token)
            eager.extend(got)
            if q % 7 == 0:
                got, lazy_token = _follow(s, lazy_token)
                lazy.extend(got)
        got, lazy_token = _follow(s, lazy_token)
        lazy.extend(got)
        assert s.load_index().segments, "the check must reach sealed segments"
        assert eager == committed
        assert lazy == committed
        assert eager_token == lazy_token == s.change_token()
        assert _ids(s.chunks_since(None)) == committed


def check_replaced_summary_is_reported(make_store: StoreFactory) -> None:
    """A degraded chunk's replaced summary shows up in ``updated``, not as a new chunk."""
    with opened(make_store) as s:
        fill(s, 4)
        entry = compact(s, 2, degraded=True)[0]
        token = s.chunks_since(None).token
        assert s.replace_summary(entry.chunk_id, "the real summary")
        changes = s.chunks_since(token)
        assert (changes.reset, changes.chunks) == (False, [])
        fixed: list[ChunkEntry] = [e for e in changes.updated if e.chunk_id == entry.chunk_id]
        assert fixed == [msgspec.structs.replace(entry, summary="the real summary", degraded=False)]
        assert s.chunks_since(None).chunks[0].entry == fixed[0]


def check_rotation_resets_the_feed(make_store: StoreFactory) -> None:
    """After rotation a token of the closed session is answered with a reset and the new chunks only."""
    with opened(make_store) as s:
        fill(s, 4)
        compact(s, 3)
        old = s.chunks_since(None).token
        s.rotate("closed-1")
        changes = s.chunks_since(old)
        assert changes.reset
        assert changes.chunks == []
        assert changes.token == s.change_token() != old
        fill(s, 2)
        new = compact(s, 1)[0]
        assert _follow(s, changes.token)[0] == [new.chunk_id]
        again = s.chunks_since(old)
        assert again.reset and _ids(again) == [new.chunk_id]


def check_token_of_another_store_or_ahead_resets(make_store: StoreFactory) -> None:
    """A token the store cannot continue (another store's, or past its end) is never a silent gap."""
    with opened(make_store) as a, opened(make_store) as b:
        for s in (a, b):
            fill(s, 4)
            compact(s, 2)
        foreign = a.chunks_since(None).token
        changes = b.chunks_since(foreign)
        assert changes.reset and _ids(changes) == [c.chunk_id for c in b.chunks_since(None).chunks]
        mine = b.change_token()
        ahead = msgspec.structs.replace(mine, chunks=mine.chunks + 5, last_seq=mine.last_seq + 9, stamp="")
        assert b.chunks_since(ahead).reset
        other_end = msgspec.structs.replace(mine, last_seq=mine.last_seq + 1, stamp="")
        assert b.chunks_since(other_end).reset


def check_stale_token_after_reopen(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A token from before a close and reopen yields a reset or exactly the chunks committed since."""
    if reopen is None:
        return
    s = make_store()
    fill(s, 6)
    compact(s, 2)
    stale = s.chunks_since(None).token
    later = compact(s, 5)[0]
    everything = [c.chunk_id for c in s.chunks_since(None).chunks]
    s.close()
    s = reopen(s)
    try:
        changes = s.chunks_since(stale)
        if changes.reset:
            assert _ids(changes) == everything
        else:
            assert _ids(changes) == [later.chunk_id]
        assert changes.token == s.change_token()
    finally:
        s.close()


CHECKS: list[Callable[[StoreFactory], None]] = [
    check_fresh_store_starts_with_an_empty_reset,
    check_each_commit_appears_once_in_order,
    check_unchanged_store_returns_nothing,
    check_followers_agree_across_sealed_segments,
    check_replaced_summary_is_reported,
    check_rotation_resets_the_feed,
    check_token_of_another_store_or_ahead_resets,
]
"""Every check that needs only a store factory (see :func:`check_stale_token_after_reopen` for the other)."""

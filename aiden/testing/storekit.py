"""Building blocks of the store conformance suite: events to append, the events expected back, one commit.

A commit here is made the way the compaction scheduler makes it: take the
compaction lock, snapshot, plan a chunk over a prefix of the hot window,
:func:`~aiden.storage.chunks.advance_index`, commit. The steps are
separate functions so a check can append between the snapshot and the
commit, or commit a stale snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import msgspec

from aiden.config import Config
from aiden.events import SessionEvent, encode_event
from aiden.storage.chunks import ChunkEntry, ChunkIndex, advance_index, chunk_id_for, render_summary_md
from aiden.storage.protocol import PreparedEvent, SessionStore, Snapshot
from aiden.summarizers.extractive.summarizer import rolling_fold

__all__ = [
    "Plan",
    "Reopen",
    "StoreFactory",
    "commit_plan",
    "compact",
    "event",
    "expect_raises",
    "fill",
    "opened",
    "plan",
    "prepared",
    "seqs_of",
    "state_of",
    "stored",
    "summary_for",
]

StoreFactory = Callable[[], SessionStore]
"""Returns a fresh, empty store, recovered as the runtime opens it (each call a new one)."""

Reopen = Callable[[SessionStore], SessionStore]
"""Given a closed store, returns a new store over the same data, recovered (persisting backends only)."""

E = TypeVar("E", bound=BaseException)

# The suite assumes stores built with the default Config (summary.md shows this many chunks).
_CONFIG = Config()


def event(content: str, *, event_id: str | None = None) -> SessionEvent:
    """A new (unappended, seq 0) user_input event."""
    return SessionEvent(type="user_input", content=content, event_id=event_id)


def prepared(content: str | SessionEvent, *, event_id: str | None = None) -> PreparedEvent:
    """An event (or ``event(content)``) ready to append: its line encoded with seq 0, as the runtime's intake does."""
    ev = content if isinstance(content, SessionEvent) else event(content, event_id=event_id)
    return PreparedEvent(encode_event(ev), ev.event_id)


def stored(content: str | SessionEvent, seq: int, *, event_id: str | None = None) -> SessionEvent:
    """The event a store must return for ``prepared(content, event_id=...)`` stored at ``seq``."""
    ev = content if isinstance(content, SessionEvent) else event(content, event_id=event_id)
    return msgspec.structs.replace(ev, seq=seq)


def summary_for(index: ChunkIndex) -> str:
    """The summary.md text a store must hold for ``index`` (default Config)."""
    return render_summary_md(index, index.chunks[-_CONFIG.summary_max_chunks :])


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """One planned commit: the arguments of :meth:`SessionStore.commit`."""

    expected_last_seq: int
    entry: ChunkEntry
    events: list[SessionEvent]
    next_index: ChunkIndex
    pushed_out: list[ChunkEntry]


def plan(
    snap: Snapshot,
    last_seq: int,
    *,
    kept: Collection[int] = (),
    summary: str | None = None,
    degraded: bool = False,
) -> Plan:
    """A chunk over the snapshot's events up to ``last_seq``, ``kept`` seqs staying hot.

    The chunk starts at the oldest such event, which may be one an earlier
    chunk kept hot (an old pin let go): ranges of chunks may then overlap.
    """
    events = [e for e in snap.events if e.seq <= last_seq and e.seq not in kept]
    if not events:
        raise ValueError(f"nothing to compact up to seq {last_seq}")
    first = events[0].seq
    # As the planner's ``kept_seqs``: only kept events inside the chunk's range are recorded.
    inside = sorted(q for q in kept if first <= q <= last_seq)
    entry = ChunkEntry(
        chunk_id=chunk_id_for(first, last_seq),
        first_seq=first,
        last_seq=last_seq,
        count=len(events),
        sha256="",
        summary=summary if summary is not None else f"summary of seq {first}-{last_seq}",
        kept_seqs=inside,
        degraded=degraded,
    )
    next_index, pushed, _ = advance_index(
        snap.index,
        entry,
        max_chunks=_CONFIG.summary_max_chunks,
        max_lines=_CONFIG.max_rolling_summary_lines,
        fold=rolling_fold,
    )
    return Plan(
        expected_last_seq=snap.index.last_seq, entry=entry, events=events, next_index=next_index, pushed_out=pushed
    )


def commit_plan(store: SessionStore, p: Plan) -> tuple[ChunkEntry, int]:
    """``store.commit`` of ``p`` (the caller holds the compaction lock)."""
    return store.commit(
        expected_last_seq=p.expected_last_seq,
        entry=p.entry,
        events=p.events,
        next_index=p.next_index,
        pushed_out=p.pushed_out,
    )


def compact(
    store: SessionStore, last_seq: int, *, kept: Collection[int] = (), summary: str | None = None, degraded: bool = False
) -> tuple[ChunkEntry, int]:
    """One whole pass under the compaction lock: snapshot, plan up to ``last_seq``, commit."""
    store.lock_compaction()
    try:
        p = plan(store.snapshot(), last_seq, kept=kept, summary=summary, degraded=degraded)
        return commit_plan(store, p)
    finally:
        store.unlock_compaction()


def expect_raises(kind: type[E], call: Callable[[], object]) -> E:
    """Run ``call``; return the ``kind`` it raised, AssertionError when it raised nothing (no pytest here)."""
    try:
        call()
    except kind as exc:
        return exc
    raise AssertionError(f"{kind.__name__} was not raised")


def seqs_of(events: Sequence[SessionEvent]) -> list[int]:
    """The seqs of ``events``, in order."""
    return [e.seq for e in events]


@contextmanager
def opened(make_store: StoreFactory) -> Iterator[SessionStore]:
    """A fresh store from ``make_store``, closed on exit."""
    store = make_store()
    try:
        yield store
    finally:
        store.close()


def fill(store: SessionStore, count: int) -> list[SessionEvent]:
    """Append ``e1..e<count>`` as one request; the stored events expected back."""
    assert store.append([[prepared(f"e{i}") for i in range(1, count + 1)]]) == [list(range(1, count + 1))]
    return [stored(f"e{i}", i) for i in range(1, count + 1)]


def state_of(store: SessionStore, last_seq: int) -> tuple[list[SessionEvent], ChunkIndex, str, list[SessionEvent]]:
    """What a check compares before and after: hot window, index, summary, every event up to ``last_seq``."""
    return store.read_hot_window(), store.load_index(), store.read_summary(), store.read_events(range(1, last_seq + 1))

"""The session store protocol: the one way any room touches session data.

Every method blocks (actors call them from a worker thread). Every backend
keeps these invariants, checked by :mod:`aiden.testing.conformance`:

- an acknowledged append survives any crash; seqs are gap-free and strictly
  increasing; an ``event_id`` already stored is never stored twice;
- a chunk commit is atomic: readers see the chunk and the trimmed hot window,
  or neither; appends made during a pass are never lost by its trim;
- recovery is idempotent and never silently drops an event.

Derived indexes (recall) follow the committed chunks through :class:`ChangeFeed`
and never read a backend's files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from aiden.events import SessionEvent
from aiden.storage.chunks import ChunkEntry, ChunkFile, ChunkIndex

__all__ = [
    "AppendGroup",
    "ChangeFeed",
    "ChangeToken",
    "ChunkChanges",
    "PendingChunks",
    "PreparedEvent",
    "RecoveryReport",
    "SessionStore",
    "Snapshot",
]


class PreparedEvent(msgspec.Struct, frozen=True, array_like=True):
    """An event ready to append: its JSON line encoded with seq 0 (validated), and its ``event_id``."""

    line: bytes
    event_id: str | None = None


class Snapshot(msgspec.Struct, frozen=True):
    """The hot window and the live index as one pass saw them."""

    events: list[SessionEvent]
    index: ChunkIndex
    bad_lines: int


class RecoveryReport(msgspec.Struct, frozen=True, kw_only=True):
    """What recovery on open found and did. ``unrecoverable`` is never silently empty.

    ``checked`` names what recovery verified, in order (backend-specific:
    compare :meth:`findings` across backends).
    """

    temp_files_removed: int = 0
    hot_events_dropped: int = 0
    duplicate_events_dropped: int = 0
    torn_tail_bytes: int = 0
    corrupt_lines_quarantined: int = 0
    orphan_chunks_removed: int = 0
    orphan_chunks_adopted: int = 0
    orphan_segments_removed: int = 0
    hot_events_lost: int = 0  # seqs known to exist (chunks, high-water mark) but stored nowhere
    index_rebuilt: bool = False
    summary_rewritten: bool = False
    unrecoverable: list[str] = msgspec.field(default_factory=list)
    checked: tuple[str, ...] = ()

    def findings(self) -> RecoveryReport:
        """This report without ``checked``: what recovery found and did (a healthy store's
        equals ``RecoveryReport()`` on every backend)."""
        return msgspec.structs.replace(self, checked=())

    @property
    def changed(self) -> bool:
        """True if recovery modified anything on disk."""
        # Everything but what it only reports (lost events, problems) or looked at.
        return msgspec.structs.replace(self, hot_events_lost=0, unrecoverable=[], checked=()) != RecoveryReport()


class ChangeToken(msgspec.Struct, frozen=True, kw_only=True):
    """A position in a session's change feed, opaque to consumers (who store it and hand it back).

    ``generation`` changes on rotation and whenever the backend cannot vouch
    for the session's history. ``chunks`` committed chunks, the last ending at
    ``last_seq``, were delivered up to here. ``stamp`` is the backend's cheap
    "nothing moved" check ("" when it cannot be trusted).
    """

    generation: str
    last_seq: int = 0
    chunks: int = 0
    stamp: str = ""


class PendingChunks(msgspec.Struct, frozen=True):
    """Chunks written but not committed yet (a compaction mid-commit), the complete current set.

    ``problems`` names the pending chunks that could not be read.
    """

    chunks: list[ChunkFile]
    problems: list[str]


class ChunkChanges(msgspec.Struct, frozen=True, kw_only=True):
    """What changed since a :class:`ChangeToken`.

    ``reset``: drop everything derived from this session and start over with
    ``chunks`` (then every committed chunk of the session). ``chunks``: the
    chunks committed after the token, in commit order. ``problems``:
    committed chunks in that range that could not be read (each named once,
    in place of its entry in ``chunks``). ``updated``: entries delivered
    earlier whose index entry may have been rewritten since (a degraded
    summary replaced); it may repeat unchanged entries, so consumers compare
    and apply idempotently. ``pending``: ``None`` when the set of uncommitted
    chunks cannot have changed since the token, else the complete set.
    ``token``: the position to ask from next time.
    """

    reset: bool
    chunks: list[ChunkFile]
    token: ChangeToken
    problems: list[str] = msgspec.field(default_factory=list)
    updated: list[ChunkEntry] = msgspec.field(default_factory=list)
    pending: PendingChunks | None = None


class ChangeFeed(Protocol):
    """The session's committed chunks as a feed that derived indexes (recall) follow.

    What every backend guarantees, checked by
    :mod:`aiden.testing.conformance_changes`:

    - following ``chunks_since`` from ``None``, passing back each returned
      ``token``, every committed chunk appears exactly once (in ``chunks``,
      or named in ``problems`` when unreadable), in commit order;
    - an unchanged session returns no chunks and an equal token;
    - after a rotation (or any change of history the backend cannot express
      as appended chunks) a token of before is answered with ``reset``;
    - a token from before a crash or reopen yields ``reset`` or exactly the
      chunks committed since: never a silent gap.

    ``change_token`` and an unchanged ``chunks_since`` cost about a stat.
    """

    def change_token(self) -> ChangeToken:
        """The current position."""
        ...

    def chunks_since(self, token: ChangeToken | None) -> ChunkChanges:
        """Everything committed after ``token`` (``None``: from the start, with ``reset``)."""
        ...

    def read_chunk(self, chunk_id: str) -> ChunkFile:
        """One chunk, committed or pending (CorruptionError if damaged or missing)."""
        ...


class AppendGroup(Protocol):
    """Stores whose sessions' appends can be made durable together: one transaction of a shared database.

    A process's session writers hand it the group commits queued at the same
    moment. Two groups that compare equal take each other's stores.
    """

    def append_sessions(
        self, batches: Sequence[tuple[SessionStore, Sequence[Sequence[PreparedEvent]]]]
    ) -> list[list[list[int]] | Exception]:
        """Each batch as :meth:`SessionStore.append` of its store would store it, all in one step.

        Returns, per batch in order, its seqs or the error that batch alone
        raises (a line that does not decode): such a batch stores nothing and
        fails no other. An error of the step itself (a lost connection) fails
        every batch, and none of them is stored.
        """
        ...


class SessionStore(ChangeFeed, Protocol):
    """The active session's events, chunks and summaries behind one synchronous interface (and its change feed)."""

    @property
    def append_group(self) -> AppendGroup | None:
        """The group this store's appends can join with other sessions' (None: each alone).

        A grouped append bypasses :meth:`append`: a wrapper whose ``append`` does more returns None or its own group.
        """
        ...

    def recover(self) -> RecoveryReport:
        """Idempotent recovery on open (before any other call)."""
        ...

    def append(self, requests: Sequence[Sequence[PreparedEvent]]) -> list[list[int]]:
        """One group commit of several requests: durable when it returns; each request's seqs.

        An event whose ``event_id`` is already stored (hot, compacted, by any
        process, or earlier in this batch) is not stored again and is reported
        as its stored seq negated (``-seq``; the caller reads the stored event
        back with :meth:`read_events`). On error nothing of the batch is stored.
        """
        ...

    def read_hot_window(self) -> list[SessionEvent]:
        """The retained hot window in seq order (events no committed chunk covers)."""
        ...

    def read_event(self, seq: int) -> SessionEvent | None:
        """The stored event with ``seq`` (hot or compacted), None if none."""
        ...

    def read_events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The stored events with these seqs, in seq order (unknown seqs are left out)."""
        ...

    def load_index(self) -> ChunkIndex:
        """The live chunk index (empty before the first commit)."""
        ...

    def read_chunk(self, chunk_id: str) -> ChunkFile:
        """One committed chunk: its entry and verbatim events (CorruptionError if damaged)."""
        ...

    def read_summary(self) -> str:
        """The rendered summary (``summary.md``), "" before the first compaction."""
        ...

    def lock_compaction(self) -> None:
        """Take the compaction lock (one pass, recovery or rotation at a time, across processes)."""
        ...

    def unlock_compaction(self) -> None:
        """Release the compaction lock."""
        ...

    def snapshot(self) -> Snapshot:
        """The hot window and index a pass plans from (caller holds the compaction lock)."""
        ...

    def survey_root(self, min_bytes: int) -> str | None:
        """A memory root from which a helper process (:mod:`aiden.offload`) can survey this store's hot
        window once it holds at least ``min_bytes``; None: survey it in this process.

        The helper opens it as a plain :class:`~aiden.storage.session.FileSessionStore`.
        """
        ...

    def commit(
        self,
        *,
        expected_last_seq: int,
        entry: ChunkEntry,
        events: Sequence[SessionEvent],
        next_index: ChunkIndex,
        pushed_out: Sequence[ChunkEntry],
    ) -> tuple[ChunkEntry, int]:
        """Commit one chunk and trim the hot window; the committed entry and events left hot.

        Raises :class:`~aiden.errors.CommitConflict` when the index moved since the snapshot.
        """
        ...

    def replace_summary(self, chunk_id: str, summary: str) -> bool:
        """Give a degraded live chunk its real summary; False when it is no longer live."""
        ...

    def rotate(self, closed_session_id: str) -> str:
        """Archive the active session as ``closed_session_id`` and start an empty one; returns the id."""
        ...

    def release(self) -> None:
        """Give back what an idle session need not hold (descriptors, caches); the next call takes it again.

        Called while nothing else uses the store; never blocks.
        """
        ...

    def close(self) -> None:
        """Release every lock and descriptor."""
        ...

"""An in-memory :class:`~aiden.storage.protocol.SessionStore`: the filesystem store's semantics, no files.

It mirrors :class:`~aiden.storage.session.FileSessionStore` where callers can
observe it: gap-free seqs that never restart within a session (also after a
commit trimmed the whole hot window), ``event_id`` dedupe that also knows
compacted events, chunk entries completed by
:func:`~aiden.storage.chunks.encode_chunk` (same sha256), sealed segments
once the index grows, summary.md rendered as the filesystem store writes it,
and rotation that starts an empty session (seqs from 1, ids forgotten).
The change feed counts commits in order; a rotation or a new store
starts a new generation (a reset for every follower). Nothing survives the
process; there is nothing to recover. Unlike the file
store's bounded window, every ``event_id`` of the session is remembered.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence

import msgspec

from aiden.config import Config
from aiden.errors import CommitConflict, CorruptionError, LockError, StorageError
from aiden.events import SessionEvent, decode_event, encode_event, validate_id
from aiden.storage import chunks as cs
from aiden.storage.chunks import render_summary_md
from aiden.storage.protocol import (
    AppendGroup,
    ChangeToken,
    ChunkChanges,
    PendingChunks,
    PreparedEvent,
    RecoveryReport,
    Snapshot,
)

__all__ = ["MemorySessionStore"]


class _Session:
    """One session's state; rotation moves it to the archive and starts a fresh one."""

    def __init__(self) -> None:
        self.hot: list[SessionEvent] = []
        self.index = cs.ChunkIndex()
        self.chunks: dict[str, cs.ChunkFile] = {}  # every committed chunk, live or sealed, in commit order
        self.ids: dict[str, int] = {}
        self.last_seq = 0
        self.summary = ""
        # The change feed's generation and "nothing moved" stamp: a new session
        # (rotation, or a new store: nothing persists) is a new generation.
        self.generation = uuid.uuid4().hex
        self.version = 0


class MemorySessionStore:
    """A thread-safe in-memory session store (a :class:`~aiden.storage.protocol.SessionStore`).

    ``config`` supplies ``summary_max_chunks`` (summary.md and segment
    sealing) and ``lock_timeout_s`` (the compaction lock), as for the
    filesystem store. :attr:`archived` holds rotated sessions by id.
    """

    append_group: AppendGroup | None = None
    """Nothing to share between sessions in memory."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config if config is not None else Config()
        self._lock = threading.Lock()
        self._compaction = threading.Lock()
        # Per store object, as the file store's flock holder: taking it twice is a bug, not a wait.
        self._compaction_held = False
        self._session = _Session()
        self.archived: dict[str, Snapshot] = {}
        """Rotated sessions by closed id: their hot window and index as they were at rotation."""

    # --- lifecycle -----------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        """Nothing can be torn or left half-written in memory: an empty report."""
        return RecoveryReport()

    def release(self) -> None:
        """Nothing to give back: the data lives in this object."""

    def close(self) -> None:
        """Release the compaction lock if it is held; the data stays readable."""
        self.unlock_compaction()

    # --- appends -------------------------------------------------------------------

    def append(self, requests: Sequence[Sequence[PreparedEvent]]) -> list[list[int]]:
        """Store every request's events as one batch; each request's seqs.

        A known ``event_id`` (hot, compacted, or earlier in this batch) is not
        stored again and is reported as its stored seq negated. Every line is decoded before
        anything is stored: a line that does not decode raises msgspec's error
        and nothing of the batch is stored.
        """
        with self._lock:
            s = self._session
            seq = s.last_seq
            batch_ids: dict[str, int] = {}
            new: list[SessionEvent] = []
            out: list[list[int]] = []
            for request in requests:
                seqs: list[int] = []
                for prepared in request:
                    eid = prepared.event_id
                    known = (s.ids.get(eid) or batch_ids.get(eid)) if eid is not None else None
                    if known is not None:
                        seqs.append(-known)  # a dedupe hit, reported negated
                        continue
                    seq += 1
                    new.append(msgspec.structs.replace(decode_event(prepared.line), seq=seq))
                    seqs.append(seq)
                    if eid is not None:
                        batch_ids[eid] = seq
                out.append(seqs)
            s.hot.extend(new)
            s.ids.update(batch_ids)
            s.last_seq = seq
            return out

    # --- reading -------------------------------------------------------------------

    def read_hot_window(self) -> list[SessionEvent]:
        """The hot window in seq order."""
        with self._lock:
            return list(self._session.hot)

    def read_event(self, seq: int) -> SessionEvent | None:
        """The stored event with ``seq`` (hot or compacted), None if none."""
        found = self.read_events([seq])
        return found[0] if found else None

    def read_events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The stored events with these seqs, in seq order (unknown seqs are left out)."""
        wanted = set(seqs)
        with self._lock:
            s = self._session
            found = {e.seq: e for e in s.hot if e.seq in wanted}
            for chunk in s.chunks.values():
                found.update(
                    (e.seq, e) for e in chunk.events if e.seq in wanted and chunk.entry.covers(e.seq)
                )
        return [found[q] for q in sorted(found)]

    def load_index(self) -> cs.ChunkIndex:
        """The live index (empty before the first commit)."""
        with self._lock:
            return self._session.index

    def read_chunk(self, chunk_id: str) -> cs.ChunkFile:
        """One committed chunk (live or sealed); :class:`CorruptionError` when there is none."""
        validate_id(chunk_id, what="chunk id")
        with self._lock:
            chunk = self._session.chunks.get(chunk_id)
        if chunk is None:
            raise CorruptionError(f"chunk {chunk_id} is missing")
        return chunk

    def read_summary(self) -> str:
        """The rendered summary.md text ("" before the first compaction)."""
        with self._lock:
            return self._session.summary

    def snapshot(self) -> Snapshot:
        """The hot window and the index (no bad lines exist in memory)."""
        with self._lock:
            return Snapshot(list(self._session.hot), self._session.index, 0)

    def survey_root(self, min_bytes: int) -> str | None:
        """None: the hot window lives in this process's memory, so it is surveyed here."""
        return None

    # --- compaction ------------------------------------------------------------------

    def lock_compaction(self) -> None:
        """Take the compaction lock (waits up to ``lock_timeout_s``, then :class:`LockError`).

        :class:`LockError` at once when this store holds it already (not reentrant).
        """
        if self._compaction_held:
            raise LockError("compaction lock is not reentrant")
        if not self._compaction.acquire(timeout=self.config.lock_timeout_s):
            raise LockError(f"timed out after {self.config.lock_timeout_s}s waiting for the compaction lock")
        self._compaction_held = True

    def unlock_compaction(self) -> None:
        """Release the compaction lock if held."""
        if self._compaction_held:
            self._compaction_held = False
            self._compaction.release()

    def commit(
        self,
        *,
        expected_last_seq: int,
        entry: cs.ChunkEntry,
        events: Sequence[SessionEvent],
        next_index: cs.ChunkIndex,
        pushed_out: Sequence[cs.ChunkEntry],
    ) -> tuple[cs.ChunkEntry, int]:
        """Commit one chunk and trim what it covers; the completed entry and how many events stay hot.

        As the filesystem store: ``next_index``'s last entry is replaced by the
        completed one, old entries are sealed, and the trim keeps every event
        the index does not cover, also those appended since the snapshot.
        ``pushed_out`` only feeds the file store's archive, which has no reader here.
        """
        full = cs.encode_chunk(entry, events)[1]
        # A copy through JSON: later mutation of a caller's meta dict cannot reach the stored chunk.
        stored = [decode_event(encode_event(e)) for e in events]
        with self._lock:
            s = self._session
            if s.index.last_seq != expected_last_seq:
                raise CommitConflict(
                    f"index moved from seq {expected_last_seq} to {s.index.last_seq} during the pass"
                )
            chunks = [*next_index.chunks[:-1], full] if next_index.chunks else [full]
            index = self._seal(msgspec.structs.replace(next_index, chunks=chunks))
            s.chunks[full.chunk_id] = cs.ChunkFile(full, stored)
            s.index = index
            # Earlier chunks' events left the hot window at their own commit; kept seqs stay.
            s.hot = [e for e in s.hot if not full.covers(e.seq)]
            s.summary = self._render(index)
            s.version += 1
            return full, len(s.hot)

    def _seal(self, index: cs.ChunkIndex) -> cs.ChunkIndex:
        # The file store's sealing without files: the entries stay in ``chunks``.
        return cs.sealed_index(index, self.config.summary_max_chunks + 1, msgspec.json.encode)

    def _render(self, index: cs.ChunkIndex) -> str:
        return render_summary_md(index, index.chunks[-self.config.summary_max_chunks :])

    def replace_summary(self, chunk_id: str, summary: str) -> bool:
        """Give a live chunk its real summary (entry, chunk and summary.md); False when it is not live."""
        with self._lock:
            s = self._session
            pos = next((i for i, e in enumerate(s.index.chunks) if e.chunk_id == chunk_id), None)
            if pos is None:
                return False
            chunk = s.chunks[chunk_id]
            full = cs.encode_chunk(
                msgspec.structs.replace(chunk.entry, summary=summary, degraded=False), chunk.events
            )[1]
            live = list(s.index.chunks)
            live[pos] = full
            s.index = msgspec.structs.replace(s.index, chunks=live)
            s.chunks[chunk_id] = cs.ChunkFile(full, chunk.events)
            s.summary = self._render(s.index)
            s.version += 1
            return True

    # --- change feed --------------------------------------------------------------------

    def change_token(self) -> ChangeToken:
        """The change feed's current position."""
        with self._lock:
            return self._token(self._session)

    def chunks_since(self, token: ChangeToken | None) -> ChunkChanges:
        """The chunks committed after ``token``, in commit order (reset for another generation)."""
        with self._lock:
            s = self._session
            now = self._token(s)
            if token == now:
                return ChunkChanges(reset=False, chunks=[], token=now)
            committed = list(s.chunks.values())
            reset = (
                token is None
                or token.generation != s.generation
                or token.chunks > len(committed)
                or (committed[token.chunks - 1].last_seq if token.chunks else 0) != token.last_seq
            )
            if reset or token is None:
                return ChunkChanges(reset=True, chunks=committed, token=now, pending=PendingChunks([], []))
            sealed = len(committed) - len(s.index.chunks)
            return ChunkChanges(
                reset=False,
                chunks=committed[token.chunks :],
                token=now,
                updated=list(s.index.chunks[: max(0, token.chunks - sealed)]),
            )

    @staticmethod
    def _token(s: _Session) -> ChangeToken:
        return ChangeToken(
            generation=s.generation, last_seq=s.index.last_seq, chunks=len(s.chunks), stamp=str(s.version)
        )

    # --- rotation ----------------------------------------------------------------------

    def rotate(self, closed_session_id: str) -> str:
        """Archive the session as ``closed_session_id`` and start an empty one (seqs from 1, ids forgotten).

        :class:`~aiden.errors.InvalidIdError` for a bad id and
        :class:`StorageError` when the id was archived already, as on disk.
        """
        validate_id(closed_session_id, what="session id")
        self.lock_compaction()
        try:
            with self._lock:
                if closed_session_id in self.archived:
                    raise StorageError(f"archive {closed_session_id!r} already exists")
                old = self._session
                self.archived[closed_session_id] = Snapshot(old.hot, old.index, 0)
                self._session = _Session()
                return closed_session_id
        finally:
            self.unlock_compaction()

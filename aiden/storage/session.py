"""The filesystem session store: ``<root>/memory/session`` behind :class:`SessionStore`.

Appends go through :class:`~aiden.storage.eventlog.EventLog`, recovery through
:class:`~aiden.storage.recovery.Recovery`; this module holds reads, the
compaction commit, rotation and the locks and caches around them. Methods are
called from several worker threads at once. ``session.lock`` guards
``events.jsonl`` (per append batch); ``compaction.lock`` serializes passes,
recovery and rotation across processes, while appends continue.

**The change feed** (:class:`FileChangeFeed`): positions count committed chunks
in index order (index.yaml only appends entries); the generation is the
(device, inode) of ``session/``, which rotation replaces. A token the current
index cannot continue (a rebuilt or foreign index) gets a reset, never a gap.
A chunk file with a valid header that index.yaml does not list is *pending*,
whatever its id (ids are opaque). The "nothing moved" stamp is a stat of
index.yaml and ``chunks/``, not trusted ("") while ``chunks/`` is within two
seconds of its mtime (it may change again within the same tick).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Final

import msgspec

from aiden.config import Config
from aiden.errors import CommitConflict, CorruptionError, InvalidIdError, StorageError
from aiden.events import SessionEvent
from aiden.storage import chunks as cs
from aiden.storage.advisory import record_recovery
from aiden.storage.eventlog import EventLog, TrimNote, trim_hot_window
from aiden.storage.fs import Storage
from aiden.storage.jsonl import GrowingFile, append_synced, read_bytes, scan
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.storage.protocol import (
    AppendGroup,
    ChangeToken,
    ChunkChanges,
    PendingChunks,
    PreparedEvent,
    RecoveryReport,
    Snapshot,
)
from aiden.storage.recovery import Recovery, displace_misplaced

log = logging.getLogger("aiden.storage")

__all__ = ["FileChangeFeed", "FileSessionStore"]


_RACY_NS: Final = 2_000_000_000


def _stat(path: os.PathLike[str] | str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot stat {os.fspath(path)}: {exc.strerror}", errno=exc.errno) from exc


class FileChangeFeed:
    """The change feed of ``layout.session``; its caches of index.yaml and segments serve the store too.

    Thread-safe: its caches are replaced whole, and a concurrent duplicate read is harmless.
    """

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._segments: dict[tuple[str, str], list[cs.ChunkEntry]] = {}
        self._index: tuple[tuple[int, int, int, int], cs.ChunkIndex] | None = None

    # --- the feed ---------------------------------------------------------------------

    def change_token(self) -> ChangeToken:
        """The current position: generation, chunks committed and the last seq they cover."""
        generation, stamp = self._stamp()
        index = self.load_index()
        return ChangeToken(generation=generation, last_seq=index.last_seq, chunks=_count(index), stamp=stamp)

    def chunks_since(self, token: ChangeToken | None) -> ChunkChanges:
        """The chunks committed after ``token``; about a stat when nothing moved.

        Raises :class:`CorruptionError` when index.yaml is unreadable. An
        unreadable chunk file is named in ``problems`` in place of its chunk.
        """
        generation, stamp = self._stamp()
        if token is not None and token.generation == generation and token.stamp and token.stamp == stamp:
            return ChunkChanges(reset=False, chunks=[], token=token)
        index = self.load_index()
        count = _count(index)
        reset = token is None or token.generation != generation or not self._continues(index, count, token)
        start = 0 if reset or token is None else token.chunks
        chunks: list[cs.ChunkFile] = []
        problems: list[str] = []
        for entry in self._entries_from(index, start):
            try:
                chunk = cs.read_chunk(self.layout, entry.chunk_id, expect_sha256=entry.sha256)
            except (CorruptionError, InvalidIdError) as exc:
                problems.append(str(exc))
                continue
            # The index entry is the commit point: it wins over the file's header copy.
            chunks.append(cs.ChunkFile(entry, chunk.events))
        updated: list[cs.ChunkEntry] = []
        if not reset:
            # Live entries delivered earlier may have had their summary replaced since.
            sealed = count - len(index.chunks)
            updated = list(index.chunks[: max(0, start - sealed)])
        return ChunkChanges(
            reset=reset,
            chunks=chunks,
            token=ChangeToken(generation=generation, last_seq=index.last_seq, chunks=count, stamp=stamp),
            problems=problems,
            updated=updated,
            pending=self._pending(index),
        )

    def read_chunk(self, chunk_id: str) -> cs.ChunkFile:
        """One chunk file, committed or pending, verified against its own header."""
        return cs.read_chunk(self.layout, chunk_id)

    # --- helpers ------------------------------------------------------------------------

    def _stamp(self) -> tuple[str, str]:
        session = _stat(self.layout.session)
        if session is None:
            return "", ""
        index = _stat(self.layout.index)
        chunks = _stat(self.layout.chunks)
        generation = f"{session.st_dev}:{session.st_ino}"
        if chunks is not None and time.time_ns() - chunks.st_mtime_ns <= _RACY_NS:
            return generation, ""
        sig = (
            None if index is None else (index.st_dev, index.st_ino, index.st_mtime_ns, index.st_size),
            None if chunks is None else (chunks.st_dev, chunks.st_ino, chunks.st_mtime_ns),
        )
        return generation, repr(sig)

    def load_index(self) -> cs.ChunkIndex:
        """The committed index (empty when none was committed yet), parsed once per version of the file."""
        # index.yaml is only replaced atomically: (dev, inode, size, mtime) identifies its content.
        st = _stat(self.layout.index)
        if st is None:
            return cs.ChunkIndex()
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._index
        if cached is not None and cached[0] == key:
            return cached[1]
        index = cs.load_index(self.layout) or cs.ChunkIndex()
        self._index = (key, index)
        return index

    def segment(self, seg: cs.SegmentRef) -> list[cs.ChunkEntry]:
        """A sealed segment's entries, read once."""
        # Keyed by checksum too: a rebuilt index (recovery) may seal different entries under a reused name.
        key = (seg.file, seg.sha256)
        cached = self._segments.get(key)
        if cached is None:
            cached = self._segments[key] = cs.read_segment(self.layout, seg)
        return cached

    def _entries_from(self, index: cs.ChunkIndex, start: int) -> list[cs.ChunkEntry]:
        """Committed entries at positions ``start`` and later; segments wholly before it are not read."""
        out: list[cs.ChunkEntry] = []
        pos = 0
        for seg in index.segments:
            if pos + seg.chunks > start:
                out.extend(self.segment(seg)[max(0, start - pos) :])
            pos += seg.chunks
        out.extend(index.chunks[max(0, start - pos) :])
        return out

    def _continues(self, index: cs.ChunkIndex, count: int, token: ChangeToken) -> bool:
        if token.chunks > count:
            return False
        if token.chunks == 0:
            return token.last_seq == 0
        at = self._entries_from(index, token.chunks - 1)
        return bool(at) and at[0].last_seq == token.last_seq

    def _pending(self, index: cs.ChunkIndex) -> PendingChunks:
        try:
            names = os.listdir(self.layout.chunks)
        except FileNotFoundError:
            return PendingChunks([], [])
        except OSError as exc:
            raise StorageError(f"cannot list {self.layout.chunks}: {exc.strerror}") from exc
        stems = {n[:-6] for n in names if n.endswith(".jsonl") and not n.startswith("segment-")}
        # Only names that are not committed chunks are validated: cheap with many chunk files.
        stems -= {e.chunk_id for e in index.chunks}
        if stems and index.segments:
            stems -= {e.chunk_id for e in self._entries_from(index, 0)}
        chunks: list[cs.ChunkFile] = []
        problems: list[str] = []
        for chunk_id in sorted(stems):
            try:
                path = self.layout.chunk_file(chunk_id)
            except InvalidIdError:
                continue  # not a chunk file name (list_chunk_files skips these too)
            try:
                chunks.append(cs.read_chunk(self.layout, chunk_id))
            except (CorruptionError, InvalidIdError) as exc:
                if os.path.lexists(path):  # else consumed by a commit since the listing
                    problems.append(f"pending {exc}")
        return PendingChunks(chunks, problems)


def _count(index: cs.ChunkIndex) -> int:
    return sum(s.chunks for s in index.segments) + len(index.chunks)


class FileSessionStore(FileChangeFeed):
    """Events log, chunks, index and summaries of ``<root>/memory/session`` (a :class:`SessionStore`)."""

    append_group: AppendGroup | None = None
    """Each session's log is its own file and fsync: nothing to share."""

    def __init__(self, layout: Layout, storage: Storage, config: Config) -> None:
        super().__init__(layout)
        self.storage = storage
        self.config = config
        self.events_lock = SessionLock(storage, layout.lock_file)
        self.compaction_lock = SessionLock(storage, layout.compaction_lock)
        self._log = EventLog(layout, storage, config)
        self._hot = GrowingFile(layout.events)
        self._decoded: dict[bytes, SessionEvent] = {}
        """The last snapshot's event lines, decoded: the next snapshot decodes only new lines."""

    def release(self) -> None:
        """Close the events descriptor and drop the decoded hot window and chunk caches (an idle session)."""
        self._log.release()
        self._hot = GrowingFile(self.layout.events)
        self._segments, self._index = {}, None
        self._decoded = {}

    def close(self) -> None:
        """Release and close every lock descriptor and the events descriptor."""
        try:
            self._log.close()
        finally:
            self.events_lock.close()
            self.compaction_lock.close()

    # --- appends -------------------------------------------------------------------

    def append(self, requests: Sequence[Sequence[PreparedEvent]]) -> list[list[int]]:
        """One group commit (see :class:`~aiden.storage.eventlog.EventLog`)."""
        return self._log.append(requests)

    # --- compaction lock -------------------------------------------------------------

    def lock_compaction(self) -> None:
        """Take ``compaction.lock`` (waits up to ``lock_timeout_s``)."""
        self.compaction_lock.acquire(self.config.lock_timeout_s)

    def unlock_compaction(self) -> None:
        """Release ``compaction.lock``."""
        self.compaction_lock.release()

    # --- reading ------------------------------------------------------------------

    def read_hot_window(self) -> list[SessionEvent]:
        """The hot window as on disk (no lock: replaces are atomic, a torn tail is ignored).

        Events a committed chunk covers (a trim interrupted by a crash) are left out.
        """
        events = self._hot.events()
        if not events:
            return events
        try:
            index = self.load_index()
        except CorruptionError:
            return events  # recovery on the next open sorts it out; show everything meanwhile
        if events[0].seq > index.last_seq:
            return events
        covered = self.covered_by(index)
        return [e for e in events if not covered(e.seq)]

    def read_chunk(self, chunk_id: str) -> cs.ChunkFile:
        """One chunk file, checked against the live index's checksum when it is a live entry."""
        index = self.load_index()
        sha = next((e.sha256 for e in index.chunks if e.chunk_id == chunk_id), None)
        return cs.read_chunk(self.layout, chunk_id, expect_sha256=sha)

    def read_summary(self) -> str:
        """The current summary.md text ("" before the first compaction)."""
        return read_bytes(self.layout.summary).decode("utf-8", errors="replace")

    def read_event(self, seq: int) -> SessionEvent | None:
        """The stored event with ``seq``, from the hot window or a chunk holding it."""
        found = self.read_events([seq])
        return found[0] if found else None

    def read_events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The stored events with these seqs, in seq order: one hot-window read, each chunk read once."""
        wanted = set(seqs)
        found = {e.seq: e for e in self.read_hot_window() if e.seq in wanted}
        missing = wanted - found.keys()
        if missing:
            found.update(self._read_compacted(self.load_index(), missing))
        return [found[q] for q in sorted(found)]

    def _read_compacted(self, index: cs.ChunkIndex, missing: set[int]) -> dict[int, SessionEvent]:
        """The events with ``missing`` seqs that committed chunks hold.

        A covering range does not prove the chunk holds a seq (a later chunk may
        compact an event an earlier one kept hot), so a seq is only settled once
        a chunk yields it.
        """
        found: dict[int, SessionEvent] = {}
        lowest = min(missing)
        entries = [e for seg in index.segments if seg.last_seq >= lowest for e in self.segment(seg)]
        for entry in [*entries, *index.chunks]:
            here = {q for q in missing if entry.covers(q)}
            if not here:
                continue
            chunk = cs.read_chunk(self.layout, entry.chunk_id, expect_sha256=entry.sha256)
            hits = {e.seq: e for e in chunk.events if e.seq in here}
            found.update(hits)
            missing = missing - hits.keys()
            if not missing:
                break
        return found

    def covered_by(self, index: cs.ChunkIndex) -> Callable[[int], bool]:
        """A predicate: is ``seq`` stored in a committed chunk of ``index``? (Segments are read only for pinned seqs.)"""
        live = index.chunks

        def covered(seq: int) -> bool:
            if seq > index.last_seq:
                return False
            if any(e.covers(seq) for e in reversed(live)):
                return True
            if live and seq >= live[0].first_seq:
                return False
            return any(e.covers(seq) for seg in index.segments for e in self.segment(seg))

        return covered

    def snapshot(self) -> Snapshot:
        """Read events.jsonl under the session lock, plus the index.

        Events a committed chunk already covers (a crash or failed trim) are never offered for compaction again.
        """
        with self.events_lock.held(self.config.lock_timeout_s):
            data = read_bytes(self.layout.events)
        # Decoded outside the lock, and only new lines: a backlog drain snapshots the whole hot window every pass.
        fresh: dict[bytes, SessionEvent] = {}
        result = scan(data, known=self._decoded, remember=fresh)
        self._decoded = fresh
        index = self.load_index()
        covered = self.covered_by(index)
        return Snapshot([e for e in result.events if not covered(e.seq)], index, len(result.bad_lines))

    def survey_root(self, min_bytes: int) -> str | None:
        """The memory root once ``events.jsonl`` holds ``min_bytes`` (None when it cannot be stat'ed)."""
        # Only the plain store over a plain Storage: the helper process builds exactly that.
        if type(self) is not FileSessionStore or type(self.storage) is not Storage:
            return None
        try:
            size = os.stat(self.layout.events).st_size
        except OSError:
            return None
        return str(self.layout.root) if size >= min_bytes else None

    # --- commit ---------------------------------------------------------------------

    def commit(
        self,
        *,
        expected_last_seq: int,
        entry: cs.ChunkEntry,
        events: Sequence[SessionEvent],
        next_index: cs.ChunkIndex,
        pushed_out: Sequence[cs.ChunkEntry],
    ) -> tuple[cs.ChunkEntry, int]:
        """Commit one compaction; the caller holds ``compaction_lock``.

        Order: chunk file, sealed segments, index.yaml (the commit point), the
        trimmed events.jsonl (keeping events appended since the snapshot), then
        summary.md and the archive.
        """
        current = self.load_index()
        if current.last_seq != expected_last_seq:
            raise CommitConflict(
                f"index moved from seq {expected_last_seq} to {current.last_seq} during the pass"
            )
        st = self.storage
        full = cs.write_chunk(st, self.layout, entry, events)
        st.checkpoint("compaction.after_chunk")
        index = msgspec.structs.replace(next_index, chunks=[*next_index.chunks[:-1], full])
        index = cs.seal_segments(st, self.layout, index, keep_live=self.config.summary_max_chunks + 1)
        st.checkpoint("compaction.before_index")
        cs.save_index(st, self.layout, index)
        st.checkpoint("compaction.after_index")
        kept = self._trim_hot_window(index, full)
        st.checkpoint("compaction.after_replace")
        self._write_summaries(index, pushed_out)
        st.checkpoint("compaction.after_summary")
        return full, kept

    def _trim_hot_window(self, index: cs.ChunkIndex, entry: cs.ChunkEntry) -> int:
        covered = self.covered_by(index)
        return trim_hot_window(
            self.storage,
            self.layout,
            self.events_lock,
            self.config.lock_timeout_s,
            lambda seq: entry.covers(seq) or covered(seq),
            entry.last_seq,
            lambda ino, old, new: self._log.note_trim(
                TrimNote(ino, old, os.stat(self.layout.events).st_ino, new, entry.chunk_id)
            ),
            known=self._decoded,
        )

    def _write_summaries(self, index: cs.ChunkIndex, pushed_out: Sequence[cs.ChunkEntry]) -> None:
        recent = index.chunks[-self.config.summary_max_chunks :]
        self.storage.write_atomic(
            self.layout.summary, cs.render_summary_md(index, recent).encode(), crash_prefix="summary"
        )
        if pushed_out:
            path = self.layout.summary_archive
            header = b"" if path.exists() else cs.ARCHIVE_HEADER.encode() + b"\n"
            append_synced(self.storage, path, header + cs.render_archive_entries(pushed_out).encode())

    def replace_summary(self, chunk_id: str, summary: str) -> bool:
        """Give a degraded live chunk its real summary (chunk header, index, summary.md); the caller holds ``compaction_lock``.

        False, with nothing changed, when the chunk is no longer a live index entry.
        """
        index = self.load_index()
        pos = next((i for i, e in enumerate(index.chunks) if e.chunk_id == chunk_id), None)
        if pos is None:
            return False
        old = index.chunks[pos]
        chunk = cs.read_chunk(self.layout, chunk_id, expect_sha256=old.sha256)
        entry = msgspec.structs.replace(old, summary=summary, degraded=False)
        full = cs.write_chunk(self.storage, self.layout, entry, chunk.events)
        chunks = list(index.chunks)
        chunks[pos] = full
        new_index = msgspec.structs.replace(index, chunks=chunks)
        cs.save_index(self.storage, self.layout, new_index)
        self._write_summaries(new_index, ())
        return True

    # --- recovery and rotation ------------------------------------------------------------

    @contextlib.contextmanager
    def _both_locks(self) -> Iterator[None]:
        with contextlib.ExitStack() as held:
            for lock in (self.compaction_lock, self.events_lock):
                held.enter_context(lock.held(self.config.lock_timeout_s))
            yield

    def recover(self) -> RecoveryReport:
        """Idempotent recovery on open; holds both locks."""
        # Before the locks: a directory standing where one of them goes would fail their open.
        displaced = displace_misplaced(self.storage, self.layout)
        with self._both_locks():
            report = Recovery(self.layout, self.storage, self.config).run()
            report = msgspec.structs.replace(report, unrecoverable=[*displaced, *report.unrecoverable])
            record_recovery(self.storage, self.layout, report)
            # Under the events lock: the appender learns the hot window now, not during the first batch.
            self._log.sync_held()
            return report

    def rotate(self, closed_session_id: str) -> str:
        """Move ``session/`` to ``session_archive/<id>/`` and start an empty session.

        Crash-safe: recovery recreates a missing ``session/`` empty.
        """
        lay, storage = self.layout, self.storage
        target = lay.archived_session(closed_session_id)
        self._decoded = {}
        with self._both_locks():
            # Never follow a planted symlink out of the memory root.
            if os.path.islink(lay.archive) or os.path.islink(lay.session) or not lay.contains(target.parent):
                raise InvalidIdError("session archive path leaves the memory root")
            if os.path.lexists(target):
                raise StorageError(f"archive {closed_session_id!r} already exists")
            storage.mkdir(lay.archive)
            if lay.session.exists():
                storage.checkpoint("rotate.before_rename")
                storage.rename_noreplace(lay.session, target)
                # The recall index is derived data of the active session: an archive is a log, never
                # searched, and the index moved while open keeps its write-ahead log (most of its bytes).
                for suffix in ("", "-wal", "-shm", "-journal"):
                    try:
                        storage.unlink(target / f"{lay.recall_db.name}{suffix}")
                    except StorageError as exc:  # the rotation is done: a leftover costs only bytes
                        log.warning("rotate: could not remove the archived recall index: %s", exc)
                storage.fsync_dir(lay.archive)
                storage.fsync_dir(lay.memory)
            storage.checkpoint("rotate.after_rename")
            storage.mkdir(lay.session)
            storage.write_atomic(lay.events, b"", crash_prefix="events")
            storage.fsync_dir(lay.memory)
            return closed_session_id

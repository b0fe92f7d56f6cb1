"""The append side of ``events.jsonl``: group commit, gap-free seqs, event_id dedupe.

One :meth:`EventLog.append` call is one group commit: take the session lock,
re-validate the file (another process may have appended, compaction may have
replaced it, a crash may have left a torn tail), assign gap-free seqs, write
every line with one ``write`` and one ``fsync``, release the lock. The cached
file state (descriptor, end offset, last seq, recent event ids) lives only
here; it is re-checked against the file under the lock on every batch.
"""

from __future__ import annotations

import logging
import os
import queue
from collections import OrderedDict
from collections.abc import Sequence

import msgspec

from aiden.config import Config
from aiden.errors import AidenError, CorruptionError, StorageError
from aiden.storage import chunks as chunk_store
from aiden.storage import dedupe
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes, repair_torn_tail, scan_ids, sealed
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.storage.protocol import PreparedEvent

__all__ = ["EventLog", "TrimNote", "with_seq"]

log = logging.getLogger("aiden.storage")


def with_seq(line: bytes, seq: int) -> bytes:
    """``line`` (an event encoded with seq 0, which is omitted) with ``seq`` as its first field and its CRC last."""
    return sealed(line, b'{"seq":%d,' % seq)


class TrimNote(msgspec.Struct, frozen=True):
    """A compaction trim of this process replaced ``events.jsonl`` (inode and size, before and after)."""

    old_ino: int
    old_size: int
    new_ino: int
    new_size: int
    chunk_id: str
    """The chunk whose events the trim took out: their ids were learned when they were appended."""


class EventLog:
    """Appends of one process to ``events.jsonl``. Blocking; call from one worker thread at a time.

    Its state (descriptor, end, last seq, event ids) is the appender's alone:
    a compaction trim of this process only sends it a :class:`TrimNote`
    (:meth:`note_trim`), which the next append reads under the events lock.
    """

    def __init__(self, layout: Layout, storage: Storage, config: Config) -> None:
        self._layout = layout
        self._storage = storage
        self._config = config
        self._lock = SessionLock(storage, layout.lock_file)
        self._fd: int | None = None
        self._ino: int | None = None
        self._end = 0
        self._last_seq = 0
        self._ids: OrderedDict[str, int] = OrderedDict()
        self._valid = False
        self._cut_back_to: int | None = None
        self._session_ino: int | None = None
        self._cut_back_ino: int | None = None
        # Chunks whose event ids are in ``_ids``, and the index.yaml state they
        # were learned from: compacted events must keep deduping (also after a
        # reopen or another process's compaction), read once per chunk.
        self._chunks_seen: set[str] = set()
        self._index_stat: tuple[int, int, int] | None = None
        # The chunk index's last seq when it was last read: a floor for new seqs.
        self._index_last_seq = 0
        self._trims: queue.SimpleQueue[TrimNote] = queue.SimpleQueue()

    def append(self, requests: Sequence[Sequence[PreparedEvent]]) -> list[list[int]]:
        """Durably store every request's events as one batch; the seqs of each request's events.

        A deduplicated event (its ``event_id`` already stored) is not written
        again and is reported as its stored seq negated (see
        :meth:`~aiden.storage.protocol.SessionStore.append`). On failure nothing
        of the batch stays in the file and the error propagates.
        """
        self._lock.acquire(self._config.lock_timeout_s)
        try:
            if self._cut_back_to is not None:
                self._retry_cut_back()
            self._sync_file_state()
            start = self._end
            try:
                return self._write_batch(requests)
            except BaseException:
                self._undo(start)
                raise
        finally:
            self._lock.release()

    def sync_held(self) -> None:
        """Learn the file (end, last seq, event ids) now; the caller holds the events lock.

        Called at open after recovery: otherwise the first append's batch reads
        the whole hot window under the lock (a backlog's, while appends wait).
        """
        self._sync_file_state()

    def _write_batch(self, requests: Sequence[Sequence[PreparedEvent]]) -> list[list[int]]:
        assert self._fd is not None
        parts: list[bytes] = []
        out: list[list[int]] = []
        new_ids: list[tuple[str, int]] = []
        seq = self._last_seq
        batch_ids: dict[str, int] = {}
        for req in requests:
            seqs: list[int] = []
            for event in req:
                eid = event.event_id
                if eid is not None:
                    known = self._ids.get(eid) or batch_ids.get(eid)
                    if known is not None:
                        seqs.append(-known)  # a dedupe hit: the caller reads the stored event back
                        continue
                seq += 1
                parts.append(with_seq(event.line, seq))
                seqs.append(seq)
                if eid is not None:
                    batch_ids[eid] = seq
                    new_ids.append((eid, seq))
            out.append(seqs)
        if parts:
            data = b"".join(parts)
            self._storage.write(self._fd, data)
            self._storage.checkpoint("append.after_write")
            if self._config.durability == "fsync":
                self._storage.fsync(self._fd)
            self._storage.checkpoint("append.after_fsync")
            self._end += len(data)
            self._last_seq = seq
            for eid, s in new_ids:
                self._remember(eid, s)
        return out

    def _undo(self, start: int) -> None:
        # Bytes of a failed batch were never acknowledged; cut them off so they
        # can never be adopted as stored events. If the cut itself fails, every
        # later batch retries it first and fails until it succeeds.
        self._valid = False
        if self._fd is None:
            return
        try:
            if os.fstat(self._fd).st_size > start:
                self._storage.truncate(self._fd, start)
                self._storage.fsync(self._fd)
        except (StorageError, OSError):
            log.error("could not cut back a failed append batch; appends are refused until it succeeds")
            self._cut_back_to = start
            self._cut_back_ino = self._ino

    def _retry_cut_back(self) -> None:
        assert self._cut_back_to is not None
        try:
            st = os.stat(self._layout.events)
        except FileNotFoundError:
            self._cut_back_to = None
            return
        if st.st_ino != self._cut_back_ino:
            self._cut_back_to = None  # the file was replaced (compaction/rotation) meanwhile
            return
        fd = self._storage.open(self._layout.events, os.O_WRONLY)
        try:
            if os.fstat(fd).st_size > self._cut_back_to:
                self._storage.truncate(fd, self._cut_back_to)
                self._storage.fsync(fd)
        finally:
            self._storage.close(fd)
        self._cut_back_to = None

    def _remember(self, eid: str, seq: int) -> None:
        self._ids[eid] = seq
        self._ids.move_to_end(eid)
        while len(self._ids) > self._config.dedupe_window:
            self._ids.popitem(last=False)

    def _sync_file_state(self) -> None:
        """Under the lock: make the cached view (fd, end, last seq, ids) match the file."""
        path = self._layout.events
        try:
            st = os.stat(path)
        except FileNotFoundError:
            # No log (a rotator killed between moving ``session/`` away and creating the new
            # one, or a deleted file): start it, and learn whose session it is, as for any new file.
            self._storage.mkdir(self._layout.session)
            fd = self._storage.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._storage.fsync_dir(self._layout.session)
            self._adopt(fd)
            st = os.fstat(fd)
        if self._fd is None and self._valid:
            # Released while idle: the same file again keeps what was learned from it.
            fd = self._storage.open(path, os.O_WRONLY | os.O_APPEND)
            if os.fstat(fd).st_ino == self._ino:
                self._fd = fd
            else:  # replaced meanwhile (another process's trim or rotation): read as new
                self._storage.close(fd)
                self._valid = False
        if self._valid and self._fd is not None and st.st_ino == self._ino and st.st_size == self._end:
            return
        if self._valid and self._fd is not None and self._adopt_trimmed(st):
            return
        self._valid = False
        if self._fd is None or st.st_ino != self._ino:
            self._adopt(self._storage.open(path, os.O_WRONLY | os.O_APPEND))
        elif st.st_size < self._end:
            self._end = 0
            self._last_seq = 0
        assert self._fd is not None
        data = read_bytes(path, self._end)
        # Seqs and ids only: the first batch after an open reads the whole hot window here.
        result = scan_ids(data, base_offset=self._end)
        for seq, event_id in result.ids:
            if seq > self._last_seq:
                self._last_seq = seq
            if event_id is not None:
                self._remember(event_id, seq)
        for bad in result.bad_lines:
            # Only reported here: recovery, or the compaction trim whose range reaches it,
            # quarantines it exactly once; copying it from the append path would repeat on every rescan.
            log.error(
                "events.jsonl: corrupt line at offset %d (quarantined by the trim that reaches it or at the next open)",
                bad.offset,
            )
        if result.torn_tail:
            repair_torn_tail(
                self._storage,
                self._fd,
                self._layout.quarantine,
                self._end + result.complete_end,
                result.torn_tail,
            )
            log.warning("events.jsonl: torn tail of %d bytes quarantined", len(result.torn_tail))
        self._end += result.complete_end
        self._learn_chunk_ids()
        # Never reuse a seq of a lost (emptied, deleted, cut) hot window, nor one a committed
        # chunk holds: the high-water mark alone may be damaged or lower (a flipped digit gave
        # seq 2 again while a chunk held 2..58).
        self._last_seq = max(self._last_seq, dedupe.read_high_water(self._layout), self._index_last_seq)
        if self._last_seq == 0:
            self._last_seq = self._floor_seq()
        self._valid = True

    def _learn_chunk_ids(self) -> None:
        # Only when index.yaml changed: the common resync (another process appended) stays cheap.
        try:
            st = os.stat(self._layout.index)
            key: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            key = None
        if key is None or key == self._index_stat:
            return
        self._index_stat = key
        try:
            index = chunk_store.load_index(self._layout)
        except AidenError:
            index = None  # recovery rebuilds it; the files' own floor applies until then
        if index is not None:
            self._index_last_seq = max(self._index_last_seq, index.last_seq)
        found = dedupe.chunk_event_ids(self._layout, index, self._chunks_seen, self._config.dedupe_window)
        if not found:
            return
        # Chunk events are older than hot ones: merge by seq so eviction drops the oldest.
        merged = sorted({**dict(found), **self._ids}.items(), key=lambda kv: kv[1])
        self._ids = OrderedDict(merged[-self._config.dedupe_window :])

    def _forget_ids(self) -> None:
        self._ids.clear()
        self._chunks_seen.clear()
        self._index_stat = None
        self._index_last_seq = 0

    def _floor_seq(self) -> int:
        # An empty hot window continues after the newest committed chunk.
        try:
            index = chunk_store.load_index(self._layout)
        except CorruptionError:
            index = None
        floor = index.last_seq if index is not None else 0
        for chunk_id in chunk_store.list_chunk_files(self._layout):
            try:
                floor = max(floor, chunk_store.read_chunk(self._layout, chunk_id).last_seq)
            except (CorruptionError, AidenError):
                continue
        return floor

    def _adopt(self, fd: int) -> None:
        """Append to the log file open at ``fd`` from now on (its contents are read next)."""
        session_ino = os.stat(self._layout.session).st_ino
        if self._session_ino is not None and session_ino != self._session_ino:
            # Another process rotated: the closed session's event ids must not dedupe (and so
            # silently drop) the new session's appends, nor its chunks' last seq number them.
            self._forget_ids()
        self._session_ino = session_ino
        self._replace_fd(fd)

    def _replace_fd(self, fd: int) -> None:
        if self._fd is not None:
            self._storage.close(self._fd)
        self._fd = fd
        self._ino = os.fstat(fd).st_ino
        self._end = 0
        self._last_seq = 0
        self._valid = False  # a new file is read (seqs, ids, floors) before the next batch

    def note_trim(self, note: TrimNote) -> None:
        """A compaction trim of this process replaced the file (any thread; the next append reads it)."""
        self._trims.put(note)

    def _adopt_trimmed(self, st: os.stat_result) -> bool:
        """Under the lock: take over the file our own trims made of the one the cached view describes.

        Each trim keeps a subset of the replaced file's lines, so when the notes
        lead from the cached (inode, end) to the file as it is now, the last seq
        and the ids stay right (the compacted events' ids were learned when they
        were appended, so the chunks need not be read back): only the descriptor
        and end move. Otherwise (another process appended or replaced it since)
        the caller re-scans. Without this, the first append after every pass
        decoded the whole hot window under the lock: a backlog-sized stall.
        """
        ino, end, chunks = self._ino, self._end, []
        while True:
            try:
                note = self._trims.get_nowait()
            except queue.Empty:
                break
            if (note.old_ino, note.old_size) == (ino, end):
                ino, end = note.new_ino, note.new_size
                chunks.append(note.chunk_id)
        if not chunks or (st.st_ino, st.st_size) != (ino, end):
            return False
        try:
            fd = self._storage.open(self._layout.events, os.O_WRONLY | os.O_APPEND)
        except (StorageError, OSError):
            return False  # the re-scan reopens it and reports what is wrong
        if os.fstat(fd).st_ino != ino or os.stat(self._layout.session).st_ino != self._session_ino:
            self._storage.close(fd)
            return False
        last_seq = self._last_seq
        self._replace_fd(fd)
        self._end, self._last_seq, self._valid = end, last_seq, True
        self._chunks_seen.update(chunks)
        return True

    def release(self) -> None:
        """Close the descriptor while idle; the next append opens the file again and keeps what it knew
        of it (end, last seq, event ids) when it is the same file."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._storage.close(fd)

    def close(self) -> None:
        """Close the descriptor and the lock."""
        try:
            if self._fd is not None:
                fd, self._fd, self._valid = self._fd, None, False
                self._storage.close(fd)
        finally:
            self._lock.close()

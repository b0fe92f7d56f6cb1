"""``events.jsonl``, the hot window's log: its appends, its trim after a compaction, and what outlives it.

**Appends** (:class:`EventLog`): one call is one group commit under the session
lock: re-validate the cached file state (another process may have appended, a
compaction replaced the file, a crash left a torn tail), assign gap-free seqs,
one ``write`` and one ``fsync``.

**Facts that outlive the log** (compaction moves events out; a crash or an
operator can empty it): the stored ``event_id`` values, read from committed
chunk files (dedupe holds after compaction), and the highest seq ever assigned,
a high-water-mark file written by each trim (a lost hot window is reported and
its seqs never handed out again).

**The trim** (:func:`trim_hot_window`), the last step of a file-store commit:
the bulk is filtered, written to a temp file and fsynced without the events
lock; under it only what was appended since is added before the replace. Lines
are kept verbatim, and only those up to the chunk's last seq are read (lines
are appended in seq order); the rest is copied as bytes. So a corrupt or
out-of-order line above the chunk outlives this trim; every reader leaves out
what a chunk covers, and recovery removes it.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import queue
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence

import msgspec

from aiden.config import Config
from aiden.errors import AidenError, StorageError
from aiden.events import SessionEvent
from aiden.storage import chunks as cs
from aiden.storage.fs import Storage
from aiden.storage.jsonl import quarantine, read_bytes, repair_torn_tail, scan_ids, scan_seqs, sealed
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.storage.protocol import PreparedEvent

__all__ = [
    "HIGH_WATER_NAME",
    "EventLog",
    "TrimNote",
    "describe_ranges",
    "lost_seqs",
    "read_high_water",
    "trim_hot_window",
    "with_seq",
    "write_high_water",
]

log = logging.getLogger("aiden.storage")


# --- seq and event-id facts that outlive the log -------------------------------------

HIGH_WATER_NAME = "seq_high_water"


def read_high_water(layout: Layout) -> int:
    """The highest seq a compaction trim saw (0 when unknown or unreadable)."""
    raw = read_bytes(layout.session / HIGH_WATER_NAME).strip()
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0  # a damaged mark only weakens loss detection; the chunks still give a floor


def write_high_water(storage: Storage, layout: Layout, seq: int) -> None:
    """Persist ``seq`` as the high-water mark if it raises the stored one."""
    if seq > read_high_water(layout):
        storage.write_atomic(layout.session / HIGH_WATER_NAME, f"{seq}\n".encode(), crash_prefix="high_water")


def lost_seqs(entries: Sequence[cs.ChunkEntry], hot: Iterable[SessionEvent], high_water: int) -> list[int]:
    """Seqs up to the known maximum that neither a chunk nor the hot window holds (seqs are gap-free: lost).

    Only gaps between ranges and kept seqs no longer hot are walked: the cost is the size of the
    loss (and of how long a kept event stayed hot), not of the session.
    """
    hot_seqs = {e.seq for e in hot}
    ordered = sorted(entries, key=lambda e: e.first_seq)
    top = max([high_water, *(e.last_seq for e in ordered)])
    missing: list[int] = []
    nxt = 1
    for e in ordered:
        missing.extend(s for s in range(nxt, e.first_seq) if s not in hot_seqs)
        nxt = max(nxt, e.last_seq + 1)
    missing.extend(s for s in range(nxt, top + 1) if s not in hot_seqs)
    # A seq a chunk kept hot (a pin, the current input) that left the hot window was either
    # compacted by a later chunk, whose range then covers it, or lost. Such a later chunk ends
    # after it: only chunks ending at or after the seq are asked.
    by_last = sorted(entries, key=lambda e: e.last_seq)
    for s in {s for e in entries for s in e.kept_seqs} - hot_seqs:
        later = bisect.bisect_left(by_last, s, key=lambda e: e.last_seq)
        if not cs.covered(by_last[later:], s):
            missing.append(s)
    return sorted(set(missing))


def describe_ranges(seqs: Sequence[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"`` (seqs sorted)."""
    parts: list[str] = []
    for _, run in itertools.groupby(enumerate(seqs), lambda pair: pair[1] - pair[0]):
        first, *rest = (s for _, s in run)
        parts.append(f"{first}-{rest[-1]}" if rest else f"{first}")
    return ", ".join(parts)


# --- appends -----------------------------------------------------------------------


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

    Its state is the appender's alone: a trim of this process only sends it a :class:`TrimNote`.
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
        self._cut_back: tuple[int | None, int] | None = None
        """(inode, size) of a failed batch's cut not made yet."""
        self._session_ino: int | None = None
        # Chunks whose event ids are in ``_ids``, and the index.yaml state they
        # were learned from: compacted events must keep deduping (also after a
        # reopen or another process's compaction), read once per chunk.
        self._chunks_seen: set[str] = set()
        self._index_stat: tuple[int, int, int] | None = None
        # The chunk index's last seq when it was last read: a floor for new seqs.
        self._index_last_seq = 0
        self._trims: queue.SimpleQueue[TrimNote] = queue.SimpleQueue()

    def append(self, requests: Sequence[Sequence[PreparedEvent]]) -> list[list[int]]:
        """Durably store every request's events as one batch (see :meth:`~aiden.storage.protocol.SessionStore.append`).

        On failure nothing of the batch stays in the file and the error propagates.
        """
        with self._lock.held(self._config.lock_timeout_s):
            if self._cut_back is not None:
                self._retry_cut_back(*self._cut_back)
            self._sync_file_state()
            start = self._end
            try:
                return self._write_batch(requests)
            except BaseException:
                self._undo(start)
                raise

    def sync_held(self) -> None:
        """Learn the file (end, last seq, event ids) now; the caller holds the events lock (at open)."""
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
        # Unacknowledged bytes must never be adopted as events. A failed cut is retried by every later batch.
        self._valid = False
        if self._fd is None:
            return
        try:
            self._cut(self._fd, start)
        except (StorageError, OSError):
            log.error("could not cut back a failed append batch; appends are refused until it succeeds")
            self._cut_back = (self._ino, start)

    def _retry_cut_back(self, ino: int | None, size: int) -> None:
        try:
            same = os.stat(self._layout.events).st_ino == ino
        except FileNotFoundError:
            same = False
        if same:  # else the file was replaced (compaction/rotation) or removed meanwhile
            fd = self._storage.open(self._layout.events, os.O_WRONLY)
            try:
                self._cut(fd, size)
            finally:
                self._storage.close(fd)
        self._cut_back = None

    def _cut(self, fd: int, size: int) -> None:
        if os.fstat(fd).st_size > size:
            self._storage.truncate(fd, size)
            self._storage.fsync(fd)

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
            # No log (a rotator killed mid-way, or a deleted file): start it.
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
            # Only reported: recovery or the trim that reaches it quarantines it once (a rescan would repeat it).
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
        # Never reuse a seq of a lost hot window nor one a committed chunk holds (the high-water
        # mark alone may be damaged or lower).
        self._last_seq = max(self._last_seq, read_high_water(self._layout), self._index_last_seq)
        if self._last_seq == 0:
            self._last_seq = self._floor_seq()
        self._valid = True

    def _learn_chunk_ids(self) -> None:
        """The ids of chunks committed since, newest first, up to the dedupe window; only when index.yaml changed."""
        try:
            st = os.stat(self._layout.index)
        except FileNotFoundError:
            return
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key == self._index_stat:
            return
        self._index_stat = key
        try:
            index = cs.load_index(self._layout)
        except AidenError:
            return  # recovery rebuilds it; the files' own floor applies until then
        if index is None:
            return
        self._index_last_seq = max(self._index_last_seq, index.last_seq)
        limit = self._config.dedupe_window
        try:
            entries = cs.load_all_entries(self._layout, index) if limit > 0 else []
        except AidenError:
            return  # dedupe learns on the next resync after recovery rebuilt the index
        found: list[tuple[str, int]] = []
        for entry in reversed(entries):
            if len(found) >= limit:
                break
            if entry.chunk_id in self._chunks_seen:
                continue
            try:
                chunk = cs.read_chunk(self._layout, entry.chunk_id)
            except (AidenError, OSError):
                continue  # unreadable chunks are reported by recovery
            self._chunks_seen.add(entry.chunk_id)
            found.extend((e.event_id, e.seq) for e in chunk.events if e.event_id is not None)
        if not found:
            return
        # Chunk events are older than hot ones: merge by seq so eviction drops the oldest.
        merged = sorted({**dict(found), **self._ids}.items(), key=lambda kv: kv[1])
        self._ids = OrderedDict(merged[-limit:])

    def _floor_seq(self) -> int:
        # An empty hot window continues after the newest chunk file, committed or not (the
        # index's last seq is a floor already: _learn_chunk_ids keeps it).
        floor = 0
        for chunk_id in cs.list_chunk_files(self._layout):
            try:
                floor = max(floor, cs.read_chunk(self._layout, chunk_id).last_seq)
            except AidenError:
                continue
        return floor

    def _adopt(self, fd: int) -> None:
        """Append to the log file open at ``fd`` from now on (its contents are read next)."""
        session_ino = os.stat(self._layout.session).st_ino
        if self._session_ino is not None and session_ino != self._session_ino:
            # Another process rotated: the closed session's event ids must not dedupe (and so
            # silently drop) the new session's appends, nor its chunks' last seq number them.
            self._ids.clear()
            self._chunks_seen.clear()
            self._index_stat = None
            self._index_last_seq = 0
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

        A trim keeps a subset of the lines, so when the notes lead from the cached
        (inode, end) to the file as it is now, the last seq and ids stay right and
        only the descriptor and end move; otherwise the caller re-scans.
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
        """Close the descriptor while idle; the next append keeps what it knew when the file is the same."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._storage.close(fd)

    def close(self) -> None:
        """Close the descriptor and the lock."""
        self.release()  # Storage.close never raises
        self._valid = False
        self._lock.close()


# --- the trim after a compaction ----------------------------------------------------


def _joined(lines: list[tuple[int, bytes]]) -> bytes:
    return b"".join(line + b"\n" for _, line in lines)


def trim_hot_window(
    storage: Storage,
    layout: Layout,
    events_lock: SessionLock,
    lock_timeout_s: float,
    compacted: Callable[[int], bool],
    chunk_last_seq: int,
    replaced: Callable[[int, int, int], None],
    known: Mapping[bytes, SessionEvent] | None = None,
) -> int:
    """Replace ``events.jsonl`` by its events for which ``compacted(seq)`` is false; how many lines are left.

    The caller holds the compaction lock and has committed the index. The
    high-water mark names only seqs on disk: the chunk's before the replace, the
    lines kept after it. ``replaced(old_inode, old_size, new_size)`` is
    called after it, still under the events lock. ``known`` lines are not re-read.
    """

    def left(lines: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        return [(seq, line) for seq, line in lines if not compacted(seq)]

    before = read_bytes(layout.events)
    end = before.rfind(b"\n") + 1
    first = scan_seqs(before[:end], known=known, after_seq=chunk_last_seq)
    split = first.stopped_at  # lines from here on are above the chunk: kept as they are
    bulk = _joined(left(first.lines)) + before[split:end]
    # Outside the events lock: two fsyncs the appenders need not wait for. Only the chunk's seqs:
    # a line read without the lock may be an append not yet fsynced, which a power loss takes
    # back; a mark naming it would report a never-acknowledged event as lost, at every open.
    write_high_water(storage, layout, chunk_last_seq)
    staged = storage.stage_atomic(layout.events, bulk)
    try:
        with events_lock.held(lock_timeout_s):
            now = read_bytes(layout.events)
            if now[:end] != before[:end]:
                # The log changed under us (a repair by another opener): redo it all under the lock.
                staged.discard()
                first, bulk, end = scan_seqs(b""), b"", 0
                staged = storage.stage_atomic(layout.events, b"")
            rest = scan_seqs(now[end:], base_offset=end, known=known)
            if rest.torn_tail:
                # We hold the lock, so nobody is mid-append: these bytes were never acknowledged.
                quarantine(storage, layout.quarantine, "torn tail at compaction", rest.torn_tail)
            for bad in [*first.bad_lines, *rest.bad_lines]:
                quarantine(storage, layout.quarantine, f"corrupt line at offset {bad.offset}", bad.raw)
            tail = left(rest.lines)
            try:
                old_ino = os.stat(layout.events).st_ino
            except FileNotFoundError:
                old_ino = -1  # nothing to adopt: the appender re-opens
            tail_bytes = _joined(tail)
            staged.commit(tail_bytes, crash_prefix="events")
            replaced(old_ino, len(now), len(bulk) + len(tail_bytes))
    except BaseException:
        staged.discard()
        raise
    # Read under the events lock, so on disk (an append fsyncs before it releases the lock): the
    # lines kept raise the mark (outside the lock).
    write_high_water(storage, layout, tail[-1][0] if tail else _last_seq(before[:end], first.lines))
    return bulk.count(b"\n") + len(tail)


def _last_seq(data: bytes, read: list[tuple[int, bytes]]) -> int:
    """The seq of the last line of ``data`` that has one (the lines after the split were not read)."""
    pos = len(data)
    while pos > 0:
        start = data.rfind(b"\n", 0, pos - 1) + 1
        found = scan_seqs(data[start:pos]).lines
        if found:
            return found[-1][0]
        pos = start
    return max((seq for seq, _ in read), default=0)

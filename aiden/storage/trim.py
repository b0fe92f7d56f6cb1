"""The last step of a file-store compaction commit: ``events.jsonl`` without the events a chunk now holds.

Appends wait on the session's events lock, and a backlog's hot window is
megabytes, so the rewrite is in two halves. Without the lock (only the pass
holding the compaction lock ever rewrites the log) the complete lines read so
far are filtered, written to a unique temp file and fsynced; under the lock
only what was appended since is read, appended and synced before the
``os.replace``. Lines are kept verbatim.

Work in the lines read, not in the hot window: lines are appended in seq
order and a chunk covers nothing above its last seq, so only the lines up to
the first one above it are read (by seq only) and filtered; the rest of the
file is copied as bytes. A backlog drain trims once per bounded pass: reading
every line of a 64k-event window each time was most of a pass's time in this
process and held the GIL while appends waited. So a corrupt line above the
chunk waits for the trim whose range reaches it (or recovery at the next open)
to be quarantined, and a line out of seq order (only an outside edit makes
one) may outlive its compaction in the file: every reader leaves out what a
chunk covers, and recovery removes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from aiden.events import SessionEvent
from aiden.storage import dedupe
from aiden.storage.fs import Storage
from aiden.storage.jsonl import quarantine, read_bytes, scan_seqs
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock

__all__ = ["trim_hot_window"]


def _joined(lines: list[tuple[int, bytes]]) -> bytes:
    return b"".join(line + b"\n" for _, line in lines)


def trim_hot_window(
    storage: Storage,
    layout: Layout,
    events_lock: SessionLock,
    lock_timeout_s: float,
    compacted: Callable[[int], bool],
    chunk_last_seq: int,
    replaced: Callable[[int, int, int], None] | None = None,
    known: Mapping[bytes, SessionEvent] | None = None,
) -> int:
    """Replace ``events.jsonl`` by its events for which ``compacted(seq)`` is false; how many lines are left.

    The caller holds the compaction lock and has committed the index that
    makes ``compacted`` true. The seq high-water mark is written before the
    replace: losing the log afterwards must still show these seqs existed.
    ``replaced(old_inode, old_size, new_size)`` is called after the replace,
    still under the events lock (this process's appender adopts the new file).
    ``known`` lines (decoded by the pass's snapshot) are not read for their seq again.
    """

    def left(lines: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        return [(seq, line) for seq, line in lines if not compacted(seq)]

    before = read_bytes(layout.events)
    end = before.rfind(b"\n") + 1
    first = scan_seqs(before[:end], known=known, after_seq=chunk_last_seq)
    split = first.stopped_at  # lines from here on are above the chunk: kept as they are
    bulk = _joined(left(first.lines)) + before[split:end]
    # The high-water mark before the replace: every seq the old log held stays known even if
    # the new log is lost. Outside the events lock: it is two fsyncs the appenders need not wait for.
    dedupe.write_high_water(storage, layout, max(chunk_last_seq, _last_seq(before[:end], first.lines)))
    staged = storage.stage_atomic(layout.events, bulk)
    try:
        events_lock.acquire(lock_timeout_s)
    except BaseException:
        staged.discard()
        raise
    try:
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
        if replaced is not None:
            replaced(old_ino, len(now), len(bulk) + len(tail_bytes))
    except BaseException:
        staged.discard()
        raise
    finally:
        events_lock.release()
    if tail:
        # Appended during the pass: known to the high-water mark from now on (they were not
        # before the pass either; the lock is not held for it).
        dedupe.write_high_water(storage, layout, tail[-1][0])
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

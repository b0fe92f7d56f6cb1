"""``history.jsonl``: source material for Dream.

Appends are serialized across processes by ``flock`` on ``.history.lock``; the record is fsynced
before ``.cursor`` is replaced, and allocation takes the larger of ``.cursor`` and the last record,
so a crash between the two never hands out a cursor twice. A torn last line is skipped on read and
fenced off by a newline before the next append.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Final

import msgspec

from aiden.longterm.files import ensure_dir
from aiden.longterm.store import LOCK_TIMEOUT_S
from aiden.longterm.summaries import format_stamp, strip_thinking
from aiden.storage.chunks import ChunkEntry
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock

__all__ = [
    "HistoryRecord",
    "HistoryStore",
    "chunk_record_id",
    "new_record",
    "record_text",
    "split_chunk_id",
]

log = logging.getLogger("aiden.longterm")

DEFAULT_MAX_RECORD_CHARS: Final = 4000
_TRUNCATED: Final = " [... truncated]"
_SESSION_KEY_CHARS: Final = 128
_TAIL_BYTES: Final = 256 * 1024


class HistoryRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line of ``history.jsonl``."""

    cursor: int
    timestamp: str
    content: str
    session_key: str = ""
    chunk_id: str = ""
    """The session chunk this record summarizes ("" for other records): a retried record lands once."""
    chunk_stamp: str = ""
    """With ``chunk_id``, names one session's chunk (:func:`chunk_record_id`); "" in older records."""


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(HistoryRecord)


def record_text(content: str, max_chars: int = DEFAULT_MAX_RECORD_CHARS) -> str:
    """A record's content as every backend stores it: thinking stripped, trimmed, at most ``max_chars``."""
    text = strip_thinking(content).strip()
    return text if len(text) <= max_chars else text[: max(0, max_chars - len(_TRUNCATED))] + _TRUNCATED


def chunk_record_id(entry: ChunkEntry) -> str:
    """The ``chunk_id`` to append for a committed chunk: its id and the time it was made.

    Chunk ids are seq ranges, which restart in every session, so the id alone does not tell a
    session's chunk from an earlier session's. The time is part of the committed index entry: a
    retry, a replay at open and a copy of the root all see the same one.
    """
    return f"{entry.chunk_id}@{entry.created_at!r}"


def split_chunk_id(key: str) -> tuple[str, str]:
    """``(chunk id, stamp)`` of an appended ``chunk_id`` (stamp "" when it has none)."""
    chunk_id, _, stamp = key.partition("@")
    return chunk_id, stamp


def new_record(cursor: int, text: str, *, session_key: str, now: float, chunk_id: str = "") -> HistoryRecord:
    """The record of ``text`` (already :func:`record_text`) at ``cursor``, stamped ``now`` (UTC, seconds)."""
    chunk, stamp = split_chunk_id(chunk_id)
    return HistoryRecord(
        cursor=cursor,
        timestamp=format_stamp(now),
        content=text,
        session_key=session_key[:_SESSION_KEY_CHARS],
        chunk_id=chunk,
        chunk_stamp=stamp,
    )


def _is_record_of(record: HistoryRecord, chunk_id: str, text: str) -> bool:
    """Whether ``record`` is the record of ``chunk_id`` (:func:`chunk_record_id`) with content ``text``.

    A record without a stamp (from before stamps) is this chunk's only with the same text: an open's
    replay of the newest chunks does not record them again, while a later session's chunk of the
    same seq range is still recorded.
    """
    chunk, stamp = split_chunk_id(chunk_id)
    if record.chunk_id != chunk:
        return False
    return record.chunk_stamp == stamp or (not record.chunk_stamp and record.content == text)


def _read_int(path: Path) -> int:
    raw = read_bytes(path).strip()
    return int(raw) if raw.isdigit() and len(raw) < 19 else 0


def _tail(path: Path, size: int) -> tuple[bytes, bool]:
    """The last ``size`` bytes of ``path`` and whether that is the whole file."""
    try:
        with open(path, "rb") as f:
            start = max(0, f.seek(0, os.SEEK_END) - size)
            f.seek(start)
            return f.read(), start == 0
    except FileNotFoundError:
        return b"", True


class HistoryStore:
    """``long_term/history.jsonl`` with its ``.cursor`` and Dream's ``.dream_cursor`` (blocking I/O).

    Nothing about the file is cached between appends: another holder may have appended in between.
    """

    def __init__(self, layout: Layout, storage: Storage, *, max_record_chars: int = DEFAULT_MAX_RECORD_CHARS) -> None:
        if max_record_chars < 64:
            raise ValueError("max_record_chars must be >= 64")
        self.root = layout.long_term
        self.path = layout.history
        self.cursor_path = layout.history_cursor
        self.dream_cursor_path = layout.dream_cursor
        self.lock_path = layout.history_lock
        self._storage = storage
        self._max = max_record_chars
        # SessionLock is not thread-safe; the thread lock lets worker threads share it.
        self._lock = threading.Lock()
        self._flock = SessionLock(storage, self.lock_path)

    def _tail_records(self) -> list[HistoryRecord]:
        # Only the tail is needed; a record is far smaller than the window, so the
        # full scan is a fallback for a tail without one complete decodable line.
        data, whole = _tail(self.path, _TAIL_BYTES)
        if not whole:
            data = data[data.find(b"\n") + 1 :]  # the first line may be cut
        records = self._scan(data)
        if not records and not whole:
            records = self._scan(read_bytes(self.path))
        return records

    @staticmethod
    def _scan(data: bytes) -> list[HistoryRecord]:
        out: list[HistoryRecord] = []
        end = data.rfind(b"\n") + 1  # bytes after the last newline are a torn, unacknowledged tail
        for line in data[:end].split(b"\n"):
            if line.strip():
                try:
                    out.append(_decoder.decode(line))
                except (msgspec.DecodeError, msgspec.ValidationError):
                    log.warning("history.jsonl: skipping an undecodable line")
        return out

    def append(self, content: str, *, session_key: str, now: float, chunk_id: str = "") -> HistoryRecord:
        """Append one record; returns it with its cursor. Blocking (an inter-process lock).

        A ``chunk_id`` (:func:`chunk_record_id`) already in the file's tail is not written again:
        that record is returned.
        """
        text = record_text(content, self._max)
        with self._lock:
            ensure_dir(self._storage, self.root)
            with self._flock.held(LOCK_TIMEOUT_S):
                if chunk_id:
                    known = next((r for r in self._tail_records() if _is_record_of(r, chunk_id, text)), None)
                    if known is not None:
                        return known
                return self._append_locked(text, session_key=session_key, now=now, chunk_id=chunk_id)

    def _append_locked(self, text: str, *, session_key: str, now: float, chunk_id: str) -> HistoryRecord:
        # Re-read under the lock: never trust a cached cursor.
        record = new_record(self.cursor() + 1, text, session_key=session_key, now=now, chunk_id=chunk_id)
        line = _encoder.encode(record) + b"\n"
        created = not self.path.exists()
        fd = self._storage.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            tail = _tail(self.path, 1)[0]
            if tail and tail != b"\n":
                line = b"\n" + line  # fence off a torn tail (checked each time: any holder may crash)
            self._storage.write(fd, line)
            self._storage.fsync(fd)
        finally:
            self._storage.close(fd)
        if created:
            self._storage.fsync_dir(self.root)
        self._storage.checkpoint("history.before_cursor")
        self._storage.write_atomic(self.cursor_path, f"{record.cursor}\n".encode())
        return record

    def read_after(self, cursor: int, *, limit: int | None = None) -> list[HistoryRecord]:
        """Records with a cursor greater than ``cursor``, oldest first (at most ``limit``)."""
        return [r for r in self._scan(read_bytes(self.path)) if r.cursor > cursor][:limit]

    def cursor(self) -> int:
        """The last allocated cursor (0 when empty); a lock-free snapshot."""
        records = self._tail_records()
        return max(_read_int(self.cursor_path), records[-1].cursor if records else 0)

    def close(self) -> None:
        """Close the lock file descriptor (the store stays usable; it reopens on demand)."""
        with self._lock:
            self._flock.close()

    def dream_cursor(self) -> int:
        """The last cursor Dream consumed (0 before the first completed run)."""
        return _read_int(self.dream_cursor_path)

    def set_dream_cursor(self, value: int) -> None:
        """Atomically record that Dream consumed everything up to ``value``."""
        ensure_dir(self._storage, self.root)
        self._storage.write_atomic(self.dream_cursor_path, f"{value}\n".encode())

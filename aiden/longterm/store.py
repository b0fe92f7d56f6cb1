"""The long-term memory store (seed 002 "Long-Term Memory And Profile").

::

    memory/long_term/
      index.yaml            version 2: id, type, title, created_at, expires_at
      memories/<id>.md      one entry per file
      profile.md            synthesized from the store (debounced rebuild)

One :class:`LongTermMemoryStore` is shared by everything of one runtime: the
``save_memory`` / ``forget_memory`` tools (:mod:`aiden.longterm.tools`), the
prompt loader and the profile debouncer. Expired entries are rejected from the
index alone — their files are never opened. Parsed entries are kept in a
bounded LRU :class:`ParseCache` whose admission is fixed: a full scan (search,
profile) only fills free slots and never evicts, so scans cannot grow memory
or flush the working set; point reads evict the least recently used entry.

Writes: entry file first, then the index (both atomic); forget removes from the
index first, then deletes the file — a crash never shows a forgotten entry.
A corrupt ``index.yaml`` (bad YAML, refused tags, wrong shape) is rebuilt
in memory from the entry files, reported in :attr:`StoreStats.problems`, and
persisted by the next write. Blocking I/O runs in worker threads.

The index is read-modify-written, so save and forget hold
``long_term/.entries.lock`` (``flock``, never deleted) and re-read the index
from disk under it: two runtimes, in one process or two, never drop each
other's rows.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import msgspec
from anyio.streams.memory import MemoryObjectSendStream

from aiden.errors import AidenError, CorruptionError, InvalidIdError
from aiden.events import validate_id
from aiden.longterm.cache import ParseCache, Stamp
from aiden.longterm.entries import (
    IndexEntry,
    LongTermIndex,
    MemoryEntry,
    parse_entry_md,
    parse_index_yaml,
    render_entry_md,
    render_index_yaml,
)
from aiden.longterm.files import ensure_dir, read_bounded
from aiden.longterm.profile import render_profile
from aiden.longterm.threaded import ThreadedEntryStore
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock

__all__ = ["LongTermMemoryStore", "StoreStats"]

log = logging.getLogger("aiden.longterm")

_MAX_ENTRY_BYTES: Final = 64 * 1024
_MAX_PROBLEMS: Final = 50
LOCK_TIMEOUT_S: Final = 30.0
"""How long save/forget wait for another holder of the index lock (then LockError)."""


class StoreStats(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one store (cache behaviour, file reads, rebuilds, problems seen)."""

    cache_size: int
    cache_hits: int
    cache_misses: int
    cache_admitted: int
    cache_rejected: int
    cache_evicted: int
    files_read: int
    profile_rebuilds: int
    problems: tuple[str, ...]


def _stamp(path: Path) -> Stamp | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class LongTermMemoryStore(ThreadedEntryStore):
    """Entries, index and profile of ``memory/long_term/``; share one instance per runtime.

    ``dirty`` is the send side of a bounded stream the profile debouncer reads
    (see :func:`~aiden.longterm.profile.run_profile_debouncer`).
    """

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        *,
        cache_size: int = 128,
        dirty: MemoryObjectSendStream[None] | None = None,
    ) -> None:
        super().__init__(dirty=dirty)
        self.layout = layout
        self._storage = storage
        self._cache = ParseCache(cache_size)
        self._lock = threading.Lock()
        self._flock = SessionLock(storage, layout.entries_lock)
        self._index: LongTermIndex | None = None
        self._index_stamp: Stamp | None = None
        self._index_rebuilt = False
        self._files_read = 0
        self._rebuilds = 0
        self._problems: list[str] = []

    # --- paths -----------------------------------------------------------------------
    @property
    def root(self) -> Path:
        """``memory/long_term/``."""
        return self.layout.long_term

    @property
    def index_path(self) -> Path:
        """``long_term/index.yaml``."""
        return self.layout.entries_index

    @property
    def memories_dir(self) -> Path:
        """``long_term/memories/``."""
        return self.layout.memories

    @property
    def profile_path(self) -> Path:
        """``long_term/profile.md``."""
        return self.layout.profile

    def entry_path(self, memory_id: str) -> Path:
        """``memories/<id>.md``; the id is validated first."""
        return self.memories_dir / f"{validate_id(memory_id, what='memory id')}.md"

    def stats(self) -> StoreStats:
        """A snapshot of the counters."""
        with self._lock:
            c = self._cache
            return StoreStats(
                cache_size=len(c), cache_hits=c.hits, cache_misses=c.misses, cache_admitted=c.admitted,
                cache_rejected=c.rejected, cache_evicted=c.evicted, files_read=self._files_read,
                profile_rebuilds=self._rebuilds, problems=tuple(self._problems),
            )

    # --- sync internals (hold self._lock) ----------------------------------------------
    def _problem(self, text: str) -> None:
        log.error("long-term store: %s", text)
        if len(self._problems) < _MAX_PROBLEMS:
            self._problems.append(text)

    def _load_index(self) -> LongTermIndex:
        stamp = _stamp(self.index_path)
        if self._index is not None and stamp == self._index_stamp:
            return self._index
        data = read_bytes(self.index_path) if stamp is not None else b""
        try:
            if not data and self._has_entry_files():
                # Every write of index.yaml leaves at least its header: a missing or empty
                # one beside entry files was lost (deleted, emptied), and an empty index
                # would hide every saved memory for good.
                raise CorruptionError("index.yaml is missing or empty although memories/ holds entries")
            index = parse_index_yaml(data) if data else LongTermIndex()
            rebuilt = False
        except CorruptionError as exc:
            self._problem(f"{exc}; rebuilt the index from memories/")
            index = self._rebuild_index()
            rebuilt = True
        self._index, self._index_stamp, self._index_rebuilt = index, stamp, rebuilt
        return index

    def _has_entry_files(self) -> bool:
        try:
            with os.scandir(self.memories_dir) as found:
                return any(e.name.endswith(".md") for e in found)
        except OSError:
            return False

    def _rebuild_index(self) -> LongTermIndex:
        try:
            names = sorted(os.listdir(self.memories_dir))
        except FileNotFoundError:
            names = []
        entries: list[IndexEntry] = []
        for name in names:
            if not name.endswith(".md"):
                continue
            entry = self._read_file(name[:-3])
            if entry is not None:
                entries.append(IndexEntry(id=entry.id, type=entry.type, title=entry.title,
                                          created_at=entry.created_at, expires_at=entry.expires_at))
        entries.sort(key=lambda e: (e.created_at, e.id))
        return LongTermIndex(entries=tuple(entries))

    def _read_file(self, memory_id: str) -> MemoryEntry | None:
        try:
            path = self.entry_path(memory_id)
        except InvalidIdError:  # an invalid name in memories/ is simply not an entry
            return None
        text = read_bounded(path, _MAX_ENTRY_BYTES)
        if text is None:
            return None
        self._files_read += 1
        try:
            entry = parse_entry_md(text)
        except CorruptionError as exc:
            self._problem(f"memories/{memory_id}.md: {exc}")
            return None
        return entry if entry.id == memory_id else None

    def _entry(self, memory_id: str, *, scan: bool) -> MemoryEntry | None:
        path = self.entry_path(memory_id)
        stamp = _stamp(path)
        if stamp is None:
            self._problem(f"memories/{memory_id}.md is missing")
            return None
        cached = self._cache.get(memory_id, stamp)
        if cached is not None:
            return cached
        entry = self._read_file(memory_id)
        if entry is not None:
            self._cache.put(memory_id, stamp, entry, scan=scan)
        return entry

    def _write_index(self, index: LongTermIndex) -> None:
        self._storage.write_atomic(self.index_path, render_index_yaml(index).encode("utf-8"))
        self._index, self._index_stamp, self._index_rebuilt = index, _stamp(self.index_path), False

    def _ensure_dirs(self) -> None:
        ensure_dir(self._storage, self.memories_dir)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the thread lock and the inter-process index lock; forget the cached index."""
        with self._lock:
            ensure_dir(self._storage, self.root)
            self._flock.acquire(LOCK_TIMEOUT_S)
            try:
                # Another holder may have replaced index.yaml within the stamp's resolution.
                self._index = None
                yield
            finally:
                self._flock.release()

    def _save_sync(self, entry: MemoryEntry) -> None:
        path = self.entry_path(entry.id)
        with self._exclusive():
            self._ensure_dirs()
            # Read before the entry file lands: a first save would otherwise look like an
            # index lost beside its entry files.
            index = self._load_index()
            previous = read_bytes(path) if path.exists() else None
            row = IndexEntry(id=entry.id, type=entry.type, title=entry.title,
                             created_at=entry.created_at, expires_at=entry.expires_at)
            rest = tuple(e for e in index.entries if e.id != entry.id)
            new = LongTermIndex(entries=(*rest, row))
            try:
                # The entry's replace may land before its directory fsync fails: undone too.
                self._storage.write_atomic(path, render_entry_md(entry).encode("utf-8"))
                self._cache.discard(entry.id)
                self._write_index(new)
            except BaseException:
                # index.yaml is the commit point: a save the caller is told failed must leave
                # nothing behind, neither a row (the replace may have landed before a failed
                # directory fsync) nor an entry file a rebuild of a lost or damaged index would adopt.
                self._undo_save(index, new, path, previous)
                raise

    def _undo_save(self, old: LongTermIndex, new: LongTermIndex, path: Path, previous: bytes | None) -> None:
        try:
            if read_bytes(self.index_path) == render_index_yaml(new).encode("utf-8"):
                self._write_index(old)  # the replace landed; what failed came after it
        except (AidenError, OSError) as exc:
            log.error("could not restore index.yaml after a failed save: %s", exc)
        try:
            if previous is None:
                self._storage.unlink(path)
            else:
                self._storage.write_atomic(path, previous)
        except (AidenError, OSError) as exc:
            # The original failure is what the caller hears; this one is only logged.
            log.error("could not undo the failed save of %s: %s", path.name, exc)
        self._cache.discard(path.stem)

    def _forget_sync(self, memory_id: str) -> bool:
        path = self.entry_path(memory_id)
        with self._exclusive():
            index = self._load_index()
            rest = tuple(e for e in index.entries if e.id != memory_id)
            known = len(rest) != len(index.entries)
            if known or self._index_rebuilt:
                self._write_index(LongTermIndex(entries=rest))
            self._cache.discard(memory_id)
            existed = path.exists()
            self._storage.unlink(path)
            return known or existed

    def _entries_sync(self, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
        with self._lock:
            return self._active(now, types)

    def _active(self, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
        rows = [e for e in self._load_index().entries
                if not e.expired(now) and (types is None or e.type in types)]
        out = [self._entry(row.id, scan=True) for row in rows]
        return [e for e in out if e is not None and not e.expired(now)]

    def _get_sync(self, memory_id: str, now: float) -> MemoryEntry | None:
        with self._lock:
            row = next((e for e in self._load_index().entries if e.id == memory_id), None)
            if row is None or row.expired(now):
                return None
            return self._entry(memory_id, scan=False)

    def _rebuild_profile_sync(self, now: float) -> bool:
        # Read and write under the index lock: another process's save and rebuild landing
        # between this read and this write would otherwise be overwritten by a stale profile.
        with self._exclusive():
            text = render_profile(self._active(now, None), now=now).encode("utf-8")
            self._rebuilds += 1
            if read_bytes(self.profile_path) == text:
                return False
            ensure_dir(self._storage, self.root)
            self._storage.write_atomic(self.profile_path, text)
            return True


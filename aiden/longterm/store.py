"""The long-term memory store: ``index.yaml``, ``memories/<id>.md`` and ``profile.md`` under ``memory/long_term/``.

Save writes the entry file, then the index; forget removes the index row first, then the file, so a
crash never shows a forgotten entry. Save and forget hold ``.entries.lock`` and re-read the index
under it, so concurrent runtimes never drop each other's rows. A corrupt index is rebuilt from the
entry files and reported in :attr:`StoreStats.problems`.

What every entry backend shares lives here too: :class:`ThreadedEntryStore`,
:func:`render_profile` and :func:`run_profile_debouncer`.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.context.summary_fit import LayerItem, LayerSection, LongTermText
from aiden.errors import AidenError, CorruptionError, InvalidIdError, StorageError
from aiden.events import validate_id
from aiden.longterm.entries import (
    IndexEntry,
    LongTermIndex,
    MemoryEntry,
    MemoryType,
    make_entry,
    parse_entry_md,
    parse_index_yaml,
    rank_entries,
    render_entry_md,
    render_index_yaml,
)
from aiden.longterm.files import ensure_dir, read_bounded
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.summarizers.mustkeep.text import clip

__all__ = [
    "PROFILE_TITLE",
    "LongTermMemoryStore",
    "ParseCache",
    "Stamp",
    "StoreStats",
    "ThreadedEntryStore",
    "fit_profile",
    "render_profile",
    "run_profile_debouncer",
]

log = logging.getLogger("aiden.longterm")

Stamp = tuple[int, int, int]
"""(mtime_ns, size, inode) of an entry file."""


class ParseCache:
    """LRU of parsed entries keyed by id and validated by the file's (mtime, size, inode) stamp.

    A full scan (search, profile) only fills free slots and never evicts, so scans
    cannot grow memory or flush the working set; point reads evict the least recently used.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._items: OrderedDict[str, tuple[Stamp, MemoryEntry]] = OrderedDict()
        self.hits = self.misses = self.admitted = self.rejected = self.evicted = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str, stamp: Stamp) -> MemoryEntry | None:
        """The cached entry if its stamp still matches (and mark it recently used)."""
        item = self._items.get(key)
        if item is None or item[0] != stamp:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return item[1]

    def put(self, key: str, stamp: Stamp, entry: MemoryEntry, *, scan: bool) -> None:
        """Admit ``entry``: refresh if present; fill a free slot; evict the LRU only if not ``scan``."""
        if key in self._items:
            self._items[key] = (stamp, entry)
            self._items.move_to_end(key)
            return
        if len(self._items) >= self.capacity:
            if scan:
                self.rejected += 1
                return
            self._items.popitem(last=False)
            self.evicted += 1
        self._items[key] = (stamp, entry)
        self.admitted += 1

    def discard(self, key: str) -> None:
        """Forget ``key``."""
        self._items.pop(key, None)


class ThreadedEntryStore(ABC):
    """A backend's saved memories (its :data:`~aiden.longterm.backend.EntryStore`) over its blocking ``_*_sync`` methods.

    Ids are validated before any I/O, the work runs in a worker thread, and a change signals the
    profile debouncer on ``dirty``.
    """

    def __init__(self, *, dirty: MemoryObjectSendStream[None] | None = None) -> None:
        self._dirty = dirty

    # --- what a backend implements (blocking; called from a worker thread) -----------
    @abstractmethod
    def _save_sync(self, entry: MemoryEntry) -> None:
        """Store ``entry`` atomically (replacing one with its id)."""

    @abstractmethod
    def _forget_sync(self, memory_id: str) -> bool:
        """Remove the entry; False if there was none."""

    @abstractmethod
    def _get_sync(self, memory_id: str, now: float) -> MemoryEntry | None:
        """The unexpired entry ``memory_id``, or None."""

    @abstractmethod
    def entries_sync(self, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
        """Every unexpired entry (of ``types``), oldest first; expired ones are never read (blocking)."""

    @abstractmethod
    def _rebuild_profile_sync(self, now: float) -> bool:
        """Re-render the profile from the unexpired entries; True if it changed."""

    # --- the async API ----------------------------------------------------------------
    def notify_dirty(self) -> None:
        """Tell the profile debouncer the store changed (dropped if a signal is already pending)."""
        if self._dirty is not None:
            with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._dirty.send_nowait(None)

    async def save(
        self,
        *,
        type: str,
        title: str,
        content: str,
        now: float,
        expires_at: float | None = None,
        memory_id: str | None = None,
    ) -> MemoryEntry:
        """Save (or replace, when ``memory_id`` exists) an entry; raises MemoryEntryError / InvalidIdError."""
        mid = memory_id if memory_id is not None else f"mem-{int(now)}-{secrets.token_hex(4)}"
        entry = make_entry(
            memory_id=mid, type=type, title=title, content=content, created_at=now, expires_at=expires_at
        )
        await anyio.to_thread.run_sync(self._save_sync, entry)
        self.notify_dirty()
        return entry

    async def forget(self, memory_id: str) -> bool:
        """Remove an entry; False if there was none. Raises InvalidIdError for a hostile id."""
        validate_id(memory_id, what="memory id")
        found = await anyio.to_thread.run_sync(self._forget_sync, memory_id)
        if found:
            self.notify_dirty()
        return found

    async def get(self, memory_id: str, *, now: float) -> MemoryEntry | None:
        """The unexpired entry ``memory_id`` (None if unknown or expired)."""
        validate_id(memory_id, what="memory id")
        return await anyio.to_thread.run_sync(self._get_sync, memory_id, now)

    async def entries(self, *, now: float, types: Sequence[str] | None = None) -> list[MemoryEntry]:
        """Every unexpired entry (of ``types``), oldest first; expired ones are never read."""
        return await anyio.to_thread.run_sync(self.entries_sync, now, types)

    async def search(
        self, query: str, *, now: float, k: int = 5, types: Sequence[str] | None = None
    ) -> list[MemoryEntry]:
        """Unexpired entries matching ``query`` (most matching words first, then newest); ``k`` at most."""
        return rank_entries(await self.entries(now=now, types=types), query, k=k)

    async def rebuild_profile(self, *, now: float) -> bool:
        """Re-render the profile from the unexpired entries; True if its content changed."""
        return await anyio.to_thread.run_sync(self._rebuild_profile_sync, now)


PROFILE_TITLE: Final = "# PROFILE"
_SECTIONS: Final[tuple[tuple[MemoryType, str], ...]] = (
    ("preference", "## Preferences"),
    ("rule", "## Rules"),
    ("fact", "## Facts"),
    ("procedure", "## Procedures"),
    ("manual", "## Saved Notes"),
)
_PROFILE_INTRO: Final = "Synthesized from long-term memory (memories/); rebuilt automatically, do not edit."
_ITEM_CHARS: Final = 400


def _profile(entries: Sequence[MemoryEntry], now: float) -> list[LayerSection]:
    """The profile's sections for ``entries``: unexpired ones, grouped by type, oldest first, bounded items."""
    live = sorted((e for e in entries if not e.expired(now)), key=lambda e: (e.created_at, e.id))
    sections = [LayerSection(f"{PROFILE_TITLE}\n\n{_PROFILE_INTRO}")]  # two paragraphs, never one without the other
    for kind, heading in _SECTIONS:
        items = [e for e in live if e.type == kind]
        if items:
            lines = (
                LayerItem(f"- **{e.title}**: {clip(e.content, _ITEM_CHARS)} ({e.id})", len(items) - 1 - n)
                for n, e in enumerate(items)
            )
            sections.append(LayerSection(heading, tuple(lines)))
    return sections


def render_profile(entries: Sequence[MemoryEntry], *, now: float) -> str:
    """``profile.md`` for ``entries``: unexpired ones, grouped by type, oldest first, bounded items."""
    return LongTermText.of(_profile(entries, now)) + "\n"


def fit_profile(
    entries: Sequence[MemoryEntry], *, now: float, budget_tokens: int, estimate: Callable[[str], int]
) -> LongTermText:
    """The profile of ``entries`` (as :func:`render_profile` renders it) cut to ``budget_tokens`` for the prompt.

    Sections keep their order of importance (preferences, rules, ...) and each keeps its newest
    items, up to the first that does not fit; a last line says how many memories are left out.
    ``""`` without an unexpired memory, and when not even the heading and that line fit.
    """
    sections = _profile(entries, now)
    head = [s for s in sections if not s.items]
    groups = [s for s in sections if s.items]
    total = sum(len(g.items) for g in groups)
    chosen: list[set[int]] = [set() for _ in groups]

    def render() -> LongTermText:
        shown = [
            LayerSection(g.heading, tuple(item for i, item in enumerate(g.items) if i in c))
            for g, c in zip(groups, chosen, strict=True)
            if c
        ]
        left = total - sum(len(c) for c in chosen)
        note = f"({left} more saved {'memory is' if left == 1 else 'memories are'} kept but not shown here.)"
        return LongTermText.of([*head, *shown, *([LayerSection(note)] if left else [])])

    if not groups:
        return LongTermText()  # no saved memory: a bare heading would only take room in prompts
    whole = LongTermText.of(sections)
    if estimate(whole) <= budget_tokens:
        return whole
    used = estimate(render())
    picks: list[tuple[int, int]] = []
    for gi, group in enumerate(groups):
        heading_cost = estimate(group.heading) + 2
        for i in sorted(range(len(group.items)), key=lambda i: group.items[i].age):  # newest first
            cost = estimate(group.items[i].text) + 1 + (0 if chosen[gi] else heading_cost)
            if used + cost > budget_tokens:
                break  # an older memory in a newer one's place could show what the newer one replaced
            used += cost
            chosen[gi].add(i)
            picks.append((gi, i))
    # The per-item costs estimate the whole; drop the last picks until it truly fits.
    while picks and estimate(render()) > budget_tokens:
        gi, i = picks.pop()
        chosen[gi].discard(i)
    out = render()
    return out if estimate(out) <= budget_tokens else LongTermText()


async def run_profile_debouncer(
    target: ThreadedEntryStore,
    signals: MemoryObjectReceiveStream[None],
    delay_s: float,
    *,
    max_delay_s: float | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Rebuild the profile once per burst of dirty signals; returns when ``signals`` is closed.

    A rebuild waits until ``delay_s`` passed without a signal (at most ``max_delay_s`` after the
    first), on anyio's clock. A failed rebuild is logged and the next signal retries.
    """
    if delay_s < 0:
        raise ValueError("delay_s must be >= 0")
    limit = max_delay_s if max_delay_s is not None else delay_s * 10
    task_status.started()
    async with signals:
        closed = False
        while not closed:
            try:
                await signals.receive()
            except anyio.EndOfStream:
                return
            first = anyio.current_time()
            while True:
                wait = min(delay_s, first + limit - anyio.current_time())
                if wait <= 0:
                    break
                with anyio.move_on_after(wait) as quiet:
                    try:
                        await signals.receive()
                    except anyio.EndOfStream:
                        closed = True
                if quiet.cancelled_caught or closed:
                    break
            try:
                await target.rebuild_profile(now=time.time())
            except AidenError as exc:
                log.error("profile rebuild failed: %s", exc)


_MAX_ENTRY_BYTES: Final = 64 * 1024
_MAX_PROBLEMS: Final = 50
LOCK_TIMEOUT_S: Final = 30.0
"""How long a long-term write (save, forget, a history append) waits for another holder of its lock (then LockError)."""


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


def _row(e: MemoryEntry) -> IndexEntry:
    return IndexEntry(id=e.id, type=e.type, title=e.title, created_at=e.created_at, expires_at=e.expires_at)


class LongTermMemoryStore(ThreadedEntryStore):
    """Entries, index and profile of ``memory/long_term/``; share one instance per runtime."""

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
                # Every write leaves at least a header, so a missing or empty index beside entry
                # files was lost; trusting it would hide every saved memory for good.
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
            names = os.listdir(self.memories_dir)
        except FileNotFoundError:
            names = []
        found = (self._read_file(name[:-3]) for name in sorted(names) if name.endswith(".md"))
        rows = sorted((_row(e) for e in found if e is not None), key=lambda e: (e.created_at, e.id))
        return LongTermIndex(entries=tuple(rows))

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

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the thread lock and the inter-process index lock; forget the cached index."""
        with self._lock:
            ensure_dir(self._storage, self.root)
            with self._flock.held(LOCK_TIMEOUT_S):
                # Another holder may have replaced index.yaml within the stamp's resolution.
                self._index = None
                yield

    def _save_sync(self, entry: MemoryEntry) -> None:
        path = self.entry_path(entry.id)
        with self._exclusive():
            ensure_dir(self._storage, self.memories_dir)
            # Read before the entry file lands: a first save would otherwise look like an
            # index lost beside its entry files.
            index = self._load_index()
            try:
                previous = read_bytes(path) if path.exists() else None
            except OSError as exc:  # a directory or an unreadable file in its place: a tool answers the error
                raise StorageError(f"memories/{path.name} cannot be read: {exc}") from exc
            rest = tuple(e for e in index.entries if e.id != entry.id)
            new = LongTermIndex(entries=(*rest, _row(entry)))
            try:
                self._storage.write_atomic(path, render_entry_md(entry).encode("utf-8"))
                self._cache.discard(entry.id)
                self._write_index(new)
            except BaseException:
                # index.yaml is the commit point: a failed save leaves neither a row (the replace may
                # have landed before a failed fsync) nor an entry file a later index rebuild would adopt.
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

    def entries_sync(self, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
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
            self._storage.write_atomic(self.profile_path, text)
            return True

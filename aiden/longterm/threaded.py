"""The async face every entry store shares: blocking storage calls run in a worker thread.

A backend (files under ``long_term/``, PostgreSQL rows) implements the five
blocking ``_*_sync`` methods; this class turns them into the
:class:`~aiden.longterm.backend.EntryStore` protocol, validates ids before any
I/O, and signals the profile debouncer after each change. One copy, so the
backends cannot drift apart in what they check or when they signal.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Sequence

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from aiden.events import validate_id
from aiden.longterm.entries import MemoryEntry, make_entry, rank_entries

__all__ = ["ThreadedEntryStore"]


class ThreadedEntryStore(ABC):
    """:class:`~aiden.longterm.backend.EntryStore` over blocking ``_*_sync`` methods.

    ``dirty`` is the send side of a bounded stream the profile debouncer reads
    (see :func:`~aiden.longterm.profile.run_profile_debouncer`).
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
    def _entries_sync(self, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
        """Every unexpired entry (of ``types``), oldest first; expired ones are never read."""

    @abstractmethod
    def _rebuild_profile_sync(self, now: float) -> bool:
        """Re-render the profile from the unexpired entries; True if it changed."""

    # --- the async API ----------------------------------------------------------------
    def notify_dirty(self) -> None:
        """Tell the profile debouncer the store changed (dropped if a signal is already pending)."""
        if self._dirty is None:
            return
        try:
            self._dirty.send_nowait(None)
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

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
        return await anyio.to_thread.run_sync(self._entries_sync, now, types)

    async def search(
        self, query: str, *, now: float, k: int = 5, types: Sequence[str] | None = None
    ) -> list[MemoryEntry]:
        """Unexpired entries matching ``query`` (most matching words first, then newest); ``k`` at most."""
        return rank_entries(await self.entries(now=now, types=types), query, k=k)

    async def rebuild_profile(self, *, now: float) -> bool:
        """Re-render the profile from the unexpired entries; True if its content changed."""
        return await anyio.to_thread.run_sync(self._rebuild_profile_sync, now)

"""The long-term storage seam: what the long-term actor needs from a backend (files or PostgreSQL).

What both backends do alike lives once, in the file modules (:class:`~aiden.longterm.store.ThreadedEntryStore`,
:class:`~aiden.longterm.writer.SummaryFlow`, :class:`~aiden.longterm.dream.DreamFlow`).
Guarantees, to any number of instances in any number of processes (checked by
:mod:`aiden.testing.conformance_longterm`):

- entries: a save or forget is atomic; concurrent saves never drop each other; an expired entry is never returned;
- history: cursors are unique, increasing and gap-free; a ``chunk_id`` is recorded once;
- session summaries: each merge and session write (with the cap) is one atomic read-merge-write;
- Dream: one run at a time per store; the cursor advances only after the new version is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from anyio.streams.memory import MemoryObjectSendStream

if TYPE_CHECKING:
    from aiden.config import Config
    from aiden.context.summary_fit import LongTermText
    from aiden.longterm.dream import DreamFlow
    from aiden.longterm.history import HistoryRecord
    from aiden.longterm.store import ThreadedEntryStore
    from aiden.longterm.writer import SummaryFlow

__all__ = ["BackendFactory", "EntryStore", "HistoryLog", "LongTermBackend"]


EntryStore: TypeAlias = "ThreadedEntryStore"
"""Saved memories (``save_memory`` / ``forget_memory``): every backend's entry store is a :class:`ThreadedEntryStore`."""


class HistoryLog(Protocol):
    """Dream's source material with its cursors (blocking); :class:`HistoryStore` satisfies it."""

    def append(self, content: str, *, session_key: str, now: float, chunk_id: str = "") -> HistoryRecord:
        """Append one record; a record of a ``chunk_id`` already recorded is returned instead."""
        ...

    def read_after(self, cursor: int, *, limit: int | None = None) -> list[HistoryRecord]:
        """Records with a cursor greater than ``cursor``, oldest first (at most ``limit``)."""
        ...

    def cursor(self) -> int:
        """The last allocated cursor (0 when empty)."""
        ...

    def dream_cursor(self) -> int:
        """The last cursor Dream consumed (0 before the first completed run)."""
        ...

    def set_dream_cursor(self, value: int) -> None:
        """Record that Dream consumed everything up to ``value``."""
        ...

    def close(self) -> None:
        """Release what the log holds open (it stays usable)."""
        ...


class LongTermBackend(Protocol):
    """Where one memory's long-term state lives: the four stores and the prompt layer's sources."""

    @property
    def entries(self) -> EntryStore:
        """The saved memories."""
        ...

    @property
    def history(self) -> HistoryLog:
        """The history log with its cursors."""
        ...

    @property
    def summaries(self) -> SummaryFlow:
        """The session-summary writers."""
        ...

    def dream(self) -> DreamFlow[Any]:
        """Dream over this store (built on first use: the file backend loads dulwich)."""
        ...

    def has_profile(self) -> bool:
        """True when a profile was ever rendered (blocking)."""
        ...

    def has_running_summary(self) -> bool:
        """True when the active session has a running summary (blocking)."""
        ...

    def load_layer(self, config: Config) -> LongTermText:
        """The prompt layer: PROJECT MEMORY block and profile, joined (blocking)."""
        ...


BackendFactory: TypeAlias = Callable[[MemoryObjectSendStream[None]], LongTermBackend]
"""Builds the backend given the profile's dirty-signal stream (its entry store sends on it)."""

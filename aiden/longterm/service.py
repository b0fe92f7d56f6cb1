"""Long-term memory inside one runtime: the objects, their background tasks, and the hooks.

:func:`aiden.open_memory` builds one :class:`LongTermServices`, owned by the
long-term actor (:class:`~aiden.longterm.extension.LongTermActor`), and starts its tasks in the
runtime's task group. The hooks are what the rest of aiden asks for, by
message, at the seed-004 death points: before every compaction
(:meth:`before_compaction`) and at session end (:meth:`session_ended`).

Storage goes through the seam of :mod:`aiden.longterm.backend`: by default
:class:`FileLongTermBackend` (the files under ``memory/long_term/``); with a
PostgreSQL session store, its long-term backend
(:mod:`aiden.longterm.postgres.backend`), chosen by ``backend_factory``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from aiden.config import Config
from aiden.errors import AidenError
from aiden.events import SessionEvent
from aiden.longterm.autocompact import AutoCompactor, IdleTarget, run_autocompact
from aiden.longterm.backend import (
    BackendFactory,
    DreamVersions,
    EntryStore,
    HistoryLog,
    LongTermBackend,
    SummaryStore,
)
from aiden.longterm.history import HistoryStore
from aiden.longterm.project import load_project_memory
from aiden.longterm.store import LongTermMemoryStore, run_profile_debouncer
from aiden.longterm.writer import SessionSummaryWriter, SummaryWrite
from aiden.observe import observed
from aiden.storage.chunks import ChunkEntry
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore
from aiden.summarizers.protocol import Summarizer

if TYPE_CHECKING:
    from aiden.longterm.dream import DreamOutcome

__all__ = ["BackendFactory", "FileLongTermBackend", "LongTermServices", "select_long_term"]

log = logging.getLogger("aiden.longterm")

_AUTOCOMPACT_TICK_S = 60.0
_PROFILE_DEBOUNCE_S = 2.0


class FileLongTermBackend:
    """The files under ``memory/long_term/`` (and the running summary in ``session/``): the default backend."""

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        config: Config,
        summarizer: Summarizer,
        dirty: MemoryObjectSendStream[None] | None = None,
    ) -> None:
        self._layout = layout
        self._storage = storage
        self._writer = SessionSummaryWriter(layout, storage, summarizer, config)
        self._summarizer = summarizer
        self._history = HistoryStore(layout, storage)
        self._store = LongTermMemoryStore(layout, storage, dirty=dirty)
        self._dream: DreamVersions | None = None

    @property
    def entries(self) -> EntryStore:
        """``long_term/index.yaml`` and ``memories/``."""
        return self._store

    @property
    def history(self) -> HistoryLog:
        """``long_term/history.jsonl`` with ``.cursor`` and ``.dream_cursor``."""
        return self._history

    @property
    def summaries(self) -> SummaryStore:
        """``session/running_summary.md``, ``long_term/sessions/`` and ``digest.md``."""
        return self._writer

    def dream(self) -> DreamVersions:
        """Dream over long_term/ (its git store, via dulwich, loads on first use)."""
        if self._dream is None:
            from aiden.longterm.dream import Dream, SummarizerDreamEditor

            # The configured summarizer (through the summarizer actor in a runtime: its
            # deadline and validation apply); the embedded extractive one by default.
            editor = SummarizerDreamEditor(self._summarizer)
            self._dream = Dream(self._layout, self._storage, self._history, editor=editor)
        return self._dream

    def has_profile(self) -> bool:
        """``long_term/profile.md`` exists."""
        return self._store.profile_path.exists()

    def has_running_summary(self) -> bool:
        """``session/running_summary.md`` holds something."""
        return bool(read_bytes(self._writer.running_path))

    def load_layer(self, config: Config) -> str:
        """The PROJECT MEMORY block from the summary files, then ``profile.md``."""
        block = load_project_memory(self._layout, config)
        profile = read_bytes(self._layout.profile)
        parts = [block.strip(), profile.decode("utf-8", errors="replace").strip()]
        return "\n\n".join(p for p in parts if p)


class LongTermServices:
    """The long-term store, session-summary writer, history and Dream of one memory.

    ``backend_factory`` (given the profile's dirty stream) picks the storage;
    the default is :class:`FileLongTermBackend` under ``layout``.
    """

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        config: Config,
        summarizer: Summarizer,
        *,
        backend_factory: BackendFactory | None = None,
    ) -> None:
        self.layout = layout
        self.config = config
        self._dirty_send, self._dirty_recv = anyio.create_memory_object_stream[None](1)
        self._dream_send, self._dream_recv = anyio.create_memory_object_stream[None](1)
        self._dreams_running = 0
        if backend_factory is None:
            self.backend: LongTermBackend = FileLongTermBackend(
                layout, storage, config, summarizer, dirty=self._dirty_send
            )
        else:
            self.backend = backend_factory(self._dirty_send)
        self.store: EntryStore = self.backend.entries
        self.writer: SummaryStore = self.backend.summaries
        self.history: HistoryLog = self.backend.history
        # Chunks whose history record failed, oldest first (retried by the next compaction).
        self._unrecorded: list[tuple[ChunkEntry, str]] = []
        self.project_memory = ""

    @property
    def dream(self) -> DreamVersions:
        """Dream over the backend's long-term files (built on first use)."""
        return self.backend.dream()

    async def prepare(self) -> None:
        """Bring ``profile.md`` up to date and load the prompt layer (at open, before the tasks start)."""
        # A memory saved just before the last process exited may have missed the
        # debounced rebuild; the profile is rewritten here only if it changed.
        try:
            now = time.time()
            # Not for a store that never held a memory: an empty profile would only add a heading to every prompt.
            has_profile = await anyio.to_thread.run_sync(self.backend.has_profile)
            if has_profile or await self.store.entries(now=now):
                await self.store.rebuild_profile(now=now)
        except AidenError as exc:
            log.error("profile rebuild at open failed: %s", exc)
        await self.refresh()

    def background_tasks(self, idle_target: IdleTarget) -> list[Callable[..., Coroutine[Any, Any, None]]]:
        """The tasks the runtime starts in its task group: profile debouncer, AutoCompact, Dream schedule.

        Each takes ``task_status`` (for ``tg.start``); the task group stays the runtime's.
        """
        tasks: list[Callable[..., Coroutine[Any, Any, None]]] = [
            partial(run_profile_debouncer, self.store, self._dirty_recv, _PROFILE_DEBOUNCE_S)
        ]
        if self.config.idle_compact_after_minutes > 0:
            compactor = AutoCompactor(idle_target, self.config.idle_compact_after_minutes)
            tasks.append(partial(run_autocompact, compactor.check, _AUTOCOMPACT_TICK_S))
        if self.config.dream_interval_hours > 0:
            from aiden.longterm.dream import run_dream_schedule

            tasks.append(
                partial(
                    run_dream_schedule,
                    self.run_dream,
                    self.config.dream_interval_hours * 3600,
                    requests=self._dream_recv,
                )
            )
        return tasks

    def close_streams(self) -> None:
        """Close the internal streams (after the tasks ended)."""
        for stream in (self._dirty_send, self._dirty_recv, self._dream_send, self._dream_recv):
            stream.close()

    async def refresh(self) -> None:
        """Reload the long-term prompt layer (PROJECT MEMORY block + profile): at open and after rotation."""
        self.project_memory = await anyio.to_thread.run_sync(self.backend.load_layer, self.config)

    # --- hooks ------------------------------------------------------------------------------

    async def before_compaction(self, events: Sequence[SessionEvent]) -> None:
        """Merge the about-to-be-compacted region into the running summary (seed 004, step 2)."""
        await self.writer.merge_running_summary(events, now=time.time())

    async def after_compaction(self, entry: ChunkEntry, session_key: str) -> None:
        """Append the chunk summary to history.jsonl, Dream's source material (seed 003).

        A record that failed is kept and retried, in order, before the next one:
        Dream would otherwise never see that chunk. The chunk id makes a retry
        of a record that was written (its cursor update failed) land once.
        """
        self._unrecorded.append((entry, session_key))
        while self._unrecorded:
            await anyio.to_thread.run_sync(self._record, *self._unrecorded[0])
            self._unrecorded.pop(0)

    def _record(self, entry: ChunkEntry, session_key: str) -> None:
        self.history.append(entry.summary, session_key=session_key, now=time.time(), chunk_id=entry.chunk_id)

    async def session_ended(
        self,
        events: Sequence[SessionEvent],
        reason: str,
        *,
        summarizer_timeout_s: float | None = None,
    ) -> SummaryWrite | None:
        """Write the dated session summary; shielded so a cancelled caller cannot tear it.

        ``summarizer_timeout_s`` bounds the summarizer call (then the extractive fallback).
        """
        with anyio.CancelScope(shield=True):
            running = await anyio.to_thread.run_sync(self.backend.has_running_summary)
            if not events and not running:
                return None
            try:
                return await self.writer.write_session_summary(
                    events, now=time.time(), reason=reason, summarizer_timeout_s=summarizer_timeout_s
                )
            except AidenError as exc:
                log.error("session summary (%s) failed: %s", reason, exc)
                return None
        return None  # unreachable: the shielded scope never swallows

    @observed("dream")
    async def run_dream(self) -> DreamOutcome:
        """One Dream run now."""
        self._dreams_running += 1
        try:
            return await self.dream.run(now=time.time())
        finally:
            self._dreams_running -= 1

    @property
    def idle(self) -> bool:
        """No Dream run in progress or requested (an idle session's actors may park)."""
        return not self._dreams_running and self._dream_send.statistics().current_buffer_used == 0

    def request_dream(self) -> bool:
        """Ask the scheduled Dream task to run now (False if one is already requested)."""
        try:
            self._dream_send.send_nowait(None)
        except anyio.WouldBlock:
            return False
        return True


def select_long_term(store: SessionStore, config: Config, summarizer: Summarizer) -> BackendFactory | None:
    """The long-term ``backend_factory`` for a memory on ``store``; None: the files under its root.

    With a PostgreSQL store, long-term memory lives in the same database (shared by
    every memory of the store's ``long_term_namespace``, by default its session id):
    workers on shared session storage expect shared long-term memory (a saved memory,
    the history Dream folds, the session summaries of the PROJECT MEMORY block).
    """
    # A PostgresSessionStore instance means its module is loaded: looking there first keeps
    # psycopg out of every filesystem open.
    module = sys.modules.get("aiden.storage.postgres.store")
    if module is None or not isinstance(store, module.PostgresSessionStore):
        return None
    from aiden.longterm.postgres.backend import long_term_factory

    return long_term_factory(store, config, summarizer)

"""The file long-term backend (the default) and :func:`select_long_term`, which picks PostgreSQL's
for a memory on a PostgreSQL session store.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from anyio.streams.memory import MemoryObjectSendStream

from aiden.config import Config
from aiden.context.summary_fit import LongTermText
from aiden.longterm.backend import BackendFactory
from aiden.longterm.files import read_summary
from aiden.longterm.history import HistoryStore
from aiden.longterm.project import load_project_memory, with_profile
from aiden.longterm.store import LongTermMemoryStore
from aiden.longterm.writer import SessionSummaryWriter
from aiden.policy.triggers import fresh_session_budget
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore
from aiden.summarizers.protocol import Summarizer

if TYPE_CHECKING:
    from aiden.longterm.dream import DreamFlow

__all__ = ["BackendFactory", "FileLongTermBackend", "select_long_term"]


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
        self._summarizer = summarizer
        self.entries = LongTermMemoryStore(layout, storage, dirty=dirty)
        self.history = HistoryStore(layout, storage)
        self.summaries = SessionSummaryWriter(layout, storage, summarizer, config)
        self._dream: DreamFlow[Any] | None = None

    def dream(self) -> DreamFlow[Any]:
        """Dream over long_term/ (its git store, via dulwich, loads on first use)."""
        if self._dream is None:
            from aiden.longterm.dream import Dream, SummarizerDreamEditor

            # The configured summarizer (through the summarizer actor in a runtime: its
            # deadline and validation apply); the embedded extractive one by default.
            editor = SummarizerDreamEditor(self._summarizer)
            self._dream = Dream(self._layout, self._storage, self.history, editor=editor)
        return self._dream

    def has_profile(self) -> bool:
        """``long_term/profile.md`` exists."""
        return self.entries.profile_path.exists()

    def has_running_summary(self) -> bool:
        """``session/running_summary.md`` holds something."""
        return bool(read_bytes(self.summaries.running_path))

    def load_layer(self, config: Config) -> LongTermText:
        """The PROJECT MEMORY block from earlier sessions' summary files, then the profile of the saved
        memories (:func:`~aiden.longterm.project.with_profile`): the block within
        :func:`~aiden.policy.triggers.fresh_session_budget`, the profile within ``project_memory_budget``."""
        # Read here, not through the writer: its read marks which session/ a write-back goes to.
        running = read_summary(self.summaries.running_path, kind="running")
        block = load_project_memory(
            self._layout,
            config,
            current=running.session_id if running else "",
            budget_tokens=fresh_session_budget(config),
        )
        now = time.time()
        return with_profile(block, self.entries.entries_sync(now, None), config, now=now)


def select_long_term(store: SessionStore, config: Config, summarizer: Summarizer) -> BackendFactory | None:
    """The long-term ``backend_factory`` for a memory on ``store``; None: the files under its root.

    With a PostgreSQL store, long-term memory lives in the same database, shared by every memory of
    the store's ``long_term_namespace``: workers on shared session storage expect shared long-term memory.
    """
    # A PostgresSessionStore instance means its module is loaded: looking there first keeps
    # psycopg out of every filesystem open.
    module = sys.modules.get("aiden.storage.postgres.store")
    if module is None or not isinstance(store, module.PostgresSessionStore):
        return None
    from aiden.longterm.postgres.backend import long_term_factory

    return long_term_factory(store, config, summarizer)

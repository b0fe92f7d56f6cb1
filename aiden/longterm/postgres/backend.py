"""The PostgreSQL long-term backend: one memory's long-term state in the session store's database.

:class:`PostgresLongTermBackend` satisfies
:class:`~aiden.longterm.backend.LongTermBackend` with rows instead of the
files under ``memory/long_term/`` (tables: :mod:`aiden.longterm.postgres.schema`):
saved memories and the profile (:mod:`~aiden.longterm.postgres.entries`),
the history log with its cursors (:mod:`~aiden.longterm.postgres.history`),
the session summaries and digest (:mod:`~aiden.longterm.postgres.summaries`)
and Dream with its versions (:mod:`~aiden.longterm.postgres.dream`).

:func:`aiden.open_memory` on a :class:`~aiden.storage.postgres.PostgresSessionStore`
uses it (:func:`aiden.longterm.service.select_long_term` asks
:func:`long_term_factory`), on the store's own pool. Every memory opened
with the same long-term namespace (the store's ``long_term_namespace``,
by default its session id) shares this long-term memory, in any number of
worker processes and machines, with the guarantees listed in
:mod:`aiden.longterm.backend`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anyio.streams.memory import MemoryObjectSendStream

from aiden.config import Config
from aiden.longterm.backend import DreamVersions, EntryStore, HistoryLog, SummaryStore
from aiden.longterm.postgres.entries import PROFILE_DOC, PgEntryStore
from aiden.longterm.postgres.history import PgHistoryLog
from aiden.longterm.postgres.schema import LongTermDb
from aiden.longterm.postgres.summaries import DIGEST_DOC, PgSummaryStore, read_doc, session_summaries
from aiden.longterm.project import render_project_memory
from aiden.longterm.summaries import parse_summary_md
from aiden.policy.tokens import estimate_tokens
from aiden.storage.postgres.store import PostgresSessionStore
from aiden.summarizers.protocol import Summarizer

if TYPE_CHECKING:
    from aiden.longterm.backend import BackendFactory

__all__ = ["PostgresLongTermBackend", "long_term_factory"]


class PostgresLongTermBackend:
    """The long-term memory of ``store.long_term_namespace``, on ``store``'s pool (a LongTermBackend).

    ``summarizer`` extracts session summaries and words Dream's edits (as on
    the file backend); ``dirty`` is the profile debouncer's signal stream. Nothing is
    opened here: the tables are created on first use.
    """

    def __init__(
        self,
        store: PostgresSessionStore,
        config: Config,
        summarizer: Summarizer,
        dirty: MemoryObjectSendStream[None] | None = None,
    ) -> None:
        self._db = LongTermDb(store.pool, store.long_term_namespace, store.session_id, store.ensure_ready)
        self._config = config
        self._summarizer = summarizer
        self._entries = PgEntryStore(self._db, dirty=dirty)
        self._history = PgHistoryLog(self._db)
        self._summaries = PgSummaryStore(self._db, summarizer, config)
        self._dream: DreamVersions | None = None

    @property
    def namespace(self) -> str:
        """Whose long-term memory this is (shared by every memory opened with it)."""
        return self._db.namespace

    @property
    def entries(self) -> EntryStore:
        """``aiden_lt_entries`` (and the profile document)."""
        return self._entries

    @property
    def history(self) -> HistoryLog:
        """``aiden_lt_history`` with the cursors of ``aiden_lt_state``."""
        return self._history

    @property
    def summaries(self) -> SummaryStore:
        """The running summary, the dated session summaries and the digest."""
        return self._summaries

    def dream(self) -> DreamVersions:
        """Dream over this namespace, its versions in ``aiden_lt_versions`` (built on first use)."""
        if self._dream is None:
            from aiden.longterm.dream import SummarizerDreamEditor
            from aiden.longterm.postgres.dream import PgDream

            # The configured summarizer words the edits, as on the file backend.
            editor = SummarizerDreamEditor(self._summarizer)
            self._dream = PgDream(self._db, editor=editor, lock_timeout_s=self._config.lock_timeout_s)
        return self._dream

    def has_profile(self) -> bool:
        """True when a profile was ever rendered (blocking)."""
        with self._db.connection("reading the profile") as conn:
            return read_doc(conn, self._db.namespace, PROFILE_DOC) is not None

    def has_running_summary(self) -> bool:
        """True when the active session has a running summary (blocking)."""
        return self._summaries.running() is not None

    def load_layer(self, config: Config) -> str:
        """The PROJECT MEMORY block (latest session summaries over the digest), then the profile (blocking)."""
        ns = self._db.namespace
        with self._db.connection("loading long-term memory") as conn:
            summaries = session_summaries(conn, ns, config.project_memory_sessions)
            digest_text = read_doc(conn, ns, DIGEST_DOC)
            profile = read_doc(conn, ns, PROFILE_DOC) or ""
        digest = None if digest_text is None else parse_summary_md(digest_text, kind="digest")
        block = render_project_memory(
            summaries, digest, budget_tokens=config.project_memory_budget(), estimate=estimate_tokens
        )
        return "\n\n".join(p for p in (block.strip(), profile.strip()) if p)


def long_term_factory(store: PostgresSessionStore, config: Config, summarizer: Summarizer) -> BackendFactory:
    """The ``backend_factory`` of :class:`~aiden.longterm.service.LongTermServices` for a memory on ``store``."""

    def make(dirty: MemoryObjectSendStream[None]) -> PostgresLongTermBackend:
        return PostgresLongTermBackend(store, config, summarizer, dirty)

    return make

"""The PostgreSQL long-term backend: one namespace's long-term state in the session store's database.

Every memory opened with the same ``long_term_namespace`` shares it, on any worker or machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec
from anyio.streams.memory import MemoryObjectSendStream

from aiden.config import Config
from aiden.context.summary_fit import LongTermText
from aiden.errors import CorruptionError, StorageError
from aiden.longterm.entries import MEMORY_TYPES, MemoryEntry, MemoryType
from aiden.longterm.postgres.history import PgHistoryLog
from aiden.longterm.postgres.schema import LongTermDb
from aiden.longterm.project import project_memory_block, with_profile
from aiden.longterm.store import LOCK_TIMEOUT_S, ThreadedEntryStore, render_profile
from aiden.longterm.summaries import SessionSummary, parse_summary_md, render_summary_md
from aiden.longterm.writer import CapResult, SummaryFlow, SummaryRows, cap_digest, session_stem
from aiden.policy.triggers import fresh_session_budget
from aiden.storage.postgres.schema import Conn, text_value
from aiden.storage.postgres.store import PostgresSessionStore
from aiden.summarizers.protocol import Summarizer

if TYPE_CHECKING:
    from aiden.longterm.backend import BackendFactory
    from aiden.longterm.dream import DreamFlow

__all__ = [
    "DIGEST_DOC",
    "PROFILE_DOC",
    "PgEntryStore",
    "PgSummaryStore",
    "PostgresLongTermBackend",
    "long_term_factory",
]


PROFILE_DOC: Final = "profile.md"
"""The ``aiden_lt_docs`` name of the rendered profile."""

_UPSERT: Final = """
INSERT INTO aiden_lt_entries (namespace, id, type, title, content, created_at, expires_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (namespace, id) DO UPDATE SET
    saved = nextval('aiden_lt_entry_order'), type = EXCLUDED.type, title = EXCLUDED.title,
    content = EXCLUDED.content, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
"""

# "Unexpired" is expires_at > now: an entry is expired from the instant now reaches expires_at.
_ACTIVE: Final = """
SELECT id, type, title, content, created_at, expires_at FROM aiden_lt_entries
WHERE namespace = %s AND (expires_at IS NULL OR expires_at > %s)
  AND (%s::text[] IS NULL OR type = ANY(%s::text[]))
ORDER BY saved
"""

_ONE: Final = """
SELECT id, type, title, content, created_at, expires_at FROM aiden_lt_entries
WHERE namespace = %s AND id = %s AND (expires_at IS NULL OR expires_at > %s)
"""

Row = tuple[object, ...]


def _entry(row: Row) -> MemoryEntry:
    kind = str(row[1])
    if kind not in MEMORY_TYPES:
        raise CorruptionError(f"postgres: memory {row[0]!r} has an unknown type {kind!r}")
    expires = row[5]
    return MemoryEntry(
        id=str(row[0]),
        type=cast(MemoryType, kind),
        title=str(row[2]),
        content=str(row[3]),
        created_at=float(cast(float, row[4])),
        expires_at=None if expires is None else float(cast(float, expires)),
    )


class PgEntryStore(ThreadedEntryStore):
    """The saved memories of one namespace, a row each (a save is an upsert, a forget a delete).

    The profile is rendered as ``profile.md`` is and stored as a document; a rebuild waits for another
    worker's as long as the file store's entry lock does (then :class:`~aiden.errors.LockError`).
    """

    def __init__(self, db: LongTermDb, *, dirty: MemoryObjectSendStream[None] | None = None) -> None:
        super().__init__(dirty=dirty)
        self._db = db

    # --- blocking ------------------------------------------------------------------------
    def _save_sync(self, entry: MemoryEntry) -> None:
        with self._db.connection("saving a memory") as conn:
            # MemoryEntry's fields are in the order of the statement's columns.
            conn.execute(_UPSERT, (self._db.namespace, *msgspec.structs.astuple(entry)))

    def _forget_sync(self, memory_id: str) -> bool:
        with self._db.connection("forgetting a memory") as conn:
            row = conn.execute(
                "DELETE FROM aiden_lt_entries WHERE namespace = %s AND id = %s RETURNING id",
                (self._db.namespace, memory_id),
            ).fetchone()
        return row is not None

    def _get_sync(self, memory_id: str, now: float) -> MemoryEntry | None:
        with self._db.connection("reading a memory") as conn:
            row = conn.execute(_ONE, (self._db.namespace, memory_id, now)).fetchone()
        return None if row is None else _entry(row)

    @staticmethod
    def _active(conn: Conn, namespace: str, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
        wanted = None if types is None else list(types)
        rows = conn.execute(_ACTIVE, (namespace, now, wanted, wanted)).fetchall()
        return [_entry(row) for row in rows]

    def entries_sync(self, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
        with self._db.connection("reading memories") as conn:
            return self._active(conn, self._db.namespace, now, types)

    def _rebuild_profile_sync(self, now: float) -> bool:
        ns = self._db.namespace
        with self._db.connection("rebuilding the profile") as conn, conn.transaction():
            # Serialized per namespace: the profile written is the rendering of the entries read.
            self._db.serialize(conn, "profile", LOCK_TIMEOUT_S)
            text = render_profile(self._active(conn, ns, now, None), now=now)
            if read_doc(conn, ns, PROFILE_DOC) == text:
                return False
            _write_doc(conn, ns, PROFILE_DOC, text)
            return True


DIGEST_DOC: Final = "digest.md"
"""The ``aiden_lt_docs`` name of the rolling project digest."""

def read_doc(conn: Conn, namespace: str, name: str) -> str | None:
    """The document ``name`` (``profile.md``, ``digest.md``) of ``namespace``; None if never written."""
    row = conn.execute(
        "SELECT body FROM aiden_lt_docs WHERE namespace = %s AND name = %s", (namespace, name)
    ).fetchone()
    return None if row is None else str(row[0])


def _write_doc(conn: Conn, namespace: str, name: str, body: str) -> None:
    conn.execute(
        "INSERT INTO aiden_lt_docs (namespace, name, body) VALUES (%s, %s, %s)"
        " ON CONFLICT (namespace, name) DO UPDATE SET body = EXCLUDED.body",
        (namespace, name, body),
    )


class PgSummaryStore(SummaryFlow):
    """The running summary, session summaries and digest of one namespace (one instance per runtime).

    Each read-merge-write is one transaction under the namespace's ``summaries`` advisory lock.
    A write's ``path`` is a locator, ``postgres:<namespace>/sessions/<stem>.md``: no file is written.
    """

    def __init__(self, db: LongTermDb, summarizer: Summarizer, config: Config) -> None:
        super().__init__(summarizer, config)
        self._db = db

    def running(self) -> SessionSummary | None:
        """The active session's running summary (blocking)."""
        with self._db.connection("reading the running summary") as conn:
            return _PgRows(conn, self._db, self._config).read_running()

    @contextmanager
    def _locked(self, what: str) -> Iterator[SummaryRows]:
        # One transaction under the advisory lock: it excludes every other transaction's, this
        # runtime's merge included, so a write beside one needs nothing more.
        with self._db.connection(what) as conn, conn.transaction():
            self._db.serialize(conn, "summaries", self._config.lock_timeout_s)
            yield _PgRows(conn, self._db, self._config)


class _PgRows:
    """:class:`SummaryRows` inside one transaction."""

    def __init__(self, conn: Conn, db: LongTermDb, config: Config) -> None:
        self._conn = conn
        self._db = db
        self._config = config
        self._generation: str | None = None

    def _pinned(self) -> str:
        # Read once per transaction: under read committed, another worker's rotation between the read
        # and the write would otherwise hand this session's running summary to the next session.
        if self._generation is None:
            row = self._conn.execute(
                "SELECT generation FROM aiden_sessions WHERE session_id = %s", (self._db.session_id,)
            ).fetchone()
            if row is None:
                raise StorageError(f"postgres: session {self._db.session_id!r} has no row")
            self._generation = str(row[0])
        return self._generation

    def read_running(self) -> SessionSummary | None:
        row = self._conn.execute(
            "SELECT body FROM aiden_lt_running WHERE generation = %s", (self._pinned(),)
        ).fetchone()
        return None if row is None else parse_summary_md(str(row[0]), kind="running")

    def write_running(self, summary: SessionSummary) -> None:
        self._conn.execute(
            "INSERT INTO aiden_lt_running (generation, body) VALUES (%s, %s)"
            " ON CONFLICT (generation) DO UPDATE SET body = EXCLUDED.body",
            (self._pinned(), text_value(render_summary_md(summary))),
        )

    def write_session(self, running: SessionSummary, final: SessionSummary) -> str:
        """Stored as ``postgres:<namespace>/sessions/<stem>.md`` (a locator: no file is written)."""
        ns = self._db.namespace
        self.write_running(running)
        stems = self._conn.execute(
            "SELECT stem FROM aiden_lt_session_summaries WHERE namespace = %s", (ns,)
        ).fetchall()
        text = read_doc(self._conn, ns, DIGEST_DOC)
        through = "" if text is None else parse_summary_md(text, kind="digest").through
        stem = session_stem(
            (str(row[0]) for row in stems), through=through, session_id=final.session_id, stamp=final.created_at
        )
        self._conn.execute(
            "INSERT INTO aiden_lt_session_summaries (namespace, stem, summary_id, body) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (namespace, stem) DO UPDATE SET body = EXCLUDED.body",
            (ns, stem, final.session_id, text_value(render_summary_md(final))),
        )
        # The session's summary moved to a newer stem: its older row goes, as on files.
        self._conn.execute(
            "DELETE FROM aiden_lt_session_summaries WHERE namespace = %s AND summary_id = %s AND stem <> %s",
            (ns, final.session_id, stem),
        )
        return f"postgres:{ns}/sessions/{stem}.md"

    def enforce_cap(self, now: int) -> CapResult:
        """The file store's cap (:func:`~aiden.longterm.writer.cap_digest`) in the write's transaction."""
        ns = self._db.namespace
        rows = self._conn.execute(
            "SELECT stem, body FROM aiden_lt_session_summaries WHERE namespace = %s", (ns,)
        ).fetchall()
        bodies = {str(stem): str(body) for stem, body in rows}
        text = read_doc(self._conn, ns, DIGEST_DOC)
        cap, digest = cap_digest(
            bodies,
            None if text is None else parse_summary_md(text, kind="digest"),
            lambda stem: parse_summary_md(bodies[stem], kind="session"),
            keep=self._config.session_summaries_keep,
            now=now,
        )
        if digest is not None:
            _write_doc(self._conn, ns, DIGEST_DOC, render_summary_md(digest))
        if cap.deleted:
            self._conn.execute(
                "DELETE FROM aiden_lt_session_summaries WHERE namespace = %s AND stem = ANY(%s::text[])",
                (ns, list(cap.deleted)),
            )
        return cap


class PostgresLongTermBackend:
    """The long-term memory of ``store.long_term_namespace``, on ``store``'s pool.

    Nothing is opened here: the tables are created on first use.
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
        self.entries = PgEntryStore(self._db, dirty=dirty)
        self.history = PgHistoryLog(self._db)
        self.summaries = PgSummaryStore(self._db, summarizer, config)
        self._dream: DreamFlow[Any] | None = None

    @property
    def namespace(self) -> str:
        """Whose long-term memory this is (shared by every memory opened with it)."""
        return self._db.namespace

    def dream(self) -> DreamFlow[Any]:
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
        return self.summaries.running() is not None

    def load_layer(self, config: Config) -> LongTermText:
        """The PROJECT MEMORY block (the kept summaries of other sessions over the digest), then the profile
        of the saved memories (:func:`~aiden.longterm.project.with_profile`; blocking): the block within
        :func:`~aiden.policy.triggers.fresh_session_budget`, the profile within ``project_memory_budget``."""
        ns = self._db.namespace
        now = time.time()
        with self._db.connection("loading long-term memory") as conn:
            # Not this session's own summary (a checkpoint or close writes it mid-session), as on files.
            running = _PgRows(conn, self._db, config).read_running()
            kept = conn.execute(
                "SELECT body FROM aiden_lt_session_summaries WHERE namespace = %s AND summary_id <> %s"
                " ORDER BY stem",
                (ns, running.session_id if running else ""),
            ).fetchall()
            digest_text = read_doc(conn, ns, DIGEST_DOC)
            entries = PgEntryStore._active(conn, ns, now, None)
        summaries = [parse_summary_md(str(row[0]), kind="session") for row in kept]
        digest = None if digest_text is None else parse_summary_md(digest_text, kind="digest")
        block = project_memory_block(summaries, digest, config, budget_tokens=fresh_session_budget(config))
        return with_profile(block, entries, config, now=now)


def long_term_factory(store: PostgresSessionStore, config: Config, summarizer: Summarizer) -> BackendFactory:
    """The long-term actor's ``backend_factory`` for a memory on ``store``."""

    return partial(PostgresLongTermBackend, store, config, summarizer)

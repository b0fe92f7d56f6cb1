"""The long-term tables (schema component ``long_term``) and the connection helper they share.

Created on first use. Every row carries its *namespace*, except the running summary, keyed by
session *generation* (an archived generation keeps its row, as the file store's archive does).
Every statement is a constant: values only ever travel as parameters.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Final

from aiden.storage.postgres.schema import Conn, Pool, ensure_component, translated

__all__ = ["LONG_TERM_VERSION", "LongTermDb", "bounded_wait"]

LONG_TERM_VERSION: Final = 1
"""The long-term layout this code reads and writes; a database marked newer is refused."""

_COMPONENT: Final = "long_term"

_DDL: Final[tuple[str, ...]] = (
    """CREATE TABLE IF NOT EXISTS aiden_lt_state (
        namespace text PRIMARY KEY,
        last_cursor bigint NOT NULL DEFAULT 0,
        dream_cursor bigint NOT NULL DEFAULT 0
    )""",
    "CREATE SEQUENCE IF NOT EXISTS aiden_lt_entry_order",
    """CREATE TABLE IF NOT EXISTS aiden_lt_entries (
        namespace text NOT NULL,
        id text NOT NULL,
        saved bigint NOT NULL DEFAULT nextval('aiden_lt_entry_order'),
        type text NOT NULL,
        title text NOT NULL,
        content text NOT NULL,
        created_at double precision NOT NULL,
        expires_at double precision,
        PRIMARY KEY (namespace, id)
    )""",
    "CREATE INDEX IF NOT EXISTS aiden_lt_entries_saved ON aiden_lt_entries (namespace, saved)",
    """CREATE TABLE IF NOT EXISTS aiden_lt_history (
        namespace text NOT NULL,
        pos bigint NOT NULL,
        stamp text NOT NULL,
        content text NOT NULL,
        session_key text NOT NULL,
        chunk_id text NOT NULL,
        PRIMARY KEY (namespace, pos)
    )""",
    """CREATE UNIQUE INDEX IF NOT EXISTS aiden_lt_history_chunk
        ON aiden_lt_history (namespace, chunk_id) WHERE chunk_id <> ''""",
    """CREATE TABLE IF NOT EXISTS aiden_lt_docs (
        namespace text NOT NULL,
        name text NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (namespace, name)
    )""",
    """CREATE TABLE IF NOT EXISTS aiden_lt_session_summaries (
        namespace text NOT NULL,
        stem text NOT NULL,
        summary_id text NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (namespace, stem)
    )""",
    """CREATE TABLE IF NOT EXISTS aiden_lt_running (
        generation text PRIMARY KEY,
        body text NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS aiden_lt_versions (
        namespace text NOT NULL,
        pos bigint NOT NULL,
        commit_id text NOT NULL,
        created_at bigint NOT NULL,
        message text NOT NULL,
        files bytea NOT NULL,
        PRIMARY KEY (namespace, pos),
        UNIQUE (namespace, commit_id)
    )""",
)


def _create_state(conn: Conn, namespace: str) -> None:
    with translated("creating the long-term state"):
        conn.execute("INSERT INTO aiden_lt_state (namespace) VALUES (%s) ON CONFLICT DO NOTHING", (namespace,))


class LongTermDb:
    """One namespace's rows of a schema component (long-term's by default), on the session store's pool.

    The ``component``'s tables (name, version, DDL) are made on first use, then ``on_create`` runs
    (long-term's: the namespace's state row). ``ready`` ensures the session store's schema and session
    row: the running summary hangs off its generation.
    """

    def __init__(
        self,
        pool: Pool,
        namespace: str,
        session_id: str,
        ready: Callable[[], None],
        component: tuple[str, int, Sequence[str]] = (_COMPONENT, LONG_TERM_VERSION, _DDL),
        on_create: Callable[[Conn, str], None] | None = _create_state,
    ) -> None:
        self.pool = pool
        self.namespace = namespace
        self.session_id = session_id
        self._ready_hook = ready
        self._component = component
        self._on_create = on_create
        self._ready = False
        self._ready_lock = threading.Lock()

    def ensure_ready(self) -> None:
        """Create the component's tables (and run ``on_create``) if missing (once per object)."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            self._ready_hook()
            with translated("connecting"), self.pool.connection() as conn:
                ensure_component(conn, *self._component)
                if self._on_create is not None:
                    self._on_create(conn, self.namespace)
            self._ready = True

    @contextmanager
    def connection(self, what: str) -> Iterator[Conn]:
        """A pooled connection with psycopg's errors translated (``what`` names the operation)."""
        self.ensure_ready()
        with translated(what), self.pool.connection() as conn:
            yield conn

    def lock_key(self, what: str) -> str:
        """The advisory lock key of ``what`` ("dream", "summaries", ...) in this namespace."""
        return f"aiden.long_term.{what}:{self.namespace}"

    def serialize(self, conn: Conn, what: str, timeout_s: float) -> None:
        """Inside a transaction: wait up to ``timeout_s`` (then LockError) for the lock of ``what``, held to the transaction's end."""
        bounded_wait(conn, timeout_s)
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self.lock_key(what),))


def bounded_wait(conn: Conn, timeout_s: float) -> None:
    """Inside a transaction: any lock it waits for after this fails after ``timeout_s`` (LockError)."""
    conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(timeout_s * 1000))}ms",))

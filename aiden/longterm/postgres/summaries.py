"""The durable session summaries in PostgreSQL (a :class:`~aiden.longterm.backend.SummaryStore`).

The three writers of :class:`~aiden.longterm.writer.SummaryFlow` (shared with
the file store, with its merge rules and its wait at close) and the same
Markdown (:func:`~aiden.longterm.summaries.render_summary_md`), stored as rows:

- the running summary: ``aiden_lt_running``, keyed by the session's
  generation (a rotation starts the next session without one). The row of an
  archived generation is kept, as the file store keeps
  ``session_archive/<id>/running_summary.md`` (rotation moves it there): it
  is that session's running summary, reachable by its closed id through
  ``aiden_archives``, and nothing deletes an archived session in either store;
- the dated session summaries: ``aiden_lt_session_summaries``, one per stem
  ``<YYYYMMDDTHHMMSSZ>-<summary id>`` (the file store's file name);
- the digest: the ``digest.md`` document.

Extraction (a summarizer call) runs outside any transaction; each
read-merge-write then runs in one transaction holding the namespace's
``summaries`` advisory lock (waiting at most ``config.lock_timeout_s``, then
:class:`~aiden.errors.LockError`): a running-summary merge, and a session
write with its running summary and the store cap (oldest summaries into the
digest), each commit whole or not at all. A write's ``path`` is a locator,
``postgres:<namespace>/sessions/<stem>.md``: no file is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from aiden.config import Config
from aiden.errors import StorageError
from aiden.longterm.cap import CapResult, folded_digest, plan_cap
from aiden.longterm.files import session_file_name
from aiden.longterm.merge import DEFAULT_MAX_ITEMS
from aiden.longterm.postgres.schema import LongTermDb
from aiden.longterm.summaries import SessionSummary, parse_summary_md, render_summary_md
from aiden.longterm.writer import SummaryFlow, SummaryRows
from aiden.storage.postgres.schema import Conn
from aiden.summarizers.protocol import Summarizer

__all__ = ["DIGEST_DOC", "PgSummaryStore", "read_running", "session_summaries"]

DIGEST_DOC: Final = "digest.md"
"""The ``aiden_lt_docs`` name of the rolling project digest."""

_RUNNING: Final = """
SELECT r.body FROM aiden_sessions s JOIN aiden_lt_running r ON r.generation = s.generation
WHERE s.session_id = %s
"""


def read_running(conn: Conn, session_id: str) -> SessionSummary | None:
    """The running summary of ``session_id``'s current generation (None: none yet)."""
    row = conn.execute(_RUNNING, (session_id,)).fetchone()
    return None if row is None else parse_summary_md(str(row[0]), kind="running")


def session_summaries(conn: Conn, namespace: str, newest: int) -> list[SessionSummary]:
    """The ``newest`` dated session summaries of ``namespace``, oldest first."""
    rows = conn.execute(
        "SELECT body FROM aiden_lt_session_summaries WHERE namespace = %s ORDER BY stem DESC LIMIT %s",
        (namespace, newest),
    ).fetchall()
    return [parse_summary_md(str(row[0]), kind="session") for row in reversed(rows)]


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
    """The running summary, session summaries and digest of one namespace (one instance per runtime)."""

    def __init__(
        self,
        db: LongTermDb,
        summarizer: Summarizer,
        config: Config,
        *,
        use_fallback: bool = True,
        max_items: int = DEFAULT_MAX_ITEMS,
    ) -> None:
        super().__init__(summarizer, config, use_fallback=use_fallback, max_items=max_items)
        self._db = db

    def running(self) -> SessionSummary | None:
        """The active session's running summary (blocking)."""
        with self._db.connection("reading the running summary") as conn:
            return read_running(conn, self._db.session_id)

    @contextmanager
    def _locked(self, what: str, *, beside: bool = False) -> Iterator[SummaryRows]:
        # One transaction under the advisory lock: it excludes every other transaction's, this
        # runtime's merge included, so a write ``beside`` one needs nothing more.
        with self._db.connection(what) as conn, conn.transaction():
            self._db.serialize(conn, "summaries", self._config.lock_timeout_s)
            yield _PgRows(conn, self._db, self._config, self._max_items)


class _PgRows:
    """:class:`SummaryRows` inside one transaction."""

    def __init__(self, conn: Conn, db: LongTermDb, config: Config, max_items: int) -> None:
        self._conn = conn
        self._db = db
        self._config = config
        self._max_items = max_items
        self._generation: str | None = None

    def _pinned(self) -> str:
        # The generation is read once per transaction: each statement of a read-committed
        # transaction sees the latest commit, so a rotation by another worker between the read
        # and the write would otherwise hand this session's running summary (and with it its
        # dated summary's id) to the next session. Written after such a rotation, it stays with
        # the archived generation, as the file store's rotation takes running_summary.md along.
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
            (self._pinned(), render_summary_md(summary)),
        )

    def write_session(self, running: SessionSummary, final: SessionSummary) -> str:
        """Stored as ``postgres:<namespace>/sessions/<stem>.md`` (a locator: no file is written)."""
        ns = self._db.namespace
        self.write_running(running)
        known = self._conn.execute(
            "SELECT stem FROM aiden_lt_session_summaries WHERE namespace = %s AND summary_id = %s",
            (ns, final.session_id),
        ).fetchone()
        stem = (
            str(known[0])
            if known is not None
            else session_file_name(running.created_at, final.session_id)[:-3]
        )
        self._conn.execute(
            "INSERT INTO aiden_lt_session_summaries (namespace, stem, summary_id, body) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (namespace, stem) DO UPDATE SET body = EXCLUDED.body",
            (ns, stem, final.session_id, render_summary_md(final)),
        )
        return f"postgres:{ns}/sessions/{stem}.md"

    def enforce_cap(self, now: int) -> CapResult:
        """The file store's cap (:func:`~aiden.longterm.cap.plan_cap`), inside the write's transaction."""
        ns = self._db.namespace
        rows = self._conn.execute(
            "SELECT stem, body FROM aiden_lt_session_summaries WHERE namespace = %s", (ns,)
        ).fetchall()
        bodies = {str(stem): str(body) for stem, body in rows}
        text = read_doc(self._conn, ns, DIGEST_DOC)
        digest = (
            parse_summary_md(text, kind="digest")
            if text is not None
            else SessionSummary(kind="digest", session_id="digest")
        )
        plan = plan_cap(list(bodies), keep=self._config.session_summaries_keep, through=digest.through)
        if not plan.merge and not plan.delete_only:
            return CapResult()
        if plan.merge:
            summaries = [parse_summary_md(bodies[stem], kind="session") for stem in plan.merge]
            digest = folded_digest(
                digest, summaries, through=plan.merge[-1], now=now, max_items=self._max_items
            )
            _write_doc(self._conn, ns, DIGEST_DOC, render_summary_md(digest))
        deleted = sorted((*plan.delete_only, *plan.merge))
        self._conn.execute(
            "DELETE FROM aiden_lt_session_summaries WHERE namespace = %s AND stem = ANY(%s::text[])",
            (ns, deleted),
        )
        return CapResult(merged=plan.merge, deleted=tuple(deleted), digest_written=bool(plan.merge))

"""The durable session summaries in PostgreSQL (a :class:`~aiden.longterm.backend.SummaryStore`).

The same three writers as :class:`~aiden.longterm.writer.SessionSummaryWriter`
with the same merge logic (:func:`~aiden.longterm.writer.merged_running`,
:func:`~aiden.longterm.writer.session_ending`) and the same Markdown
(:func:`~aiden.longterm.summaries.render_summary_md`), stored as rows:

- the running summary: ``aiden_lt_running``, keyed by the session's current
  generation (a rotation starts the next session without one);
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

from collections.abc import Sequence
from typing import Final

import anyio
import msgspec

from aiden.config import Config
from aiden.errors import StorageError
from aiden.events import SessionEvent
from aiden.longterm.cap import CapResult, plan_cap
from aiden.longterm.files import session_file_name
from aiden.longterm.merge import DEFAULT_MAX_ITEMS, merge_summaries
from aiden.longterm.summaries import SessionSummary, parse_summary_md, render_summary_md
from aiden.longterm.writer import SummaryWrite, extract_summary, merged_running, session_ending
from aiden.storage.postgres.lt_schema import LongTermDb
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


class PgSummaryStore:
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
        self._db = db
        self._summarizer = summarizer
        self._config = config
        self._use_fallback = use_fallback
        self._max_items = max_items
        # Orders this runtime's writers; the advisory lock orders them against other workers.
        self._lock = anyio.Lock()

    def locator(self, stem: str) -> str:
        """What a :class:`SummaryWrite` names as its ``path`` for the session summary ``stem``."""
        return f"postgres:{self._db.namespace}/sessions/{stem}.md"

    def running(self) -> SessionSummary | None:
        """The active session's running summary (blocking)."""
        with self._db.connection("reading the running summary") as conn:
            return read_running(conn, self._db.session_id)

    async def _extract(
        self, events: Sequence[SessionEvent], summarizer_timeout_s: float | None = None
    ) -> tuple[SessionSummary, bool]:
        return await extract_summary(
            self._summarizer,
            self._config,
            events,
            use_fallback=self._use_fallback,
            summarizer_timeout_s=summarizer_timeout_s,
        )

    # --- SummaryStore --------------------------------------------------------------------
    async def merge_running_summary(self, events: Sequence[SessionEvent], *, now: float) -> SessionSummary:
        """Before a compaction: merge the findings of ``events`` into the running summary.

        Events at or below its ``through_seq`` were merged already (a retried
        compaction, possibly by another worker) and are skipped.
        """
        async with self._lock:
            current = await anyio.to_thread.run_sync(self.running)
            through = current.through_seq if current is not None else 0
            found, _ = await self._extract([e for e in events if e.seq > through or e.seq == 0])
            top = max((e.seq for e in events), default=0)
            return await anyio.to_thread.run_sync(self._merge_running, found, top, int(now))

    async def write_session_summary(
        self,
        events: Sequence[SessionEvent],
        *,
        now: float,
        reason: str = "completion",
        summarizer_timeout_s: float | None = None,
    ) -> SummaryWrite:
        """At session end: running summary + extraction of ``events`` -> the session's durable summary."""
        async with self._lock:
            found, degraded = await self._extract(events, summarizer_timeout_s)
            return await anyio.to_thread.run_sync(
                self._write_session, found, [e.seq for e in events], int(now), reason, degraded
            )

    async def checkpoint(self, events: Sequence[SessionEvent], *, now: float) -> SummaryWrite:
        """Force the durable summary now, mid-session."""
        return await self.write_session_summary(events, now=now, reason="checkpoint")

    # --- one transaction each ------------------------------------------------------------
    def _merge_running(self, found: SessionSummary, top: int, stamp: int) -> SessionSummary:
        with self._db.connection("merging the running summary") as conn, conn.transaction():
            self._db.serialize(conn, "summaries", self._config.lock_timeout_s)
            current = read_running(conn, self._db.session_id)  # again: another worker may have merged
            merged = merged_running(current, found, top=top, stamp=stamp, max_items=self._max_items)
            self._write_running(conn, merged)
            return merged

    def _write_running(self, conn: Conn, summary: SessionSummary) -> None:
        row = conn.execute(
            "SELECT generation FROM aiden_sessions WHERE session_id = %s", (self._db.session_id,)
        ).fetchone()
        if row is None:
            raise StorageError(f"postgres: session {self._db.session_id!r} has no row")
        conn.execute(
            "INSERT INTO aiden_lt_running (generation, body) VALUES (%s, %s)"
            " ON CONFLICT (generation) DO UPDATE SET body = EXCLUDED.body",
            (row[0], render_summary_md(summary)),
        )

    def _write_session(
        self, found: SessionSummary, seqs: Sequence[int], stamp: int, reason: str, degraded: bool
    ) -> SummaryWrite:
        ns = self._db.namespace
        with self._db.connection("writing the session summary") as conn, conn.transaction():
            self._db.serialize(conn, "summaries", self._config.lock_timeout_s)
            running, final = session_ending(
                read_running(conn, self._db.session_id),
                found,
                seqs=seqs,
                stamp=stamp,
                max_items=self._max_items,
            )
            if final is None:
                return SummaryWrite(path=None, summary=running, reason=reason, degraded=degraded)
            # The running summary first, as the file store does (the session summary derives from it).
            self._write_running(conn, running)
            known = conn.execute(
                "SELECT stem FROM aiden_lt_session_summaries WHERE namespace = %s AND summary_id = %s",
                (ns, final.session_id),
            ).fetchone()
            stem = (
                str(known[0])
                if known is not None
                else session_file_name(running.created_at, final.session_id)[:-3]
            )
            conn.execute(
                "INSERT INTO aiden_lt_session_summaries (namespace, stem, summary_id, body) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (namespace, stem) DO UPDATE SET body = EXCLUDED.body",
                (ns, stem, final.session_id, render_summary_md(final)),
            )
            cap = self._enforce_cap(conn, stamp)
            return SummaryWrite(
                path=self.locator(stem), summary=final, reason=reason, degraded=degraded, cap=cap
            )

    def _enforce_cap(self, conn: Conn, now: int) -> CapResult:
        """The file store's cap (:func:`~aiden.longterm.cap.plan_cap`), inside the write's transaction."""
        ns = self._db.namespace
        rows = conn.execute(
            "SELECT stem, body FROM aiden_lt_session_summaries WHERE namespace = %s", (ns,)
        ).fetchall()
        bodies = {str(stem): str(body) for stem, body in rows}
        text = read_doc(conn, ns, DIGEST_DOC)
        digest = (
            parse_summary_md(text, kind="digest")
            if text is not None
            else SessionSummary(kind="digest", session_id="digest")
        )
        plan = plan_cap(list(bodies), keep=self._config.session_summaries_keep, through=digest.through)
        if not plan.merge and not plan.delete_only:
            return CapResult()
        if plan.merge:
            for stem in plan.merge:  # oldest first: later summaries win conflicts
                summary = parse_summary_md(bodies[stem], kind="session")
                digest = merge_summaries(digest, summary, max_items=self._max_items)
            digest = msgspec.structs.replace(
                digest,
                kind="digest",
                session_id="digest",
                created_at=now,
                through=plan.merge[-1],
                through_seq=0,
            )
            _write_doc(conn, ns, DIGEST_DOC, render_summary_md(digest))
        deleted = sorted((*plan.delete_only, *plan.merge))
        conn.execute(
            "DELETE FROM aiden_lt_session_summaries WHERE namespace = %s AND stem = ANY(%s::text[])",
            (ns, deleted),
        )
        return CapResult(merged=plan.merge, deleted=tuple(deleted), digest_written=bool(plan.merge))

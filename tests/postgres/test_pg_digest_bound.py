"""As on files (tests/longterm/test_project_memory_digest.py): the digest is bounded by its size on
PostgreSQL too, and the two backends keep the same digest of the same sessions.

The file store reads a summary file up to 256 KiB; PostgreSQL reads its digest document whole. A
digest past that limit (400 items a section) lost its newest facts on files but not here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiden.config import Config
from aiden.longterm.files import digest_path, session_file_name, write_summary
from aiden.longterm.postgres.backend import DIGEST_DOC, PostgresLongTermBackend, read_doc
from aiden.longterm.summaries import SessionSummary, render_summary_md
from aiden.longterm.writer import DIGEST_MAX_BYTES, SessionSummaryWriter
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres import PostgresSessionStore, open_pool
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.testing.ltkit import said

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
CONFIG = Config(durability="none", session_summaries_keep=2)
DAY = 86_400
START = 1_767_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def chat(s: int) -> SessionSummary:
    """A chat session of 40 lines, each a fact: 14 of them are more than the digest holds."""
    return SessionSummary(
        session_id=f"c{s:03d}",
        created_at=START + s * DAY,
        facts=tuple(
            f"{('Maria', 'Joanna')[k % 2]}: I went to the pottery class #{s * 40 + k} on day {s} with {k + 2} "
            f"friends, and we glazed {k + 3} bowls in the kiln's {('blue', 'green', 'red')[k % 3]} colours." for k in range(40)
        ),
    )


ENDS = ([said(1, "Note that the kiln in room 4 fires at 1240 degrees.")], [said(1, "Note that class 9 starts at 18:30.")])


async def test_the_digest_is_bounded_and_the_same_as_on_files(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    layout, storage = Layout(tmp_path), Storage()
    team = f"{session_ids()}-team"
    pool = open_pool(pg_dsn)
    stores: list[PostgresSessionStore] = []

    def worker() -> PostgresLongTermBackend:
        store = PostgresSessionStore(session_id=session_ids(), pool=pool, long_term_namespace=team)
        store.recover()
        stores.append(store)
        return PostgresLongTermBackend(store, CONFIG, ExtractiveSummarizer())

    try:
        # Two sessions close on each backend (the first creates the tables); 14 older ones were written
        # before them as each backend stores a session's summary. The second close's cap digests those 14.
        await worker().summaries.write_session_summary(ENDS[0], now=START + 100 * DAY)
        await SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), CONFIG).write_session_summary(
            ENDS[0], now=START + 100 * DAY
        )
        (layout.session / "running_summary.md").unlink(missing_ok=True)  # the next session starts without it
        with pool.connection() as conn:
            for s in range(14):
                summary = chat(s)
                stem = session_file_name(summary.created_at, summary.session_id).removesuffix(".md")
                conn.execute(
                    "INSERT INTO aiden_lt_session_summaries (namespace, stem, summary_id, body) VALUES (%s, %s, %s, %s)",
                    (team, stem, summary.session_id, render_summary_md(summary)),
                )
                write_summary(storage, layout.sessions / f"{stem}.md", summary)
        pg_end = await worker().summaries.write_session_summary(ENDS[1], now=START + 101 * DAY)
        file_end = await SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), CONFIG).write_session_summary(
            ENDS[1], now=START + 101 * DAY
        )
        assert len(pg_end.cap.merged) == len(file_end.cap.merged) == 14
        with pool.connection() as conn:
            pg_digest = read_doc(conn, team, DIGEST_DOC)
        assert pg_digest == digest_path(layout).read_text()
        assert DIGEST_MAX_BYTES - 200 < len(pg_digest.encode()) <= DIGEST_MAX_BYTES + 200  # its header and headings
    finally:
        for store in stores:
            store.close()
        pool.close()

"""Sessions sharing a long-term namespace on PostgreSQL: a long session's summary is ordered by when it
is written, not by when its running summary was created, so the cap merges it instead of deleting it.

(Hunt carry60 section 1: the long session's stem was its first compaction's time, older than the
sessions closed meanwhile, at or below the digest's watermark, and the cap deleted it unmerged.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiden.config import Config
from aiden.longterm.postgres.backend import PostgresLongTermBackend
from aiden.storage.postgres import PostgresSessionStore, open_pool
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.testing.ltkit import NOW, said

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
TABS = "Always use tabs for the zebra parser."
YARN = "Always use yarn for the zebra dashboard."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("checkpointed", [False, True], ids=["compacted", "checkpointed"])
async def test_a_long_sessions_summary_is_merged_after_other_sessions_closed(
    pg_dsn: str, session_ids: SessionIds, checkpointed: bool
) -> None:
    config = Config(session_summaries_keep=2)
    team = f"{session_ids()}-team"
    pool = open_pool(pg_dsn)
    stores: list[PostgresSessionStore] = []

    def worker() -> PostgresLongTermBackend:
        store = PostgresSessionStore(session_id=session_ids(), pool=pool, long_term_namespace=team)
        store.recover()
        stores.append(store)
        return PostgresLongTermBackend(store, config, ExtractiveSummarizer())

    try:
        long = worker()
        if checkpointed:  # its summary is written early, then digested by the others' cap
            await long.summaries.checkpoint([said(1, TABS)], now=NOW)
        else:  # compacted early: only its running summary exists
            await long.summaries.merge_running_summary([said(1, TABS)], now=NOW)
        others = []
        for i in range(3):
            write = await worker().summaries.write_session_summary(
                [said(1, f"Service {i} listens on port {5000 + i}.")], now=NOW + 60 * (i + 1)
            )
            others.append(Path(str(write.path)).stem)
        end = await long.summaries.write_session_summary([said(1, TABS), said(2, YARN)], now=NOW + 600)
        assert (end.cap.merged, end.cap.deleted) == ((others[1],), (others[1],))
        layer = worker().load_layer(config)
        for item in (TABS, YARN, *(f"Service {i} listens on port {5000 + i}." for i in range(3))):
            assert f"- {item}" in layer, layer
    finally:
        for store in stores:
            store.close()
        pool.close()

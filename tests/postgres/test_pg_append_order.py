"""Seqs follow submission order on the PostgreSQL store, with many batches of one session queued at once.

Appends submitted one after the other without awaiting each (tasks started in
order: asyncio runs them, and so sends their requests, first in first out) must
get increasing seqs, gap-free, even when small batches (``max_batch_events=4``)
leave several of them queued behind the one committing: a writer that let two
batches of one session commit at once (two connections racing for the counter
row) would hand some later batch the lower seqs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiden import SessionEvent, open_memory
from aiden.storage.postgres import postgres_store_factory
from tests.helpers import ORDER_CONFIG, append_bursts_in_order

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ROUNDS = 40
BURST = 32


async def test_appends_queued_without_awaiting_keep_submission_order(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    factory = postgres_store_factory(pg_dsn, session_ids())
    async with open_memory(
        tmp_path / "agent", config=ORDER_CONFIG, store_factory=factory, context_window=10**9
    ) as memory:
        assert (await memory.append(SessionEvent(type="user_input", role="user", content="start"))).seq == 1
        hot = await append_bursts_in_order(memory, ROUNDS, BURST)
    assert [e.seq for e in hot] == list(range(1, ROUNDS * BURST + 2))
    assert [e.content for e in hot[1:]] == [f"{r}-{i}" for r in range(ROUNDS) for i in range(BURST)]

"""Seqs follow submission order on the file store, with many batches of one session queued at once.

As ``tests/postgres/test_pg_append_order.py`` for the PostgreSQL store: appends
submitted one after the other without awaiting each (tasks started in order,
which asyncio runs first in first out) get increasing, gap-free seqs while small
batches (``max_batch_events=4``) leave several queued behind the one in fsync.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiden import open_memory
from tests.helpers import ORDER_CONFIG, append_bursts_in_order

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ROUNDS = 20
BURST = 32


async def test_appends_queued_without_awaiting_keep_submission_order(tmp_path: Path) -> None:
    async with open_memory(tmp_path / "agent", config=ORDER_CONFIG, context_window=10**9) as memory:
        hot = await append_bursts_in_order(memory, ROUNDS, BURST)
    assert [e.seq for e in hot] == list(range(1, ROUNDS * BURST + 1))
    assert [e.content for e in hot] == [f"{r}-{i}" for r in range(ROUNDS) for i in range(BURST)]

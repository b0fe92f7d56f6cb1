"""Seqs follow submission order on the file store, with many batches of one session queued at once.

As ``tests/postgres/test_pg_append_order.py`` for the PostgreSQL store: appends
submitted one after the other without awaiting each (tasks started in order,
which asyncio runs first in first out) get increasing, gap-free seqs while small
batches (``max_batch_events=4``) leave several queued behind the one in fsync.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from aiden import Config, SessionEvent, open_memory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ROUNDS = 20
BURST = 32


async def test_appends_queued_without_awaiting_keep_submission_order(tmp_path: Path) -> None:
    config = Config(max_batch_events=4, count_compress_after_events=10**9, session_summary_on_close=False)
    async with open_memory(tmp_path / "agent", config=config, context_window=10**9) as memory:
        seqs: dict[str, int] = {}

        async def append(name: str) -> None:
            seqs[name] = (await memory.append(SessionEvent(type="user_input", role="user", content=name))).seq

        for r in range(ROUNDS):
            async with anyio.create_task_group() as tg:
                for i in range(BURST):
                    tg.start_soon(append, f"{r}-{i}")
            got = [seqs[f"{r}-{i}"] for i in range(BURST)]
            assert got == sorted(got), f"round {r}: seqs out of submission order: {got}"
        hot = await memory.hot_window()
    assert [e.seq for e in hot] == list(range(1, ROUNDS * BURST + 1))
    assert [e.content for e in hot] == [f"{r}-{i}" for r in range(ROUNDS) for i in range(BURST)]

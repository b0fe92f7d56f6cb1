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

import anyio
import pytest

from aiden import Config, SessionEvent, open_memory
from aiden.storage.postgres import postgres_store_factory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ROUNDS = 40
BURST = 32


async def test_appends_queued_without_awaiting_keep_submission_order(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    config = Config(max_batch_events=4, count_compress_after_events=10**9, session_summary_on_close=False)
    factory = postgres_store_factory(pg_dsn, session_ids())
    async with open_memory(
        tmp_path / "agent", config=config, store_factory=factory, context_window=10**9
    ) as memory:
        assert (await memory.append(SessionEvent(type="user_input", role="user", content="start"))).seq == 1
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
    assert [e.seq for e in hot] == list(range(1, ROUNDS * BURST + 2))
    assert [e.content for e in hot[1:]] == [f"{r}-{i}" for r in range(ROUNDS) for i in range(BURST)]

"""Races at the edges of a memory's life: a close right after the open, on a root with a backlog."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

import aiden
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

BACKLOG = msgspec.structs.replace(SMALL_MANUAL, count_compress_after_events=5)


async def test_open_then_close_at_once_on_a_backlog_root_raises_nothing(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await memory.append_many(
            aiden.SessionEvent(type="user_input", role="user", content=f"backlog turn {n}") for n in range(60)
        )
    # Each open finds the backlog and requests a pass; the close follows at once, so the pass
    # loop may still be asking for it when the inbox (and its wake stream) closes.
    for _ in range(100):
        async with aiden.open_memory(tmp_path, config=BACKLOG):
            pass
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        hot = [e.seq for e in await memory.hot_window()]
        chunks = (await memory.chunk_index()).chunks
    # Every acknowledged event is in exactly one place: a chunk or the hot window.
    assert sum(c.count for c in chunks) + len(hot) == 60
    assert sorted(hot) == hot

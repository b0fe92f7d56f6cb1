"""Races at the edges of a memory's life: a close right after the open, on a root with a backlog."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import aiden
from aiden.storage.layout import Layout
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


async def test_a_chunk_committed_as_the_memory_closes_is_recorded_in_history_before_it_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = msgspec.structs.replace(SMALL_MANUAL, count_compress_after_events=8)
    layout = Layout(tmp_path)
    # Rounds until three passes committed as their memory closed (how many rounds that takes
    # depends on the machine's timing: 1-5 on a quiet machine, and in one loaded full-suite run
    # only 2 in 60); the invariant is checked after every round.
    for round_ in range(200):
        async with aiden.open_memory(tmp_path, config=config) as memory:
            for n in range(10):
                await memory.append(
                    aiden.SessionEvent(type="user_input", role="user", content=f"round {round_} fact {n}")
                )
            memory.request_maintenance()  # never awaited: the close races the pass
        # Read before any reopen (a reopen replays the newest chunks' hook and would hide a miss).
        history = layout.history.read_text() if layout.history.exists() else ""
        recorded = {json.loads(line).get("chunk_id") for line in history.splitlines() if line.strip()}
        committed = {path.stem for path in layout.chunks.glob("chunk_*.jsonl")}
        assert committed <= recorded, (round_, sorted(committed - recorded))
        if len(committed) >= 3:
            break
    assert len(committed) >= 3  # passes did commit as the memory closed
    assert "after-compaction hook failed" not in caplog.text

"""An event one compaction kept hot (a pin) and a later one compacted reaches the running summary
(the running summary's watermark skipped it: the fact was in chunk summaries, never in what the
session summary and later sessions' PROJECT MEMORY are made from)."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent
from aiden.storage.layout import Layout

pytestmark = pytest.mark.anyio

CONFIG = aiden.Config(
    keep_recent_tokens=60, hot_window_events=4, count_compress_after_events=10**6, max_pinned_events=1, durability="none"
)
FACT = "Never deploy the billing service on Fridays."


async def test_a_pin_compacted_by_a_later_pass_reaches_the_running_summary(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await memory.append(SessionEvent(type="user_input", content="Migrate billing to Postgres 16."))
        await memory.append(SessionEvent(type="user_input", content=FACT, pinned="constraint"))
        for step in range(8):
            await memory.append(SessionEvent(type="assistant_output", content=f"Step {step} done: " + "ok " * 20))
        assert (await memory.maintain(manual=True)).compacted
        running = Layout(tmp_path).running_summary.read_text()
        assert "Fridays" not in running  # kept hot: not compacted, not merged yet
        # A newer pin takes the one slot: the older one is compacted by the next pass.
        await memory.append(SessionEvent(type="user_input", content="Also use logical replication.", pinned="decision"))
        for step in range(8):
            await memory.append(SessionEvent(type="assistant_output", content=f"Later step {step}: " + "ok " * 20))
        assert (await memory.maintain(manual=True)).compacted
        index = await memory.chunk_index()
    assert any(2 in range(c.first_seq, c.last_seq + 1) and 2 not in c.kept_seqs for c in index.chunks[1:])
    assert "Fridays" in Layout(tmp_path).running_summary.read_text()

"""An event kept hot inside one chunk's range (a pin) and compacted by a later chunk.

The later chunk's range then reaches into the earlier one's (chunk 2..8 keeps seq 3 hot; chunk 3..17
holds it): nothing is lost, and recovery must not say otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.storage.layout import Layout

pytestmark = pytest.mark.anyio

CONFIG = Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=4,
    count_compress_after_events=10**6,
    max_pinned_events=1,
)
PIN = "Never deploy on Fridays."


async def pin_compacted_by_a_later_chunk(root: Path) -> None:
    """20 events: the pin (seq 3) stays hot through the first compaction and is compacted by the second."""
    async with aiden.open_memory(root, config=CONFIG) as memory:
        await memory.append(SessionEvent(type="user_input", content="Migrate billing to Postgres 16."))
        await memory.append(SessionEvent(type="assistant_output", content="ok"))
        await memory.append(SessionEvent(type="user_input", content=PIN, pinned="constraint"))
        for step in range(8):
            await memory.append(SessionEvent(type="assistant_output", content=f"Step {step} done: " + "ok " * 20))
        assert (await memory.maintain(manual=True)).compacted
        # A newer pin pushes the first one out of max_pinned_events: the next pass compacts it.
        await memory.append(SessionEvent(type="user_input", content="Use logical replication.", pinned="decision"))
        for step in range(8):
            await memory.append(SessionEvent(type="assistant_output", content=f"Later step {step}: " + "ok " * 20))
        assert (await memory.maintain(manual=True)).compacted
        index = await memory.chunk_index()
        hot = [e.seq for e in await memory.hot_window()]
    assert [(c.first_seq, c.last_seq, c.count, c.kept_seqs) for c in index.chunks] == [(2, 8, 6, [3]), (3, 17, 9, [12])]
    assert hot == [1, 12, 18, 19, 20]


async def test_a_pin_compacted_by_a_later_chunk_is_not_reported_lost(tmp_path: Path) -> None:
    await pin_compacted_by_a_later_chunk(tmp_path)
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        report = memory.recovery
        pinned = await memory.read_event(3)
    assert (report.hot_events_lost, report.unrecoverable) == (0, [])
    assert pinned is not None and pinned.content == PIN


async def test_an_index_rebuilt_from_the_chunk_files_takes_both_chunks(tmp_path: Path) -> None:
    await pin_compacted_by_a_later_chunk(tmp_path)
    Layout(tmp_path).index.write_text("chunks: [\n")  # damaged: recovery rebuilds it from the chunk files
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        report = memory.recovery
        index = await memory.chunk_index()
    assert report.index_rebuilt and report.orphan_chunks_adopted == 0
    assert len(report.unrecoverable) == 1
    assert report.unrecoverable[0].startswith("index.yaml was corrupt and was rebuilt from chunk files: ")
    assert [c.chunk_id for c in index.chunks] == ["chunk_0000000002_0000000008", "chunk_0000000003_0000000017"]

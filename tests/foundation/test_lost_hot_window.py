"""A lost hot window (events.jsonl emptied or deleted) is reported, and its seqs are never reused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent
from aiden.storage import chunks as cs
from aiden.storage.eventlog import describe_ranges, lost_seqs
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio

SMALL = SMALL_MANUAL


async def compacted_session(root: Path) -> tuple[int, list[int]]:
    """60 events, one compaction; returns the chunk's last seq and the hot window's seqs."""
    async with aiden.open_memory(root, config=SMALL) as memory:
        for i in range(60):
            await memory.append(SessionEvent(type="user_input", role="user", content=f"message {i} " * 8))
        outcome = await memory.maintain(manual=True)
    assert outcome.compacted is True
    layout = Layout(root)
    index = cs.load_index(layout)
    assert index is not None
    hot = [e.seq for e in scan(read_bytes(layout.events)).events]
    assert hot and hot[-1] == 60 and index.last_seq < 60  # the newest events live only in the log
    return index.last_seq, hot


@pytest.mark.parametrize("damage", ["delete", "empty"])
async def test_lost_hot_window_is_reported_and_seqs_continue_after_it(tmp_path: Path, damage: str) -> None:
    _, hot = await compacted_session(tmp_path)
    events = Layout(tmp_path).events
    if damage == "delete":
        os.unlink(events)
    else:
        events.write_bytes(b"")
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        report = memory.recovery
        nxt = await memory.append(SessionEvent(type="user_input", content="after the loss"))
    assert report.hot_events_lost == len(hot)
    assert report.unrecoverable == [f"events.jsonl: {len(hot)} events lost (seqs {describe_ranges(hot)})"]
    assert nxt.seq == 61  # never a seq of the lost window
    # Reported again on every open: the loss stays a fact, not a one-time log line.
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        again = memory.recovery
    assert again.hot_events_lost == len(hot) and again.unrecoverable == report.unrecoverable


async def test_without_high_water_mark_chunk_index_still_proves_the_pinned_loss(tmp_path: Path) -> None:
    last, hot = await compacted_session(tmp_path)
    layout = Layout(tmp_path)
    os.unlink(layout.session / "seq_high_water")  # a session written before the mark existed
    os.unlink(layout.events)
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        report = memory.recovery
        nxt = await memory.append(SessionEvent(type="user_input", content="after the loss"))
    pinned = [s for s in hot if s <= last]
    assert pinned == [1]  # the root input stays pinned before the chunk's range
    assert report.unrecoverable == ["events.jsonl: 1 events lost (seqs 1)"]
    assert nxt.seq == last + 1  # continues after the last chunk, never inside its range


async def test_intact_session_reports_no_loss(tmp_path: Path) -> None:
    await compacted_session(tmp_path)
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        report = memory.recovery
    assert report.hot_events_lost == 0 and report.unrecoverable == []


def test_lost_seqs_walks_gaps_kept_seqs_and_high_water() -> None:
    entries = [
        cs.ChunkEntry(chunk_id="a", first_seq=2, last_seq=10, count=8, sha256="x", summary="", kept_seqs=[5]),
        cs.ChunkEntry(chunk_id="b", first_seq=12, last_seq=20, count=9, sha256="y", summary=""),
    ]
    hot = [SessionEvent(type="user_input", seq=s) for s in (1, 21, 23)]
    assert lost_seqs(entries, hot, 24) == [5, 11, 22, 24]
    assert describe_ranges([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10"


@pytest.mark.parametrize("damage", ["mark-lowered", "only-the-pinned-line-left"])
async def test_a_damaged_mark_never_hands_out_a_seq_a_chunk_holds(tmp_path: Path, damage: str) -> None:
    # [Reliability] finding 7: the chunk index was consulted only when nothing else named a
    # seq, so a lowered mark (a flipped digit) or a hot window cut down to the pinned root
    # input gave seq 2 again while the chunk held 2..last.
    last, hot = await compacted_session(tmp_path)
    layout = Layout(tmp_path)
    mark = layout.session / "seq_high_water"
    if damage == "mark-lowered":
        mark.write_text("1\n")
        layout.events.write_bytes(b"")
    else:
        os.unlink(mark)
        layout.events.write_bytes(read_bytes(layout.events).splitlines(keepends=True)[0])
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        nxt = await memory.append(SessionEvent(type="user_input", content="after the loss"))
    assert hot[0] == 1 and nxt.seq == last + 1

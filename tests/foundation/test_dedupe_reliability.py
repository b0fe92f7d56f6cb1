"""event_id dedupe holds for compacted events: after reopen and in a second Memory."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio

SMALL = SMALL_MANUAL


def events(n: int) -> list[SessionEvent]:
    return [
        SessionEvent(type="user_input", role="user", content=f"message {i} " * 8, event_id=f"ev-{i}")
        for i in range(n)
    ]


def stored_seqs(root: Path) -> list[int]:
    """Every seq on disk: committed chunks plus the hot window."""
    layout = Layout(root)
    index = cs.load_index(layout)
    assert index is not None
    seqs: list[int] = []
    for entry in cs.load_all_entries(layout, index):
        seqs.extend(e.seq for e in cs.read_chunk(layout, entry.chunk_id).events)
    seqs.extend(e.seq for e in scan(read_bytes(layout.events)).events)
    return sorted(seqs)


async def append_and_compact(root: Path) -> list[int]:
    async with aiden.open_memory(root, config=SMALL) as memory:
        first = [e.seq for e in await memory.append_many(events(60))]
        outcome = await memory.maintain(manual=True)
    assert outcome.compacted is True
    index = cs.load_index(Layout(root))
    assert index is not None and index.last_seq >= 30  # most of the 60 now live only in a chunk
    return first


async def test_retry_after_reopen_returns_stored_seqs_of_compacted_events(tmp_path: Path) -> None:
    first = await append_and_compact(tmp_path)
    assert first == list(range(1, 61))
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        again = [e.seq for e in await memory.append_many(events(60))]
        one = await memory.append(events(1)[0])
    assert again == first
    assert one.seq == 1
    assert stored_seqs(tmp_path) == list(range(1, 61))


async def test_retry_in_second_memory_learns_chunks_committed_by_the_first(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL) as other:
        # The second Memory's writer has a valid view of the log before the compaction.
        warm = await other.append(SessionEvent(type="user_input", content="warm", event_id="warm"))
        first = await append_and_compact(tmp_path)
        again = [e.seq for e in await other.append_many(events(60))]
        fresh = await other.append(SessionEvent(type="user_input", content="new", event_id="ev-new"))
    assert warm.seq == 1
    assert first == list(range(2, 62))
    assert again == first
    assert fresh.seq == 62
    assert stored_seqs(tmp_path) == list(range(1, 63))

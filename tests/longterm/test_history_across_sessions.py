"""Each session's chunks reach history.jsonl (Dream's source) once, though chunk ids restart in every session.

Chunk ids are seq ranges: after a rotation the new session's first chunk often has the id of the
old session's. The open's replay of the newest chunks' hook is a retry of the same session's chunk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import Layout, SessionEvent
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a real runtime: threads and files


async def _compact(memory: aiden.Memory, word: str) -> tuple[str, str]:
    """Twelve events about ``word``, compacted into one chunk: its id and summary."""
    said = [f"{word} step {i:02d}: " + "filler words " * 30 for i in range(12)]
    await memory.append_many(SessionEvent(type="user_input", role="user", content=text) for text in said)
    assert (await memory.maintain(manual=True)).compacted
    [chunk] = (await memory.chunk_index()).chunks
    return chunk.chunk_id, chunk.summary


def _records(root: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in Layout(root).history.read_text().splitlines()]


def _history(root: Path) -> list[tuple[object, ...]]:
    return [(r["cursor"], r["chunk_id"], r["content"]) for r in _records(root)]


async def test_a_rotated_sessions_chunk_of_the_same_seq_range_is_recorded(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        zebra_id, zebra = await _compact(memory, "zebra")
        await memory.rotate()
        yak_id, yak = await _compact(memory, "yak")
    assert yak_id == zebra_id and "yak step" in yak
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        # A pass waits for the open's replay of the newest chunk's hook: a retry of yak's record.
        assert (await memory.maintain()).compacted is False
        assert _history(tmp_path) == [(1, zebra_id, zebra), (2, yak_id, yak)]
        dreamed = await memory.dream()
    assert (dreamed.ran, dreamed.records, dreamed.cursor) == (True, 2, 2)
    assert _history(tmp_path) == [(1, zebra_id, zebra), (2, yak_id, yak)]


async def test_a_record_written_before_chunk_stamps_is_not_recorded_again(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        chunk_id, summary = await _compact(memory, "zebra")
    [record] = _records(tmp_path)
    del record["chunk_stamp"]  # as an older version wrote it
    Layout(tmp_path).history.write_text(json.dumps(record) + "\n")
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        assert (await memory.maintain()).compacted is False  # after the open's replay of the chunk's hook
        assert (await memory.dream()).records == 1
    assert _history(tmp_path) == [(1, chunk_id, summary)]

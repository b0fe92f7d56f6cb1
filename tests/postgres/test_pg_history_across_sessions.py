"""Each session's chunks reach ``aiden_lt_history`` (Dream's source) once, though chunk ids restart in every
session (a rotation starts a new generation at seq 1).

Another worker's open replays the newest chunks' hook: a retry of the same session's chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

import aiden
from aiden import SessionEvent, open_memory
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _compact(memory: aiden.Memory, word: str) -> tuple[str, str]:
    """Twelve events about ``word``, compacted into one chunk: its id and summary."""
    said = [f"{word} step {i:02d}: " + "filler words " * 30 for i in range(12)]
    await memory.append_many(SessionEvent(type="user_input", role="user", content=text) for text in said)
    assert (await memory.maintain(manual=True)).compacted
    [chunk] = (await memory.chunk_index()).chunks
    return chunk.chunk_id, chunk.summary


def _history(dsn: str, namespace: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT pos, content FROM aiden_lt_history WHERE namespace = %s ORDER BY pos", (namespace,)
        ).fetchall()
    return [(int(pos), str(content)) for pos, content in rows]


async def test_a_rotated_sessions_chunk_of_the_same_seq_range_is_recorded(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    async with open_memory(tmp_path / "a", store=pg_dsn, session_id=sid, config=SMALL_MANUAL) as memory:
        zebra_id, zebra = await _compact(memory, "zebra")
        await memory.rotate()
        yak_id, yak = await _compact(memory, "yak")
    assert yak_id == zebra_id and "yak step" in yak
    async with open_memory(tmp_path / "b", store=pg_dsn, session_id=sid, config=SMALL_MANUAL) as memory:
        # A pass waits for the open's replay of the newest chunk's hook: a retry of yak's record.
        assert (await memory.maintain()).compacted is False
        assert _history(pg_dsn, sid) == [(1, zebra), (2, yak)]
        dreamed = await memory.dream()
    assert (dreamed.ran, dreamed.records, dreamed.cursor) == (True, 2, 2)
    assert _history(pg_dsn, sid) == [(1, zebra), (2, yak)]


async def test_a_row_written_before_chunk_stamps_is_not_recorded_again(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    async with open_memory(tmp_path, store=pg_dsn, session_id=sid, config=SMALL_MANUAL) as memory:
        chunk_id, summary = await _compact(memory, "zebra")
    with psycopg.connect(pg_dsn) as conn:  # as an older version wrote it
        conn.execute("UPDATE aiden_lt_history SET chunk_id = %s WHERE namespace = %s", (chunk_id, sid))
    async with open_memory(tmp_path, store=pg_dsn, session_id=sid, config=SMALL_MANUAL) as memory:
        assert (await memory.maintain()).compacted is False  # after the open's replay of the chunk's hook
        assert (await memory.dream()).records == 1
    assert _history(pg_dsn, sid) == [(1, summary)]

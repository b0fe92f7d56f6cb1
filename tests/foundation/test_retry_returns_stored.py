"""A retried append (a known event_id, rebuilt content) returns the stored event, not the caller's copy.

On the file store: hot and compacted events, after a reopen, through the sync
facade, and when another process stored (and compacted) the originals. The
memory and PostgreSQL stores run the same check in tests/store and tests/postgres.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

import aiden
import aiden.sync
from aiden import SessionEvent
from aiden.testing.conformance_retry import (
    check_a_rotation_ends_the_retry_window,
    check_retries_return_the_stored_events,
    original,
    rebuilt,
)
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio

_PROJECT = Path(__file__).resolve().parents[2]


async def test_retries_return_the_stored_events_hot_compacted_and_after_reopen(tmp_path: Path) -> None:
    await check_retries_return_the_stored_events(
        lambda: aiden.open_memory(tmp_path, config=SMALL_MANUAL), count=40, reopen=True
    )


async def test_a_rotation_ends_the_retry_window(tmp_path: Path) -> None:
    await check_a_rotation_ends_the_retry_window(lambda: aiden.open_memory(tmp_path, config=SMALL_MANUAL))


def test_sync_facade_returns_the_stored_event(tmp_path: Path) -> None:
    with aiden.sync.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        first = memory.append(original(0))
        assert memory.append(rebuilt(0)) == first
        got = memory.append_many([rebuilt(0), rebuilt(1)])
        assert got[0] == first
        assert (got[1].seq, got[1].content) == (2, "rebuilt 1")
        assert memory.hot_window() == [first, got[1]]


async def test_retry_in_this_process_returns_what_another_process_stored_and_compacted(
    tmp_path: Path,
) -> None:
    count = 30
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        # Opened first: this writer's view of the log predates the other process's appends and compaction.
        warm = await memory.append(SessionEvent(type="user_input", content="warm", event_id="warm"))
        child = await anyio.run_process(
            [sys.executable, "-m", "tests.foundation.retry_child", str(tmp_path), str(count)],
            cwd=_PROJECT,
            env={**os.environ, "PYTHONPATH": str(_PROJECT)},
            check=False,
        )
        assert child.returncode == 0, child.stderr.decode()
        stored = msgspec.json.decode(child.stdout, type=list[SessionEvent])
        assert [e.seq for e in stored] == list(range(2, count + 2))
        index = await memory.chunk_index()
        assert index.last_seq > 2  # some of them live only in a chunk now
        again = await memory.append_many(rebuilt(i) for i in range(count))
        assert again == stored
        fresh = await memory.append(SessionEvent(type="user_input", content="new", event_id="new"))
    assert warm.seq == 1
    assert fresh.seq == count + 2

"""[Reliability] finding 9: a directory where index.yaml should be failed every open forever.

Now recovery moves it aside (nothing in it is deleted), rebuilds the index from the chunk files and
reports it; the memory opens and keeps every event. (The recall database case is in tests/recall.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden.storage.layout import Layout
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio


async def test_directory_where_index_yaml_goes_is_moved_aside(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        for n in range(12):
            await memory.append(aiden.SessionEvent(type="user_input", role="user", content=f"event {n}"))
        await memory.maintain(manual=True)
        before = [e.seq for e in await memory.hot_window()]
        chunks = [e.chunk_id for e in (await memory.chunk_index()).chunks]
    assert chunks  # something was compacted, so the rebuild has work to do
    layout = Layout(tmp_path)
    layout.index.unlink()
    layout.index.mkdir()
    (layout.index / "note.txt").write_text("not ours")
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        assert [e.seq for e in await memory.hot_window()] == before
        assert [e.chunk_id for e in (await memory.chunk_index()).chunks] == chunks
        moved = [m for m in memory.recovery.unrecoverable if "a directory stood where index.yaml goes" in m]
        assert len(moved) == 1
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="after"))
    (aside,) = [p for p in layout.chunks.iterdir() if p.name.startswith("index.yaml.displaced-")]
    assert (aside / "note.txt").read_text() == "not ours"
    assert layout.index.is_file()

"""[Reliability] finding 9: a directory where index.yaml should be failed every open forever.

Now recovery moves it aside (nothing in it is deleted), rebuilds the index from the chunk files and
reports it; the memory opens and keeps every event. (The recall database case is in tests/recall.)
"""

from __future__ import annotations

import json
import shutil
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


async def _populated(root: Path) -> None:
    """Every file of the session and of long-term memory written at least once."""
    async with aiden.open_memory(root, config=SMALL_MANUAL) as memory:
        for n in range(12):
            text = f"event {n}: the staging database port is {5400 + n}, we decided to keep it"
            await memory.append(aiden.SessionEvent(type="user_input", role="user", content=text))
        await memory.maintain(manual=True)
        call = {"type": "preference", "title": "t", "content": "c"}
        answer = await memory.handle_tool_call("save_memory", call)
        assert "saved" in json.loads(answer)
        await memory.checkpoint()
        await memory.dream()


PLACES = [
    "session.lock",
    "compaction.lock",
    "session/events.jsonl",
    "session/summary.md",
    "session/running_summary.md",
    "session/seq_high_water",
    "long_term/index.yaml",
    "long_term/history.jsonl",
    "long_term/.cursor",
    "long_term/.dream_cursor",
    "long_term/MEMORY.md",
    "long_term/.entries.lock",
    "long_term/.summaries.lock",
    "long_term/.dream.lock",
    "long_term/sessions/*.md",
]


@pytest.mark.parametrize("rel", PLACES)
async def test_a_directory_where_any_file_goes_is_moved_aside_and_the_memory_works(
    tmp_path: Path, rel: str
) -> None:
    # [Reliability] finding 9: each of these failed every open (a foreign IsADirectoryError or a
    # LockError), or every save / checkpoint / Dream for good.
    await _populated(tmp_path)
    memory_dir = Layout(tmp_path).memory
    (path,) = memory_dir.glob(rel)
    path.unlink()
    path.mkdir()
    (path / "note.txt").write_text("not ours")
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        moved = [m for m in memory.recovery.unrecoverable if m.startswith("a directory stood where")]
        assert len(moved) == 1
        assert moved[0].startswith(
            f"a directory stood where {path.relative_to(memory_dir)} goes; moved to {path.name}.displaced-"
        )
        assert (await memory.append(aiden.SessionEvent(type="user_input", content="after"))).seq > 0
        call = {"type": "fact", "title": "u", "content": "d"}
        answer = json.loads(await memory.handle_tool_call("save_memory", call))
        assert "saved" in answer, answer
        assert await memory.checkpoint() is not None
        await memory.dream()
        assert "**t**: c" in memory.long_term_layer  # the memory saved before is still shown
    (aside,) = [p for p in path.parent.iterdir() if p.name.startswith(f"{path.name}.displaced-")]
    assert (aside / "note.txt").read_text() == "not ours"
    assert not path.is_dir()


FOLDERS = [
    "",  # memory/ itself
    "session",
    "session/chunks",
    "session_archive",
    "long_term",
    "long_term/memories",
    "long_term/sessions",
    "episodes",
    "experience",
]


@pytest.mark.parametrize("rel", FOLDERS)
async def test_a_file_where_a_folder_goes_is_moved_aside_and_the_memory_works(tmp_path: Path, rel: str) -> None:
    # Each of these failed every open with a NotADirectoryError (from a task group: an ExceptionGroup).
    await _populated(tmp_path)
    path = Layout(tmp_path).memory / rel if rel else Layout(tmp_path).memory
    if path.exists():
        shutil.rmtree(path)
    path.write_text("not ours")
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        moved = [m for m in memory.recovery.unrecoverable if m.startswith("a file stood where")]
        shown = path.relative_to(tmp_path if not rel else Layout(tmp_path).memory)
        assert [m.split("; moved to ")[0] for m in moved] == [f"a file stood where {shown} goes"]
        assert (await memory.append(aiden.SessionEvent(type="user_input", content="after"))).seq > 0
        answer = json.loads(await memory.handle_tool_call("save_memory", {"type": "fact", "title": "u", "content": "d"}))
        assert "saved" in answer, answer
        (aside,) = [p for p in path.parent.iterdir() if p.name.startswith(f"{path.name}.displaced-")]
        assert aside.read_text() == "not ours"
        await memory.checkpoint()
        await memory.rotate()  # the archive folder is made, the session folder moved into it
    assert not path.is_file()

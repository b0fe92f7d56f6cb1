"""A closed session is archived as a log: the recall index, derived data of the active session, is not kept."""

from __future__ import annotations

from pathlib import Path

import anyio

import aiden
from aiden.config import Config


async def _two_sessions(root: Path) -> tuple[str, list[str], list[str]]:
    config = Config(durability="none", session_summary_on_close=False)
    async with aiden.open_memory(root, config=config, context_window=4000) as memory:
        for n in range(40):
            await memory.append(aiden.SessionEvent(type="user_input", content=f"step {n}: the pelican count is {n}"))
        await memory.maintain(manual=True)
        before = [h.text for h in await memory.recall_session_chunks("pelican count 3")]
        closed = await memory.rotate()
        for n in range(40):
            await memory.append(aiden.SessionEvent(type="user_input", content=f"day two {n}: the heron count is {n}"))
        await memory.maintain(manual=True)
        after = [h.text for h in await memory.recall_session_chunks("heron count 3")]
    return closed, before, after


def test_a_rotation_leaves_no_recall_index_in_the_archive(tmp_path: Path) -> None:
    closed, before, after = anyio.run(_two_sessions, tmp_path)
    assert before[0] == "step 3: the pelican count is 3"
    assert after[0] == "day two 3: the heron count is 3"  # the new session's index is built afresh
    archive = tmp_path / "memory" / "session_archive" / closed
    assert (archive / "events.jsonl").exists()
    assert sorted(p.name for p in archive.iterdir() if p.name.startswith("recall")) == []

"""The hot window after a rotation is the new session's, even when its events repeat the old ones' seqs and times."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config

pytestmark = pytest.mark.anyio

CFG = Config(durability="none")
T = 1_800_000_000.0


async def test_new_session_with_the_same_now_shows_its_own_input(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.begin_run("old session: deploy the billing service", now=T)
        before = await memory.hot_window()
        start = await memory.begin_run("new session: write the release notes", now=T, new_session=True)
        after = await memory.hot_window()
        build = await memory.build_messages()
    assert [(e.seq, e.content) for e in before] == [(1, "old session: deploy the billing service")]
    assert start.archived_session_id is not None
    assert [(e.seq, e.timestamp, e.content) for e in after] == [(1, T, "new session: write the release notes")]
    assert [m["content"] for m in build.messages if m["role"] == "user"] == ["new session: write the release notes"]


async def test_rotation_by_another_memory_on_the_root(tmp_path: Path) -> None:
    # Another process's rotation looks the same to this memory: a new generation of session/.
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.begin_run("old session", now=T)
        assert [e.content for e in await memory.hot_window()] == ["old session"]
        async with aiden.open_memory(tmp_path, config=CFG) as other:
            await other.begin_run("new session", now=T, new_session=True)
        after = await memory.hot_window()
    assert [(e.seq, e.timestamp, e.content) for e in after] == [(1, T, "new session")]

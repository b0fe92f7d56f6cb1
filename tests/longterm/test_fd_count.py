"""Opening and closing a memory leaves no file descriptor behind (a server reopens sessions for ever)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aiden

pytestmark = pytest.mark.anyio

def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # real files, real threads
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd to count descriptors")
async def test_open_close_cycles_leave_the_fd_count_flat(tmp_path: Path) -> None:
    root = tmp_path / "agent"
    # The first cycle creates the root's files and loads whatever the process keeps for good.
    async with aiden.open_memory(root, context_window=8000) as memory:
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="keep the logs"))
        await memory.checkpoint()
    before = _fds()
    for i in range(40):
        async with aiden.open_memory(root, context_window=8000) as memory:
            await memory.append(aiden.SessionEvent(type="user_input", role="user", content=f"turn {i}"))
            if i % 10 == 0:
                await memory.checkpoint()
    assert _fds() == before

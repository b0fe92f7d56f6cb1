"""Open sessions do not each cost a thread or lock descriptors (#36).

The writers share a few commit threads; a session lock's descriptor is open
only while the lock is held, so an idle open session keeps one descriptor (its
events log) and thousands of sessions fit ``ulimit -n``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent

pytestmark = pytest.mark.anyio

SESSIONS = 40


async def test_open_sessions_appending_use_a_bounded_number_of_threads_and_one_descriptor_each(
    tmp_path: Path,
) -> None:
    cfg = Config(durability="none")
    fds_before = len(os.listdir("/proc/self/fd"))
    async with contextlib.AsyncExitStack() as stack:
        memories = [
            await stack.enter_async_context(aiden.open_memory(tmp_path / f"s{i}", config=cfg))
            for i in range(SESSIONS)
        ]
        for i, memory in enumerate(memories):
            await memory.append(SessionEvent(type="user_input", content=f"hello from session {i}"))
            await memory.maintain(manual=True)  # takes and releases the compaction lock
        writers = [t for t in threading.enumerate() if t.name == "aiden-session-writer"]
        fds_open = len(os.listdir("/proc/self/fd")) - fds_before
        assert [len(await m.hot_window()) for m in memories] == [1] * SESSIONS
    # Before: one commit thread per session (40) and 3-4 descriptors per idle session.
    assert 1 <= len(writers) <= 4
    assert fds_open <= SESSIONS + 8

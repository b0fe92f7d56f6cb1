"""A retried ``begin_run(event_id=...)`` finds its input in the active session: no rotation, stored once."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent

pytestmark = pytest.mark.anyio

CFG = Config(durability="none")


def _archives(root: Path) -> list[str]:
    archive = root / "memory" / "session_archive"
    return sorted(p.name for p in archive.iterdir()) if archive.is_dir() else []


async def test_retry_after_a_long_gap_and_a_restart_continues_the_session(tmp_path: Path) -> None:
    t = 1_700_000_000.0
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.begin_run("earlier question", now=t - 60)
        await memory.commit_run("earlier answer", now=t - 50)
        first = await memory.begin_run("fix the flaky test", event_id="msg-42", now=t)
    # The agent died before answering and replays the pending input 40 minutes later (past session_new_gap_s).
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        retry = await memory.begin_run("fix the flaky test", event_id="msg-42", now=t + 2400)
        hot = await memory.hot_window()
    assert first.user_event.seq == 3
    assert retry.archived_session_id is None
    assert retry.decision.new_session is False
    assert retry.user_event == first.user_event
    assert [(e.seq, e.event_id, e.content) for e in hot] == [
        (1, None, "earlier question"),
        (2, None, "earlier answer"),
        (3, "msg-42", "fix the flaky test"),
    ]
    assert _archives(tmp_path) == []


async def test_retried_new_session_call_rotates_once(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.begin_run("old task", now=1000.0)
        await memory.commit_run("old answer", now=1001.0)
        first = await memory.begin_run("start the new task", new_session=True, event_id="turn-7", now=1002.0)
        # The caller lost the answer and sends the same call again.
        retry = await memory.begin_run("start the new task", new_session=True, event_id="turn-7", now=1003.0)
        hot = await memory.hot_window()
        # Another input (another id) still starts a new session when asked to.
        other = await memory.begin_run("and another", new_session=True, event_id="turn-8", now=1004.0)
    assert first.archived_session_id is not None
    assert retry.archived_session_id is None
    assert retry.user_event == first.user_event
    assert [(e.seq, e.event_id) for e in hot] == [(1, "turn-7")]
    assert other.archived_session_id is not None
    assert _archives(tmp_path) == sorted([first.archived_session_id, other.archived_session_id])


async def test_an_id_stored_as_another_event_is_a_hit_too(tmp_path: Path) -> None:
    # The writer dedupes an event_id whatever its event: begin_run agrees with it.
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        stored = await memory.append(SessionEvent(type="user_input", role="user", content="hi", event_id="x"))
        again = await memory.begin_run("hi", new_session=True, event_id="x")
    assert again.archived_session_id is None
    assert again.user_event == stored
    assert _archives(tmp_path) == []

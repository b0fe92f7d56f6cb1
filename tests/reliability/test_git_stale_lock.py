"""A Dream SIGKILLed mid-commit leaves dulwich's ref lock file (``refs/heads/main.lock``) behind.

Found by the kill storm (test_kill_storm): afterwards every Dream raised dulwich's
``FileLocked`` (not an AidenError) out of the long-term actor, and ``memory.dream()``
waited forever in every process on the root. Only the holder of ``.dream.lock``
commits, so a ref lock file seen under that lock is a dead committer's leftover.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import aiden
from aiden import SessionEvent
from aiden.longterm.dream import Dream
from aiden.longterm.history import HistoryStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from tests.reliability.child import config_for
from tests.reliability.harness import ForkServer, spawn_child

pytestmark = pytest.mark.anyio

NOW = 1_767_225_600.0
LOCKS = ("refs/heads/main.lock", "HEAD.lock")


@pytest.mark.parametrize("lock", LOCKS)
async def test_dream_commits_over_a_dead_committers_ref_lock(tmp_path: Path, lock: str) -> None:
    layout = Layout(tmp_path)
    layout.session.mkdir(parents=True)
    storage = Storage()
    history = HistoryStore(layout, storage)
    history.append("Facts:\n- The staging database port is 5433.", session_key="cli:direct", now=NOW)
    first = await Dream(layout, storage, history).run(now=NOW + 1)
    assert first.commit_id is not None
    (layout.long_term / ".git" / lock).write_bytes(b"")  # what SIGKILL between lock and rename leaves
    history.append("Facts:\n- The staging host is db2.", session_key="cli:direct", now=NOW + 2)
    second = await Dream(layout, storage, history).run(now=NOW + 3)
    assert second.ran and second.commit_id is not None and second.commit_id != first.commit_id
    assert not (layout.long_term / ".git" / lock).exists()
    log = await Dream(layout, storage, history).dream_log(5)
    assert [v.commit_id for v in log[:2]] == [second.commit_id, first.commit_id]


async def test_memory_dream_returns_over_a_stale_ref_lock(tmp_path: Path) -> None:
    # The embedded summarizer: Dream asks the memory's summarizer, and a scripted one's text holds
    # nothing Dream can file (no edit, no commit to lock).
    async with aiden.open_memory(tmp_path, config=config_for()) as memory:
        for i in range(30):
            await memory.append(
                SessionEvent(type="user_input", role="user", content=f"x:{i} fix the parser {i}")
            )
        await memory.maintain(manual=True)
        assert (await memory.dream()).commit_id is not None
        (tmp_path / "memory" / "long_term" / ".git" / "refs" / "heads" / "main.lock").write_bytes(b"")
        for i in range(30, 60):
            await memory.append(
                SessionEvent(type="user_input", role="user", content=f"x:{i} deploy the cache {i}")
            )
        await memory.maintain(manual=True)
        with anyio.fail_after(20):  # before the fix: waits forever
            outcome = await memory.dream()
        assert outcome.ran and outcome.commit_id is not None


# Before the fix serve() answered only AidenError/OSError: a foreign exception ended the long-term
# worker without a reply and memory.dream() waited forever (not even fail_after ended it), hence a child.
def test_a_foreign_error_in_a_long_term_handler_is_answered_not_hung(
    tmp_path: Path, fork_server: ForkServer | None
) -> None:
    child = spawn_child(fork_server, ["foreign", str(tmp_path / "root")], tmp_path, "foreign")
    try:
        rc = child.wait(30)
    except TimeoutError:
        child.kill()
        pytest.fail("memory.dream() did not return within 30 s after a foreign error in its handler")
    assert rc == 0, child.stderr()[-2000:]
    assert "RAISED AidenError" in child.output().lines

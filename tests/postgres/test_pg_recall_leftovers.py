"""The recall caches a killed worker left on its root are removed by the next process serving a session there.

A cache (``memory/recall/<session_id>.sqlite3``) is deleted when its memory closes; a SIGKILLed (or
OOM-killed) worker's stayed for good, growing with every crash. The first PostgreSQL session a process
serves on a root now removes every cache there that no process has open and that was untouched for a
day (``LEFTOVER_AGE_S``), and only those: a live worker's parked memory has closed its file too, and
removing it made every new worker re-index the parked sessions of the others.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from aiden import Layout, open_memory
from aiden.recall.db import LEFTOVER_AGE_S

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CHILD = Path(__file__).with_name("pg_recall_child.py")


@contextmanager
def _worker(root: Path, dsn: str, session_ids: list[str]) -> Iterator[subprocess.Popen[str]]:
    """A worker process serving ``session_ids`` on ``root``, each with its recall cache open (killed at the end)."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    args = [sys.executable, str(CHILD), str(root), dsn, ",".join(session_ids)]
    pipe = subprocess.PIPE
    with subprocess.Popen(args, stdin=pipe, stdout=pipe, stderr=pipe, env=env, text=True) as child:
        try:
            assert child.stdout is not None and child.stderr is not None
            line = child.stdout.readline()
            if line != "ready\n":
                child.kill()
                pytest.fail(f"worker did not start: {line!r} {child.stderr.read()[-2000:]}")
            yield child
        finally:
            child.kill()


def _caches(root: Path) -> list[str]:
    return sorted(os.listdir(Layout(root).memory / "recall"))


async def test_a_killed_workers_caches_are_removed_by_the_next_session_on_the_root(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    killed = [session_ids(), session_ids()]
    with _worker(tmp_path, pg_dsn, killed) as child:
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
    left = sorted(f"{sid}.sqlite3{end}" for sid in killed for end in ("", "-shm", "-wal"))
    assert _caches(tmp_path) == left
    day_ago = time.time() - LEFTOVER_AGE_S - 60
    for name in left:
        os.utime(Layout(tmp_path).memory / "recall" / name, (day_ago, day_ago))

    async with open_memory(tmp_path, store=pg_dsn, session_id=session_ids()):
        pass
    assert _caches(tmp_path) == []


async def test_a_cache_no_process_holds_that_changed_within_a_day_is_kept(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    """As a live worker's parked memory leaves it (its file closed, no lock held)."""
    parked = session_ids()
    with _worker(tmp_path, pg_dsn, [parked]) as child:
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
    async with open_memory(tmp_path, store=pg_dsn, session_id=session_ids()) as memory:
        assert await memory.recall_session_chunks("budget") == []
    assert _caches(tmp_path) == [f"{parked}.sqlite3", f"{parked}.sqlite3-shm", f"{parked}.sqlite3-wal"]


async def test_a_cache_another_live_process_holds_is_kept(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    held = session_ids()
    cache = Layout(tmp_path).recall_cache(held)
    with _worker(tmp_path, pg_dsn, [held]) as child:
        ident = cache.stat().st_ino
        async with open_memory(tmp_path, store=pg_dsn, session_id=session_ids()) as memory:
            assert await memory.recall_session_chunks("budget") == []
        assert _caches(tmp_path) == [f"{held}.sqlite3", f"{held}.sqlite3-shm", f"{held}.sqlite3-wal"]
        assert cache.stat().st_ino == ident
        # Its worker closes it cleanly: removed then.
        assert child.stdin is not None
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    assert _caches(tmp_path) == []

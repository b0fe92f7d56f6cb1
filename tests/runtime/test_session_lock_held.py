"""``SessionLock.held``: the lock for a ``with`` block, released (descriptor closed) however it ends."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aiden.errors import LockError
from aiden.storage.fs import Storage
from aiden.storage.locks import SessionLock


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_held_excludes_other_holders_for_the_block_and_releases_when_it_raises(tmp_path: Path) -> None:
    path = tmp_path / "memory" / "session.lock"
    lock, other = SessionLock(Storage(), path), SessionLock(Storage(), path)
    timed_out = f"timed out after 0.01s waiting for {path}"
    before = _open_fds()
    with pytest.raises(ValueError, match=r"^boom$"), lock.held(1.0):
        assert other.try_acquire() is False  # one process's two holders exclude each other
        with pytest.raises(LockError) as waited:
            other.acquire(0.01)
        assert str(waited.value) == timed_out
        raise ValueError("boom")
    other.close()
    assert _open_fds() == before  # an idle lock keeps no descriptor
    assert other.try_acquire() is True  # released by the raise
    with pytest.raises(LockError) as refused, lock.held(0.01):
        pytest.fail("the block ran without the lock")
    assert str(refused.value) == timed_out
    other.release()
    with lock.held(0.01):
        pass
    assert _open_fds() == before

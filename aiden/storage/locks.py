"""The session lock: ``flock`` on a lock file that is never deleted or renamed (every process locks one inode).

Each holder opens its own descriptor, per acquisition: ``flock`` locks belong
to the open file description, so two actors of one process exclude each other
as two processes do. Acquisition blocks: callers run it in a worker thread.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiden.errors import LockError, StorageError
from aiden.storage.fs import Storage

__all__ = ["SessionLock"]

_POLL_MIN_S = 0.0005
_POLL_MAX_S = 0.02


class SessionLock:
    """An exclusive inter-process lock. Not reentrant; use from one thread at a time."""

    def __init__(self, storage: Storage, path: Path) -> None:
        self._storage = storage
        self._path = path
        self._fd: int | None = None
        self._held = False

    def _ensure_fd(self) -> int:
        if self._fd is None:
            try:
                # O_NOFOLLOW: a lock file replaced by a symlink is refused (ELOOP), not followed.
                self._fd = os.open(self._path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
            except FileNotFoundError:
                self._storage.mkdir(self._path.parent)
                self._fd = self._storage.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
                self._storage.fsync_dir(self._path.parent)
            except OSError as exc:
                raise LockError(
                    f"cannot open lock file {self._path}: {exc.strerror}", errno=exc.errno
                ) from exc
        return self._fd

    def acquire(self, timeout: float) -> None:
        """Block until the lock is held or ``timeout`` seconds passed (then :class:`LockError`)."""
        deadline = time.monotonic() + timeout
        delay = _POLL_MIN_S
        while not self.try_acquire():
            now = time.monotonic()
            if now >= deadline:
                raise LockError(f"timed out after {timeout}s waiting for {self._path}")
            time.sleep(min(delay, deadline - now))
            delay = min(delay * 2, _POLL_MAX_S)

    @contextmanager
    def held(self, timeout: float) -> Iterator[None]:
        """Hold the lock for the block (:meth:`acquire`), released however the block ends."""
        self.acquire(timeout)
        try:
            yield
        finally:
            self.release()

    def try_acquire(self) -> bool:
        """Take the lock if it is free right now; False when another holder has it."""
        if self._held:
            raise LockError("session lock is not reentrant")
        fd = self._ensure_fd()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as exc:
            raise LockError(f"flock {self._path} failed: {exc.strerror}", errno=exc.errno) from exc
        self._held = True
        return True

    def release(self) -> None:
        """Release the lock if held, and close its descriptor.

        An idle open session keeps no descriptor (thousands of open sessions must fit ``ulimit -n``).
        """
        if self._held and self._fd is not None:
            self._held = False
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError as exc:
                raise StorageError(f"unlock {self._path} failed: {exc.strerror}", errno=exc.errno) from exc
            finally:
                os.close(fd)

    def close(self) -> None:
        """Release and close the descriptor."""
        try:
            self.release()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

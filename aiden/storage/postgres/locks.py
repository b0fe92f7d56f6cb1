"""Locks across workers: session-scoped PostgreSQL advisory locks (the compaction lock, Dream's).

``pg_try_advisory_lock`` on a connection taken from the pool and kept for as
long as the lock is held (an advisory lock belongs to its server session).
The key is derived server-side from the session id (``hashtextextended``):
two session ids sharing a hash only serialize their passes, never mix data.
A store that holds the lock and asks again gets :class:`LockError` at
once (not reentrant, as the file store's ``SessionLock``). If the held connection
dies the server drops the lock; the commit's check of the index
(:class:`~aiden.errors.CommitConflict`) still keeps a concurrent pass from
committing a stale plan.
"""

from __future__ import annotations

import threading
import time
from typing import Final

from aiden.errors import LockError
from aiden.storage.postgres.schema import Conn, Pool, translated

__all__ = ["AdvisoryLock"]

_POLL_MIN_S: Final = 0.001
_POLL_MAX_S: Final = 0.05


class AdvisoryLock:
    """One advisory lock (``key``), held through a dedicated pooled connection; ``name`` is for messages."""

    def __init__(self, pool: Pool, key: str, name: str = "compaction lock") -> None:
        self._pool = pool
        self._key = key
        self._name = name
        self._local = threading.Lock()
        self._conn: Conn | None = None

    @property
    def held(self) -> bool:
        """True while this store holds the lock."""
        return self._conn is not None

    @property
    def connection(self) -> Conn:
        """The connection holding the lock: the holder may run its statements on it (LockError if not held)."""
        if self._conn is None:
            raise LockError(f"the {self._name} is not held")
        return self._conn

    def try_acquire(self, timeout: float) -> bool:
        """Take the lock if no one holds it; False at once when another worker (or this object) does.

        ``timeout`` bounds only the wait for a pooled connection.
        """
        if not self._local.acquire(blocking=False):
            return False
        conn: Conn | None = None
        try:
            with translated(f"taking the {self._name}"):
                conn = self._pool.getconn(timeout=timeout)
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (self._key,)
                ).fetchone()
        except BaseException:
            if conn is not None:
                self._pool.putconn(conn)
            self._local.release()
            raise
        if row is None or row[0] is not True:
            self._pool.putconn(conn)
            self._local.release()
            return False
        self._conn = conn
        return True

    def acquire(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for another worker's lock (then :class:`LockError`)."""
        deadline = time.monotonic() + timeout
        # Held by this store already (another actor of it, or a retake): an error, as flock's SessionLock.
        if not self._local.acquire(blocking=False):
            raise LockError(f"the {self._name} is not reentrant: this store holds it")
        try:
            with translated(f"taking the {self._name}"):
                conn = self._pool.getconn(timeout=max(0.001, deadline - time.monotonic()))
            try:
                self._poll(conn, deadline, timeout)
            except BaseException:
                self._pool.putconn(conn)
                raise
            self._conn = conn
        except BaseException:
            self._local.release()
            raise

    def _poll(self, conn: Conn, deadline: float, timeout: float) -> None:
        delay = _POLL_MIN_S
        while True:
            with translated(f"taking the {self._name}"):
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (self._key,)
                ).fetchone()
            if row is not None and row[0] is True:
                return
            now = time.monotonic()
            if now >= deadline:
                raise LockError(
                    f"timed out after {timeout}s waiting for the {self._name} (held by another worker)"
                )
            time.sleep(min(delay, deadline - now))
            delay = min(delay * 2, _POLL_MAX_S)

    def release(self) -> None:
        """Release the lock if held (a connection lost meanwhile took the lock with it)."""
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        try:
            with translated(f"releasing the {self._name}"):
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (self._key,))
        except BaseException:
            # Closing the connection ends its server session, which drops the lock for sure.
            conn.close()
            raise
        finally:
            self._pool.putconn(conn)
            self._local.release()

"""Locks across workers: session-scoped PostgreSQL advisory locks (the compaction lock, Dream's).

Every lock a process takes through one pool lives on one connection of it,
held while any lock is held (:class:`_Holder`): many memories sharing a pool
need one connection for their locks, not one each. Keys are hashed server-side
(``hashtextextended``): two ids sharing a hash only serialize, never mix data.
Advisory locks are reentrant per server session, so the holder records which
lock object holds each key, making them exclusive within the process too. If
the holding connection dies its locks go with it; the commit's index check
(:class:`~aiden.errors.CommitConflict`) still refuses a stale plan.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Final

import psycopg

from aiden.errors import LockError
from aiden.storage.postgres.schema import Conn, Pool, describe, translated

__all__ = ["AdvisoryLock"]

log = logging.getLogger("aiden.storage")

_POLL_MIN_S: Final = 0.001
_POLL_MAX_S: Final = 0.05


class _Holder:
    """The connection of one pool that holds every advisory lock this process took through the pool."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._mutex = threading.Lock()  # one statement at a time on the connection
        self._conn: Conn | None = None
        self._owners: dict[str, object] = {}  # key -> the AdvisoryLock holding it

    def try_take(self, key: str, owner: object, timeout: float) -> bool:
        """Take ``key`` for ``owner`` if no one holds it (False at once otherwise).

        The wait for a pooled connection is bounded by ``timeout`` and the pool's own
        timeout, and holds no mutex: every release (so every store's close) needs it,
        and a server that is down would hold them all up for the whole wait.
        """
        spare: Conn | None = None
        try:
            while True:
                with self._mutex:
                    if key in self._owners:
                        return False
                    if self._conn is None and spare is not None:
                        self._conn, spare = spare, None
                    conn = self._conn
                    if conn is not None:
                        return self._take(conn, key, owner)
                spare = self._pool.getconn(timeout=min(timeout, self._pool.timeout))
        finally:
            if spare is not None:  # another thread brought the holding connection meanwhile
                self._pool.putconn(spare)

    def _take(self, conn: Conn, key: str, owner: object) -> bool:
        """:meth:`try_take`'s statement on the holding connection (under the mutex)."""
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()
        except BaseException:
            self._lost_if_broken()
            self._give_back_if_idle()
            raise
        if row is None or row[0] is not True:
            self._give_back_if_idle()
            return False
        self._owners[key] = owner
        return True

    def holds(self, key: str, owner: object) -> bool:
        return self._owners.get(key) is owner

    def release(self, key: str, owner: object) -> None:
        """Release ``key`` if ``owner`` holds it (a lost connection took the lock with it)."""
        with self._mutex:
            if self._owners.get(key) is not owner:
                return
            del self._owners[key]
            conn = self._conn
            try:
                if conn is not None:
                    conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
            except BaseException as exc:
                lost = isinstance(exc, psycopg.Error) and conn is not None and (conn.closed or conn.broken)
                # Closing the connection ends its server session, which drops its locks for sure.
                self._lost_if_broken(force=True)
                if not lost:
                    raise
                # A lost connection (a server restart, say) already released the lock: not a failure.
                log.warning("%s was released with its lost connection: %s", key, describe(exc))
            finally:
                self._give_back_if_idle()

    def _lost_if_broken(self, *, force: bool = False) -> None:
        """After a failed statement: a closed connection lost every lock on it (``force``: close it)."""
        conn = self._conn
        if conn is None or not (force or conn.closed or conn.broken):
            return
        conn.close()
        self._owners.clear()
        self._conn = None
        self._pool.putconn(conn)  # the pool discards a closed connection

    def _give_back_if_idle(self) -> None:
        if self._conn is not None and not self._owners:
            conn, self._conn = self._conn, None
            self._pool.putconn(conn)


_HOLDERS: weakref.WeakKeyDictionary[Pool, _Holder] = weakref.WeakKeyDictionary()
_HOLDERS_GUARD = threading.Lock()


def _holder(pool: Pool) -> _Holder:
    with _HOLDERS_GUARD:
        return _HOLDERS.setdefault(pool, _Holder(pool))


class AdvisoryLock:
    """One advisory lock (``key``), held on its pool's lock connection; ``name`` is for messages."""

    def __init__(self, pool: Pool, key: str, name: str = "compaction lock") -> None:
        self._holder = _holder(pool)
        self._key = key
        self._name = name

    def try_acquire(self, timeout: float) -> bool:
        """Take the lock if no one holds it; False at once when another worker (or this object) does.

        ``timeout`` bounds only the wait for a pooled connection (as does the pool's own timeout).
        """
        with translated(f"taking the {self._name}"):
            return self._holder.try_take(self._key, self, timeout)

    def acquire(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for another worker's lock (then :class:`LockError`)."""
        deadline = time.monotonic() + timeout
        # Not reentrant, as the file store's SessionLock.
        if self._holder.holds(self._key, self):
            raise LockError(f"the {self._name} is not reentrant: this store holds it")
        delay = _POLL_MIN_S
        while True:
            if self.try_acquire(max(0.001, deadline - time.monotonic())):
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
        with translated(f"releasing the {self._name}"):
            self._holder.release(self._key, self)

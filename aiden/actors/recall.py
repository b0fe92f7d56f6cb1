"""The recall index actor: one per host, owning the SQLite FTS5 recall index of every session it serves.

A session's requests run in a worker thread one at a time, in order (no locking of its own);
sessions run in parallel. An index opens at its session's first request and closes when the
session parks or closes (:class:`~aiden.messages.CloseIndex`). It follows the store's change feed
before each search; a compaction sends :class:`~aiden.messages.RecallSync`, so the new chunk is
indexed (and embedded) in the pass and a recall never embeds more than its query.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, assert_never

import anyio
import msgspec
from anyio.lowlevel import RunVar

from aiden.actors.mailbox import Latest, failure
from aiden.config import Config
from aiden.errors import AidenError, ClosedError
from aiden.host import HostActor
from aiden.messages import (
    CloseIndex,
    RecallEvents,
    RecallHits,
    RecallInbox,
    RecallLookup,
    RecallOutbox,
    RecallQuery,
    RecallRehydrate,
    RecallSync,
    RecallSynced,
)
from aiden.recall.tool import RecallStats

if TYPE_CHECKING:
    from aiden.recall.embedding import Embedder
    from aiden.recall.index import RecallIndex
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import ChangeFeed

__all__ = ["RecallActor", "RecallSession"]

log = logging.getLogger("aiden.recall")


class RecallSession(NamedTuple):
    """What the host's recall index actor needs of one session: registered by its runtime while it is open.

    The index follows ``feed`` when given, else a file change feed over ``layout``.
    """

    layout: Layout
    storage: Storage
    config: Config
    embedder: Embedder | None
    feed: ChangeFeed | None
    stats: Latest[RecallStats | None]
    """Where the index's telemetry is published after every request (an immutable snapshot)."""
    dispatch: Callable[[RecallOutbox], None]
    """Hands a reply to the session's waiting caller (called by the actor's reply router)."""


class RecallActor(HostActor[RecallInbox, RecallOutbox, RecallSession]):
    """Serves recall queries, exact lookups and rehydration of every session of its host."""

    def __init__(self) -> None:
        super().__init__("recall index", RecallInbox, RecallOutbox)
        # The open indexes, each with its session's counts before it opened (earlier instances:
        # the session parked while idle), so the telemetry stays "since the memory opened".
        self._open: dict[int, tuple[RecallIndex, RecallStats | None]] = {}
        # The open memories of each database (two of one session on one root share it).
        self._users: Counter[Path] = Counter()
        # Sessions whose first request first sweeps their root's recall caches (see attach).
        self._sweeps: dict[int, Path] = {}

    def attach(self, key: int, session: RecallSession) -> None:
        """Serve session ``key`` from now on (its runtime attaches it before its first request).

        The first PostgreSQL session of a root in this process removes, at its first request (a recall, its
        parking or its close), the recall caches there that no process has open: a killed process's.
        """
        super().attach(key, session)
        path = _db_path(session)
        self._users[path] += 1
        if path != session.layout.recall_db and _claim(path.parent.resolve()):
            self._sweeps[key] = path.parent.resolve()  # (one directory however the root is spelled)

    def detach(self, key: int) -> None:
        """Serve session ``key`` no more (its memory closed): a PostgreSQL session's recall cache is deleted
        once no other open memory uses it.

        The cache lives while the memory is open, parked or not, so a worker serving thousands of
        sessions over time keeps the files of those open only. The file store's stays with its session.
        """
        session = self._sessions.get(key)
        super().detach(key)
        unswept = self._sweeps.pop(key, None)
        if unswept is not None:
            _unclaim(unswept)  # (no request came through: the next session there sweeps)
        if session is None:
            return
        path = _db_path(session)
        self._users[path] -= 1
        if self._users[path] > 0:
            return
        del self._users[path]
        if path == session.layout.recall_db or key in self._open:
            return  # (still open: a request outlived the close's timeout)
        from aiden.recall.db import remove_database

        try:
            # A few unlinks, on the loop: the file is gone when the close returns.
            remove_database(path, session.storage)
        except AidenError as exc:
            log.warning("recall: cannot remove %s: %s", path, exc)

    async def serve_queued(self, key: int, queue: deque[RecallInbox]) -> None:
        """Answer session ``key``'s next request."""
        msg = queue.popleft()
        try:
            reply = await self._handle(key, msg)
        except Exception as exc:
            reply = failure(self.name, msg, exc, key)
        await self.reply(reply)

    async def _handle(self, key: int, msg: RecallInbox) -> RecallOutbox:
        sweep = self._sweeps.pop(key, None)
        if sweep is not None:  # (popped at its detach: attached still)
            # Kept: the caches of the sessions served here, open or not (a parked one's file is closed).
            keep = {path.name for path in self._users if path.parent == sweep}
            await _sweep(sweep, self._sessions[key].storage, keep)
        if isinstance(msg, CloseIndex):
            opened = self._open.pop(key, None)
            if opened is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(opened[0].close, limiter=_closing())
            return RecallSynced(key, msg.request_id)
        session = self._sessions.get(key)
        if session is None:
            raise ClosedError("memory is closed")
        index, before = await self._index(key, session)
        try:
            match msg:
                case RecallQuery():
                    hits = await anyio.to_thread.run_sync(
                        lambda: index.search(
                            msg.query, k=msg.k, types=msg.types, roles=msg.roles, since=msg.since, until=msg.until
                        )
                    )
                    return RecallHits(key, msg.request_id, hits)
                case RecallLookup(chunk_id=chunk_id):
                    hit = await anyio.to_thread.run_sync(index.lookup, chunk_id)
                    return RecallHits(key, msg.request_id, [hit] if hit is not None else [])
                case RecallRehydrate(chunk_id=chunk_id, seqs=seqs):
                    events = await anyio.to_thread.run_sync(index.rehydrate, chunk_id, seqs)
                    return RecallEvents(key, msg.request_id, events)
                case RecallSync():
                    await anyio.to_thread.run_sync(index.sync)
                    return RecallSynced(key, msg.request_id)
                case _:
                    assert_never(msg)
        finally:
            # Published after failures too: the index counts them.
            session.stats.publish(_since_open(before, index.stats()))

    async def _index(self, key: int, session: RecallSession) -> tuple[RecallIndex, RecallStats | None]:
        """Session ``key``'s index, opened at its first request (sqlite3 loads only when used)."""
        opened = self._open.get(key)
        if opened is not None:
            return opened
        from aiden.recall.index import RecallIndex

        source: Layout | ChangeFeed = session.layout if session.feed is None else session.feed
        index = await anyio.to_thread.run_sync(
            lambda: RecallIndex(
                source,
                session.config,
                storage=session.storage,
                embedder=session.embedder,
                db_path=_db_path(session),
            )
        )
        opened = self._open[key] = (index, session.stats.value)
        return opened


def _db_path(session: RecallSession) -> Path:
    """Where ``session``'s recall index lives: ``session/recall.sqlite3``, but a PostgreSQL session's own
    file under ``recall/``, as a worker's root serves many sessions (one shared file showed each the others')."""
    # A PostgresSessionStore instance means its module is loaded: looking there keeps psycopg out of file opens.
    module = sys.modules.get("aiden.storage.postgres.store")
    if module is not None and isinstance(session.feed, module.PostgresSessionStore):
        return session.layout.recall_cache(session.feed.session_id)
    return session.layout.recall_db


_SWEPT: set[Path] = set()
"""The recall cache directories of this process's roots swept of a killed process's caches (see :meth:`RecallActor.attach`)."""
_SWEPT_LOCK = threading.Lock()  # hosts on other event loops (threads) attach too


def _claim(directory: Path) -> bool:
    """True the first time ``directory`` is claimed in this process: the caller sweeps it."""
    with _SWEPT_LOCK:
        if directory in _SWEPT:
            return False
        _SWEPT.add(directory)
        return True


def _unclaim(directory: Path) -> None:
    with _SWEPT_LOCK:
        _SWEPT.discard(directory)


async def _sweep(directory: Path, storage: Storage, keep: set[str]) -> None:
    """Remove the recall caches in ``directory`` that no process has open but ``keep``, in a worker thread."""
    from aiden.recall.db import remove_unheld

    try:
        removed = await anyio.to_thread.run_sync(remove_unheld, directory, storage, keep)
    except AidenError as exc:
        log.warning("recall: cannot clear %s of caches left by killed processes: %s", directory, exc)
        return
    if removed:
        log.info("recall: removed %d caches no process had open from %s", len(removed), directory)


_CLOSING: RunVar[anyio.CapacityLimiter] = RunVar("aiden_recall_closing")


def _closing() -> anyio.CapacityLimiter:
    """One index close at a time per event loop: idle sessions parking together need no thread each."""
    try:
        return _CLOSING.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(1)
        _CLOSING.set(limiter)
        return limiter


def _since_open(before: RecallStats | None, now: RecallStats) -> RecallStats:
    """``now``'s counts added to an earlier instance's: the telemetry stays "since the memory opened"."""
    if before is None:
        return now
    counts = {name: getattr(before, name) + getattr(now, name) for name in _COUNTS}
    return msgspec.structs.replace(now, **counts)


_COUNTS = ("recall_calls", "results_returned", "pending_chunks_recalled", "rebuilds", "embedding_failures")
"""The :class:`RecallStats` fields that count since the index opened (the others describe it now)."""

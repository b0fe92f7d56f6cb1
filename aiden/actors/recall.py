"""The recall index actor: owns the SQLite FTS5 recall index of the active session.

Every request runs in a worker thread (sqlite3 blocks) one at a time, so the
index needs no locking of its own. The index follows the session store's
change feed before each search (a cheap check when nothing moved), so
rotations need not notify this actor. A compaction does (:class:`RecallSync`,
sent by the maintenance pass's after-compaction hook): the new chunk is
indexed and, with an embedder, its events are embedded then, in the pass, so
a recall never embeds more than its query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.lowlevel import RunVar
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Latest, serve
from aiden.config import Config
from aiden.messages import (
    Codec,
    RecallEvents,
    RecallHits,
    RecallInbox,
    RecallLookup,
    RecallOutbox,
    RecallQuery,
    RecallRehydrate,
    RecallSync,
    RecallSynced,
    codec,
)
from aiden.recall.tool import RecallStats

if TYPE_CHECKING:
    from aiden.recall.embedding import Embedder
    from aiden.recall.index import RecallIndex
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import ChangeFeed

__all__ = ["RecallActor"]


class RecallActor:
    """Serves recall queries, exact lookups and rehydration.

    The index follows ``feed`` (the session store) when given, else a
    :class:`~aiden.storage.changes.FileChangeFeed` over ``layout``; its
    database is ``layout.recall_db`` either way.
    """

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        config: Config,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
        embedder: Embedder | None = None,
        *,
        feed: ChangeFeed | None = None,
        stats: Latest[RecallStats | None] | None = None,
    ) -> None:
        self._layout = layout
        self._feed = feed
        self._storage = storage
        self._embedder = embedder
        self._config = config
        self._inbox = inbox
        self._outbox = outbox
        self._in: Codec[RecallInbox] = codec(RecallInbox)
        self._out: Codec[RecallOutbox] = codec(RecallOutbox)
        self._index: RecallIndex | None = None  # opened in run(): sqlite3 loads only when used
        self.stats: Latest[RecallStats | None] = stats or Latest(None)
        """The index's telemetry after the latest request (an immutable snapshot)."""
        # The counts of this session's earlier index instances (its actors parked while idle).
        self._before = self.stats.value

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until the inbox closes."""
        from aiden.recall.index import RecallIndex

        source: Layout | ChangeFeed = self._layout if self._feed is None else self._feed
        self._index = await anyio.to_thread.run_sync(
            lambda: RecallIndex(
                source,
                self._config,
                storage=self._storage,
                embedder=self._embedder,
                db_path=self._layout.recall_db,
            )
        )
        task_status.started()
        try:
            await serve("recall", self._inbox, self._outbox, self._in, self._out, self._serve)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._index.close, limiter=_closing())

    async def _serve(self, msg: RecallInbox) -> RecallHits | RecallEvents | RecallSynced:
        index = self._index
        assert index is not None
        try:
            match msg:
                case RecallQuery():
                    hits = await anyio.to_thread.run_sync(
                        lambda: index.search(
                            msg.query, k=msg.k, types=msg.types, roles=msg.roles, since=msg.since, until=msg.until
                        )
                    )
                    return RecallHits(msg.request_id, hits)
                case RecallLookup(chunk_id=chunk_id):
                    hit = await anyio.to_thread.run_sync(index.lookup, chunk_id)
                    return RecallHits(msg.request_id, [hit] if hit is not None else [])
                case RecallRehydrate(chunk_id=chunk_id, seqs=seqs):
                    return RecallEvents(msg.request_id, await anyio.to_thread.run_sync(index.rehydrate, chunk_id, seqs))
                case RecallSync():
                    await anyio.to_thread.run_sync(index.sync)
                    return RecallSynced(msg.request_id)
                case _:
                    assert_never(msg)
        finally:
            # Published after failures too: the index counts them.
            self.stats.publish(_since_open(self._before, index.stats()))


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
    return msgspec.structs.replace(
        now,
        recall_calls=before.recall_calls + now.recall_calls,
        results_returned=before.results_returned + now.results_returned,
        pending_chunks_recalled=before.pending_chunks_recalled + now.pending_chunks_recalled,
        rebuilds=before.rebuilds + now.rebuilds,
        embedding_failures=before.embedding_failures + now.embedding_failures,
    )

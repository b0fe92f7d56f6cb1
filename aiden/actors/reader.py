"""The session reader actor: every read of the active session from the caller's side.

``Memory`` holds no store: hot window, events by seq, the chunk index and the
summary come back as messages. Several worker tasks serve one inbox, so a slow
read (a chunk file of a big compaction) does not queue the prompt builder's
hot-window read behind it.
"""

from __future__ import annotations

import bisect
from typing import assert_never

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.serve import serve
from aiden.events import SessionEvent
from aiden.messages import (
    Codec,
    EventsRead,
    HeldWindow,
    HotWindowRead,
    IndexRead,
    ReaderInbox,
    ReaderOutbox,
    ReadEvents,
    ReadHotWindow,
    ReadIndex,
    ReadSummary,
    SummaryRead,
    codec,
)
from aiden.storage.protocol import SessionStore

__all__ = ["SessionReader"]


class SessionReader:
    """Serves reads of the store; run :meth:`run` once per worker."""

    def __init__(
        self,
        store: SessionStore,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
    ) -> None:
        self._store = store
        self._inbox = inbox
        self._outbox = outbox
        self._in: Codec[ReaderInbox] = codec(ReaderInbox)
        self._out: Codec[ReaderOutbox] = codec(ReaderOutbox)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until the inbox closes (each worker gets its own clones of both streams)."""
        inbox, outbox = self._inbox.clone(), self._outbox.clone()
        task_status.started()
        await serve("reader", inbox, outbox, self._in, self._out, self._serve)

    async def _serve(self, msg: ReaderInbox) -> ReaderOutbox:
        store = self._store
        match msg:
            case ReadHotWindow(request_id=rid, held=held):
                return _hot_reply(rid, await anyio.to_thread.run_sync(store.read_hot_window), held)
            case ReadEvents(request_id=rid, seqs=seqs):
                return EventsRead(rid, await anyio.to_thread.run_sync(store.read_events, seqs))
            case ReadIndex(request_id=rid):
                return IndexRead(rid, await anyio.to_thread.run_sync(store.load_index))
            case ReadSummary(request_id=rid):
                return SummaryRead(rid, await anyio.to_thread.run_sync(store.read_summary))
            case _:
                assert_never(msg)

    def close_streams(self) -> None:
        """Close the original stream ends (the workers hold clones)."""
        self._inbox.close()
        self._outbox.close()


def _hot_reply(rid: int, hot: list[SessionEvent], held: HeldWindow | None) -> HotWindowRead:
    """Only the events after the caller's copy when the window still holds that copy, else all.

    Between compactions the window only grows at its end. A compaction drops
    events (before or between the ones it keeps: the root input and pins stay),
    a recovery or a rotation replaces the window: each changes its first event,
    the event at the held last seq or how many events reach up to it. Events
    are never inserted below the newest seq, so equal ends and count mean the
    same events. Seqs are increasing: the held last event is found by bisection.
    """
    if held is not None and hot and hot[0].seq == held.first_seq and hot[0].timestamp == held.first_time:
        at = bisect.bisect_left(hot, held.last_seq, key=lambda e: e.seq)
        if (
            at + 1 == held.count
            and at < len(hot)
            and hot[at].seq == held.last_seq
            and hot[at].timestamp == held.last_time
        ):
            return HotWindowRead(rid, hot[at + 1 :], tail=True)
    return HotWindowRead(rid, hot)


"""The session writer actor: the only appender of the session (through the store).

Group commit: take one request, drain whatever else is queued, then hand the
whole batch to :meth:`SessionStore.append` in ONE worker-thread hop (one lock,
one write, one fsync) and only then acknowledge every request of it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import assert_never

import anyio
from anyio.abc import TaskStatus
from anyio.lowlevel import checkpoint
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.config import Config
from aiden.errors import AidenError, StorageError
from aiden.messages import (
    Ack,
    Appended,
    AppendEvents,
    Codec,
    Flush,
    Flushed,
    Rejected,
    WriterInbox,
    WriterOutbox,
    error_info,
)
from aiden.storage.protocol import SessionStore

__all__ = ["SessionWriter"]

log = logging.getLogger("aiden.writer")


class SessionWriter:
    """Batches append requests into group commits of the store."""

    def __init__(
        self,
        store: SessionStore,
        config: Config,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
    ) -> None:
        self._store = store
        self._max_batch = config.max_batch_events
        self._inbox = inbox
        self._outbox = outbox
        self._in: Codec[WriterInbox] = Codec(WriterInbox)
        self._out: Codec[WriterOutbox] = Codec(WriterOutbox)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the inbox until it is closed; then close the outbox."""
        task_status.started()
        async with self._inbox, self._outbox:
            while (raw := await self._next()) is not None:
                batch = [self._in.decode(raw)]
                n = len(batch[0].events) if isinstance(batch[0], AppendEvents) else 0
                while n < self._max_batch:
                    try:
                        msg = self._in.decode(self._inbox.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                    batch.append(msg)
                    if isinstance(msg, AppendEvents):
                        n += len(msg.events)
                await self._handle(batch)

    async def _next(self) -> bytes | None:
        """The next request, None once the inbox is closed and drained.

        Taken without a checkpoint when one is already queued (the common case
        under load: callers queue while the previous batch is in fsync): every
        append batch yields in its worker-thread hop anyway, and an extra event
        loop pass per batch is a measurable share of the CPU per event.
        """
        try:
            return self._inbox.receive_nowait()
        except anyio.WouldBlock:
            pass
        except anyio.EndOfStream:
            return None
        try:
            return await self._inbox.receive()
        except anyio.EndOfStream:
            return None

    async def _handle(self, batch: Sequence[WriterInbox]) -> None:
        appends: list[AppendEvents] = []
        flushes: list[int] = []
        for msg in batch:
            match msg:
                case AppendEvents():
                    appends.append(msg)
                case Flush(request_id=rid):
                    flushes.append(rid)
                case _:
                    assert_never(msg)
        if appends:
            try:
                seqs = await anyio.to_thread.run_sync(self._store.append, [a.events for a in appends])
            except AidenError as exc:
                log.error("append batch of %d requests failed: %s", len(appends), exc)
                await self._reply(Rejected([a.request_id for a in appends], error_info(exc)))
            except OSError as exc:
                await self._reply(
                    Rejected(
                        [a.request_id for a in appends], error_info(StorageError(str(exc), errno=exc.errno))
                    )
                )
            else:
                await self._reply(
                    Appended([Ack(a.request_id, s) for a, s in zip(appends, seqs, strict=True)])
                )
        for rid in flushes:
            await self._reply(Flushed(rid))
        if not appends:
            # A flush-only batch made no worker-thread hop: yield once, so a
            # stream of flushes cannot keep the loop to this task.
            await checkpoint()

    async def _reply(self, message: WriterOutbox) -> None:
        # Without a checkpoint when the outbox has room (it is drained by the
        # reply router; back-pressure still applies when it is full).
        raw = self._out.encode(message)
        try:
            self._outbox.send_nowait(raw)
        except anyio.WouldBlock:
            await self._outbox.send(raw)

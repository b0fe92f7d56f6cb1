"""The active session's two actors: the writer (its only appender) and the reader (every read of it).

The writer group-commits (see :class:`SessionWriter`). Under asyncio its worker-thread hop
goes to a few long-lived threads shared by every session (:class:`_CommitThreads`): anyio's
``to_thread.run_sync`` costs a limiter token, a context copy and a pool lookup per call, and a
thread per session would grow with open sessions. Under trio the hop stays anyio's.

Several reader worker tasks serve one inbox, so a slow read does not queue the prompt
builder's hot-window read behind it.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, assert_never

import anyio
from anyio.abc import TaskStatus
from anyio.lowlevel import checkpoint
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Waiter, _running_asyncio_loop, serve
from aiden.errors import AidenError, ClosedError
from aiden.events import SessionEvent
from aiden.host import HostActor
from aiden.messages import (
    Ack,
    Appended,
    AppendEvents,
    Codec,
    ErrorInfo,
    EventsRead,
    Flush,
    Flushed,
    HeldWindow,
    HotWindowRead,
    IndexRead,
    ReaderInbox,
    ReaderOutbox,
    ReadEvents,
    ReadHotWindow,
    ReadIndex,
    ReadSummary,
    Rejected,
    SummaryRead,
    WriterInbox,
    WriterOutbox,
    codec,
    error_info,
)
from aiden.storage.protocol import AppendGroup, PreparedEvent, SessionStore

__all__ = ["SessionReader", "SessionWriter", "WriterSession"]

log = logging.getLogger("aiden.writer")

Seqs = list[list[int]]


class _Job(NamedTuple):
    """One writer's group commit, for a commit thread; its caller waits on ``waiter``."""

    store: SessionStore
    requests: list[list[PreparedEvent]]
    loop: asyncio.AbstractEventLoop
    waiter: Waiter[Seqs]
    group: AppendGroup | None
    """Queued appends of one group commit together (a store without ``append_group`` appends alone)."""


class _CommitThreads:
    """A few long-lived daemon threads that run the store calls of every writer (asyncio only).

    Each writer has at most one commit in flight, so its commits stay in order; more than one
    thread, so one session's fsync does not hold the others' appends. A thread that takes an
    append of a store with an :class:`~aiden.storage.protocol.AppendGroup` (a shared database)
    takes every queued append of that group with it and makes them durable in one step.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self.reset()

    def reset(self) -> None:
        """No threads and no jobs (in a forked child, whose parent's threads do not exist)."""
        self._jobs: deque[_Job] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._threads = 0
        self._waiting = 0
        """Threads blocked on the queue: a job put now is taken without a new thread."""

    def _take(self) -> list[_Job]:
        """The next job, with every queued job of its append group (waits for one)."""
        with self._ready:
            self._waiting += 1
            while not self._jobs:
                self._ready.wait()
            self._waiting -= 1
            job = self._jobs.popleft()
            if job.group is None or not self._jobs:
                return [job]
            taken, left = [job], deque[_Job]()
            for other in self._jobs:
                (taken if other.group == job.group else left).append(other)
            self._jobs = left
            return taken

    def _serve(self) -> None:
        while True:
            jobs = self._take()
            for job, outcome in zip(jobs, _commit_jobs(jobs), strict=True):
                try:
                    # Woken on its loop (a waiter cancelled by a foreign task.cancel() is not woken twice).
                    if isinstance(outcome, BaseException):
                        job.loop.call_soon_threadsafe(job.waiter.fail, outcome)
                    else:
                        job.loop.call_soon_threadsafe(job.waiter.set, outcome)
                except RuntimeError:
                    pass  # the loop is closed: nobody is waiting any more

    async def run(
        self, store: SessionStore, requests: list[list[PreparedEvent]], loop: asyncio.AbstractEventLoop
    ) -> Seqs:
        """``store.append(requests)`` on a commit thread, maybe as part of its group's step; like
        ``to_thread.run_sync``, a cancellation waits for it to finish."""
        job = _Job(store, requests, loop, Waiter(loop), getattr(store, "append_group", None))
        with self._ready:
            start = self._waiting == 0 and self._threads < self._size
            if start:
                self._threads += 1
            self._jobs.append(job)
            self._ready.notify()
        if start:
            threading.Thread(target=self._serve, name="aiden-session-writer", daemon=True).start()
        with anyio.CancelScope(shield=True):
            seqs = await job.waiter.wait()
        return seqs


def _commit_jobs(jobs: Sequence[_Job]) -> Sequence[Seqs | BaseException]:
    """Each job's seqs or error: a job alone, or several sessions' appends of one group in one step."""
    try:
        if len(jobs) == 1:
            return [jobs[0].store.append(jobs[0].requests)]
        group = jobs[0].group
        assert group is not None  # only a group's jobs are taken together
        return group.append_sessions([(job.store, job.requests) for job in jobs])
    except BaseException as exc:  # the step failed for every job; handed to the waiting coroutines
        return [exc] * len(jobs)


_COMMITS: Final = _CommitThreads(size=4)
# A forked child has none of its parent's commit threads: it starts its own.
os.register_at_fork(after_in_child=_COMMITS.reset)
# The bound of the host writer's inbox and outbox (each memory bounds its own requests: writer_queue_size).
_INBOX = 4096


class WriterSession(NamedTuple):
    """What the host's writer needs of one session: registered by the session's runtime while it is open."""

    store: SessionStore
    max_batch: int
    """Most events one group commit of this session writes (``Config.max_batch_events``)."""
    dispatch: Callable[[WriterOutbox], None]
    """Hands a reply to the session's waiting callers (called by the writer's reply router)."""
    failed: Callable[[BaseException], None]
    """The store raised what no store should (neither an AidenError nor an OSError): the session ends."""


class SessionWriter(HostActor[WriterInbox, WriterOutbox, WriterSession]):
    """The host's one session writer: every append and flush of every session of the host.

    A session's requests are committed in order, at most one group commit in flight: one request
    and everything queued behind it, up to ``max_batch`` events, go in one
    :meth:`SessionStore.append` (one lock, one write, one fsync), and only then is each of them
    acknowledged. Sessions commit in parallel.
    """

    def __init__(self) -> None:
        super().__init__("session writer", WriterInbox, WriterOutbox, _INBOX)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        """Serve every session until the host stops (its task group is cancelled)."""
        self._loop = _running_asyncio_loop()
        await super().run()

    async def serve_queued(self, key: int, queue: deque[WriterInbox]) -> None:
        """Commit the next batch of session ``key`` (one request and what is queued behind it), answer it."""
        batch = [queue.popleft()]
        session = self._sessions.get(key)
        if session is None:  # closed: nothing more of it is stored
            await self._drop(key, batch, "memory is closed")
            return
        n = len(batch[0].events) if isinstance(batch[0], AppendEvents) else 0
        while queue and n < session.max_batch:
            msg = queue.popleft()
            batch.append(msg)
            if isinstance(msg, AppendEvents):
                n += len(msg.events)
        appends = [msg for msg in batch if isinstance(msg, AppendEvents)]
        ids = [a.request_id for a in appends]
        if appends:
            try:
                seqs = await self._commit(session.store, [a.events for a in appends])
            except AidenError as exc:
                log.error("append batch of %d requests failed: %s", len(appends), exc)
                await self.reply(Rejected(key, ids, error_info(exc)))
            except OSError as exc:  # a StorageError with its errno (error_info's rule)
                await self.reply(Rejected(key, ids, error_info(exc)))
            except Exception as exc:
                # A store raising what no store should: its session ends with it (the host's other
                # sessions go on), and nothing of this batch or after it is stored.
                session.failed(exc)
                rest = list(queue)
                queue.clear()
                await self._drop(key, rest, "session writer stopped")
                return
            else:
                await self.reply(Appended(key, [Ack(a.request_id, s) for a, s in zip(appends, seqs, strict=True)]))
        for msg in batch:
            if isinstance(msg, Flush):
                await self.reply(Flushed(key, msg.request_id))
        if not appends:
            # A flush-only batch made no worker-thread hop: yield once, so a
            # stream of flushes cannot keep the loop to this task.
            await checkpoint()

    def refused(self, key: int, request_id: int, error: ErrorInfo) -> WriterOutbox:
        """An undecodable request is not stored."""
        return Rejected(key, [request_id], error)

    async def _drop(self, key: int, msgs: Sequence[WriterInbox], reason: str) -> None:
        """Answer ``msgs`` without storing them: appends rejected, flushes answered (nothing to wait for)."""
        ids = [msg.request_id for msg in msgs if isinstance(msg, AppendEvents)]
        if ids:
            await self.reply(Rejected(key, ids, error_info(ClosedError(reason))))
        for msg in msgs:
            if isinstance(msg, Flush):
                await self.reply(Flushed(key, msg.request_id))

    async def _commit(self, store: SessionStore, requests: list[list[PreparedEvent]]) -> Seqs:
        if self._loop is None:
            return await anyio.to_thread.run_sync(store.append, requests)
        return await _COMMITS.run(store, requests, self._loop)


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
        self._generation: str | None = None
        """The store's generation at the last hot-window read: a caller's held copy is of it at best."""

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until the inbox closes (each worker gets its own clones of both streams)."""
        inbox, outbox = self._inbox.clone(), self._outbox.clone()
        task_status.started()
        await serve("reader", inbox, outbox, self._in, self._out, self._serve)

    async def _serve(self, msg: ReaderInbox) -> ReaderOutbox:
        store = self._store
        match msg:
            case ReadHotWindow(request_id=rid, held=held):
                generation, hot = await anyio.to_thread.run_sync(self._read_hot)
                if generation is None or generation != self._generation:
                    # Another session now (a rotation, by any process): its first events may repeat the old
                    # ones' seqs and timestamps (a caller's own clock), so a copy held from before proves nothing.
                    self._generation, held = generation, None
                return _hot_reply(rid, hot, held)
            case ReadEvents(request_id=rid, seqs=seqs):
                return EventsRead(rid, await anyio.to_thread.run_sync(store.read_events, seqs))
            case ReadIndex(request_id=rid):
                return IndexRead(rid, await anyio.to_thread.run_sync(store.load_index))
            case ReadSummary(request_id=rid):
                return SummaryRead(rid, await anyio.to_thread.run_sync(store.read_summary))
            case _:
                assert_never(msg)

    def _read_hot(self) -> tuple[str | None, list[SessionEvent]]:
        # The generation first: a rotation between the two reads is caught by the next read.
        try:
            generation: str | None = self._store.change_token().generation
        except AidenError:
            generation = None  # e.g. a damaged index.yaml, which the hot window is read without: trust no copy
        return generation, self._store.read_hot_window()

    def close_streams(self) -> None:
        """Close the original stream ends (the workers hold clones)."""
        self._inbox.close()
        self._outbox.close()


def _hot_reply(rid: int, hot: list[SessionEvent], held: HeldWindow | None) -> HotWindowRead:
    """Only the events after the caller's copy when the window still holds that copy, else all.

    Between compactions the window only grows at its end; a compaction, recovery or rotation
    changes its first event, the event at the held last seq, or how many events reach up to it.
    Events are never inserted below the newest seq, so equal ends and count mean the same events.
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


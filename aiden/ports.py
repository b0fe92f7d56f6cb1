"""Typed ports: the caller side of each actor, one method per request.

A port builds the request, sends it through its actor's :class:`~aiden.actors.mailbox.Client`,
and turns the reply into a typed value or an :class:`~aiden.errors.AidenError`. Arguments are
checked here, before encoding, so a bad value is the caller's error and never reaches an actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import anyio
import msgspec

from aiden import errors
from aiden import messages as m
from aiden.actors.mailbox import Client, Latest
from aiden.errors import AidenError, RecallError
from aiden.events import MAX_SEQ, SessionEvent, validate_id
from aiden.intake import check_text
from aiden.observe import observed
from aiden.policy.triggers import SchedulerCounters
from aiden.recall.tool import RecallHit, RecallStats
from aiden.storage.chunks import ChunkIndex
from aiden.storage.protocol import PreparedEvent

__all__ = ["ReaderPort", "RecallPort", "SchedulerPort", "WriterPort", "expect_reply", "raise_error_info"]

R = TypeVar("R")


def raise_error_info(info: m.ErrorInfo) -> AidenError:
    """Rebuild an aiden exception from a reply's :class:`~aiden.messages.ErrorInfo` (the wire table)."""
    cls = getattr(errors, info.kind, None)
    if isinstance(cls, type) and issubclass(cls, errors.StorageError):
        return cls(info.message, errno=info.errno)
    if isinstance(cls, type) and issubclass(cls, AidenError):
        return cls(info.message)
    return errors.StorageError(info.message, errno=info.errno)


def expect_reply(reply: object, kind: type[R]) -> R:
    """``reply`` as the ``kind`` the request expects; a :class:`~aiden.messages.Failed` reply raises its error."""
    if isinstance(reply, kind):
        return reply
    if isinstance(reply, m.Failed):
        raise raise_error_info(reply.error)
    raise AidenError(f"expected {kind.__name__}, the actor answered {type(reply).__name__}")


class WriterPort:
    """Appends and flushes of one session through its host's session writer."""

    __slots__ = ("_client", "_held", "_room", "_session")

    def __init__(self, client: Client[m.WriterInbox, list[int]], session: int, bound: int) -> None:
        self._client = client
        self._session = session
        # The session's own back-pressure (``writer_queue_size``; the writer's inbox is its host's):
        # an append holds a permit from its send until the writer answers it, even if its caller
        # gave up meanwhile (the writer still commits it).
        self._room = anyio.Semaphore(bound)
        self._held: set[int] = set()

    @observed("append")
    async def append(self, events: list[PreparedEvent]) -> list[int]:
        """Durably append pre-encoded events as one request; their seqs once committed (``-seq``: a hit)."""
        try:
            self._room.acquire_nowait()  # no extra event loop pass while there is room
        except anyio.WouldBlock:
            await self._room.acquire()
        ids: list[int] = []

        def build(rid: int) -> m.AppendEvents:
            ids.append(rid)
            self._held.add(rid)  # before the send: the answer may come before this task runs again
            return m.AppendEvents(self._session, rid, events)

        sent: list[int] = []
        try:
            return await self._client.call(build, sent.append)
        finally:
            if not sent:  # it never reached the writer: nothing will answer it
                if ids:
                    self._answered(ids[0])
                else:
                    self._room.release()

    async def flush(self) -> None:
        """Wait until everything sent before is committed."""
        await self._client.call(lambda rid: m.Flush(self._session, rid))

    def dispatch(self, message: m.WriterOutbox) -> None:
        """Route one writer reply to the callers it acknowledges or rejects (the reply router's hook)."""
        match message:
            case m.Appended(acks=acks):
                for ack in acks:
                    self._answered(ack.request_id)
                    self._client.resolve(ack.request_id, ack.seqs)
            case m.Rejected(request_ids=ids, error=info):
                for rid in ids:
                    self._answered(rid)
                    self._client.reject(rid, raise_error_info(info))
            case m.Flushed(request_id=rid):
                self._client.resolve(rid, [])

    def _answered(self, request_id: int) -> None:
        if request_id in self._held:
            self._held.discard(request_id)
            self._room.release()


class SchedulerPort:
    """Maintenance, usage and rotation requests to the maintenance scheduler, and its published counters."""

    __slots__ = ("_client", "_counters", "_session", "coalesced_at_inbox")

    def __init__(
        self, client: Client[m.SchedulerInbox, m.SchedulerOutbox], counters: Latest[SchedulerCounters], session: int
    ) -> None:
        self._client = client
        self._counters = counters
        self._session = session
        self.coalesced_at_inbox = 0
        """Maintenance requests dropped because one was already queued."""

    @property
    def counters(self) -> SchedulerCounters:
        """The scheduler's newest counters snapshot."""
        return self._counters.value

    def request(self, *, manual: bool) -> None:
        """Schedule a pass without waiting; coalesced when the inbox already holds requests."""
        if not self._client.try_cast(m.RequestMaintenance(self._session, manual)):
            self.coalesced_at_inbox += 1

    async def maintain(self, *, manual: bool) -> m.CompactionOutcome:
        """Run a pass and wait for its outcome."""
        reply = await self._client.call(lambda rid: m.Maintain(self._session, rid, manual))
        return expect_reply(reply, m.MaintenanceDone).outcome

    def check_usage(self, usage: m.RecordUsage) -> None:
        """Refuse ``usage`` as :meth:`record_usage` would, sending nothing."""
        self._client.check(usage)

    async def record_usage(self, usage: m.RecordUsage) -> None:
        """Report one model call's usage (no reply; the inbox bound applies back-pressure)."""
        await self._client.cast(msgspec.structs.replace(usage, session=self._session))

    async def opened(self) -> None:
        """The memory opened: wait until the scheduler checked its backlog (a pass requested if due)."""
        expect_reply(await self._client.call(lambda rid: m.OpenScheduler(self._session, rid)), m.SchedulerOpened)

    async def rotate(self, closed_session_id: str) -> str:
        """Close the active session as ``closed_session_id``; the archive id."""
        reply = await self._client.call(lambda rid: m.RotateSession(self._session, rid, closed_session_id))
        return expect_reply(reply, m.Rotated).archived_id


class ReaderPort:
    """Reads of the stored session through the session reader."""

    __slots__ = ("_client", "_hot")

    def __init__(self, client: Client[m.ReaderInbox, m.ReaderOutbox]) -> None:
        self._client = client
        self._hot: tuple[SessionEvent, ...] = ()

    async def hot_window(self) -> list[SessionEvent]:
        """The retained hot-window events in seq order.

        The copy of the last read is kept: while the window only grows at its end, the reader
        sends just the new events.
        """
        held = self._hot
        mark = (
            m.HeldWindow(held[0].seq, held[0].timestamp, held[-1].seq, held[-1].timestamp, len(held)) if held else None
        )
        reply = expect_reply(await self._client.call(lambda rid: m.ReadHotWindow(rid, mark)), m.HotWindowRead)
        # Concurrent reads may answer out of order: a tail extends only the copy it was asked against.
        hot = held + tuple(reply.events) if reply.tail else tuple(reply.events)
        self._hot = hot
        return list(hot)

    async def events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The stored events with these seqs (hot window or compacted), unknown ones left out."""
        wanted = [q for q in _list_of(seqs, int, "seqs") if 0 <= q <= MAX_SEQ]
        return expect_reply(await self._client.call(lambda rid: m.ReadEvents(rid, wanted)), m.EventsRead).events

    async def event(self, seq: int) -> SessionEvent | None:
        """The stored event with ``seq``, None if unknown."""
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise RecallError(f"seq must be int, got {type(seq).__name__}")
        found = await self.events([seq])  # an out-of-range seq is no stored event: none found
        return found[0] if found else None

    async def index(self) -> ChunkIndex:
        """The live chunk index."""
        return expect_reply(await self._client.call(m.ReadIndex), m.IndexRead).index

    async def summary(self) -> str:
        """The summary.md text."""
        return expect_reply(await self._client.call(m.ReadSummary), m.SummaryRead).text


def _list_of(values: Any, kind: type, name: str) -> list[Any]:
    """``values`` as a list of ``kind`` (a bool is no int); RecallError naming ``name`` if it is not one."""
    # Materialized once: a generator checked by all() would arrive empty.
    try:
        found: list[Any] | None = list(values) if not isinstance(values, str | bytes) else None
    except TypeError:
        found = None  # not iterable
    if found is None or not all(isinstance(v, kind) and not isinstance(v, bool) for v in found):
        raise RecallError(f"{name} must be a list of {kind.__name__}")
    return found


def _check_strings(name: str, values: Sequence[str] | None) -> list[str] | None:
    if values is None:
        return None
    wanted = _list_of(values, str, name)
    for value in wanted:
        check_text(name, value, RecallError)
    return wanted


def _check_bound(name: str, bound: float | None) -> None:
    if bound is not None and (not isinstance(bound, int | float) or isinstance(bound, bool)):
        raise RecallError(f"{name} must be a number")


class RecallPort:
    """Searches, lookups and rehydration through the recall index, and its published stats."""

    __slots__ = ("_client", "_session", "_stats")

    def __init__(
        self, client: Client[m.RecallInbox, m.RecallOutbox], stats: Latest[RecallStats | None], session: int
    ) -> None:
        self._client = client
        self._stats = stats
        self._session = session

    @property
    def stats(self) -> RecallStats | None:
        """The recall index's newest stats snapshot (None before the first recall)."""
        return self._stats.value

    async def _ask(self, request: m.RecallInbox, kind: type[R]) -> R:
        return expect_reply(await self._client.call(lambda rid: msgspec.structs.replace(request, request_id=rid)), kind)

    @observed("search_memory")
    async def search(
        self,
        query: str,
        k: int | None,
        *,
        types: Sequence[str] | None,
        roles: Sequence[str] | None,
        since: float | None,
        until: float | None,
    ) -> list[RecallHit]:
        """The best-matching compacted events and summaries."""
        check_text("query", query, RecallError)
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise RecallError(f"k must be a positive int, got {k!r}")
        _check_bound("since", since)
        _check_bound("until", until)
        request = m.RecallQuery(
            session=self._session,
            request_id=0,
            query=query,
            k=k,
            types=_check_strings("types", types),
            roles=_check_strings("roles", roles),
            since=since,
            until=until,
        )
        return (await self._ask(request, m.RecallHits)).hits

    async def lookup(self, chunk_id: str) -> RecallHit | None:
        """One chunk's summary as a hit, None if unknown."""
        validate_id(chunk_id, what="chunk id")
        hits = (await self._ask(m.RecallLookup(self._session, 0, chunk_id), m.RecallHits)).hits
        return hits[0] if hits else None

    async def rehydrate(self, chunk_id: str, seqs: Sequence[int] | None) -> list[SessionEvent]:
        """The verbatim compacted events of one chunk (only ``seqs`` if given)."""
        validate_id(chunk_id, what="chunk id")
        wanted = _list_of(seqs, int, "seqs") if seqs is not None else None
        if wanted is not None and not all(0 <= q <= MAX_SEQ for q in wanted):
            raise RecallError(f"seqs must be between 0 and {MAX_SEQ}")
        request = m.RecallRehydrate(self._session, 0, chunk_id, wanted)
        return (await self._ask(request, m.RecallEvents)).events

    async def sync(self) -> None:
        """Index the newly committed chunks and embed their events now (the maintenance pass calls it)."""
        await self._ask(m.RecallSync(self._session, 0), m.RecallSynced)

    async def close_index(self) -> None:
        """Close the index after every earlier request of this memory (it parks or closes)."""
        await self._ask(m.CloseIndex(self._session, 0), m.RecallSynced)

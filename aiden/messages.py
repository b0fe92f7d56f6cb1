"""Every message that crosses an actor boundary.

Frozen, tagged msgspec Structs; each actor's inbox accepts one union and replies with another,
msgpack-encoded (:class:`Codec`): nothing but bytes crosses between rooms. Every request carries
``request_id``; a request that fails is answered by :class:`Failed`, in every reply union.
``session`` is the session's key in its host.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, Generic, TypeVar

import msgspec

from aiden.errors import AidenError
from aiden.events import SessionEvent
from aiden.recall.tool import RecallHit
from aiden.storage.chunks import ChunkIndex
from aiden.storage.protocol import PreparedEvent
from aiden.summarizers.protocol import SummaryRequest, SummaryResult

__all__ = [
    "Ack",
    "Appended",
    "AppendEvents",
    "CancelSummarize",
    "CloseIndex",
    "Codec",
    "codec",
    "CompactionOutcome",
    "ErrorInfo",
    "Failed",
    "error_info",
    "Maintain",
    "MaintenanceDone",
    "OpenScheduler",
    "RecordUsage",
    "RecallEvents",
    "RecallHits",
    "RecallQuery",
    "RecallLookup",
    "RecallRehydrate",
    "RecallSync",
    "RecallSynced",
    "RecallInbox",
    "RecallOutbox",
    "Rejected",
    "RequestMaintenance",
    "RotateSession",
    "Rotated",
    "SchedulerInbox",
    "SchedulerOpened",
    "SchedulerOutbox",
    "SessionClosed",
    "Summarize",
    "Summarized",
    "SummarizerInbox",
    "SummarizerOutbox",
    "WriterInbox",
    "WriterOutbox",
    "Flush",
    "Flushed",
    "EventsRead",
    "IndexRead",
    "ReadEvents",
    "HeldWindow",
    "HotWindowRead",
    "ReadHotWindow",
    "ReadIndex",
    "ReadSummary",
    "ReaderInbox",
    "ReaderOutbox",
    "SummaryRead",
]


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True):
    """An exception carried across a boundary: the aiden error class name, message and errno."""

    kind: str
    message: str
    errno: int | None = None


def error_info(exc: BaseException) -> ErrorInfo:
    """Describe an exception for a reply message (non-aiden errors travel as StorageError)."""
    kind = type(exc).__name__ if isinstance(exc, AidenError) else "StorageError"
    return ErrorInfo(kind=kind, message=str(exc), errno=getattr(exc, "errno", None))


class Failed(msgspec.Struct, frozen=True, tag=True):
    """The request ``request_id`` failed: the error travels as :class:`ErrorInfo` (one wire table)."""

    request_id: int
    error: ErrorInfo
    session: int = 0


# --- session writer ------------------------------------------------------------


class AppendEvents(msgspec.Struct, frozen=True, tag=True):
    """Append ``events`` (validated, scrubbed, encoded once with seq 0) to ``session`` as one unit."""

    session: int
    request_id: int
    events: list[PreparedEvent]


class Flush(msgspec.Struct, frozen=True, tag=True):
    """Reply once everything of ``session`` queued before it is committed."""

    session: int
    request_id: int


WriterInbox = AppendEvents | Flush


class Ack(msgspec.Struct, frozen=True, array_like=True):
    """The seqs assigned to one request's events (a deduplicated event: its stored seq, negated)."""

    request_id: int
    seqs: list[int]


class Appended(msgspec.Struct, frozen=True, tag=True):
    """One group commit: every listed request of ``session`` is durably stored."""

    session: int
    acks: list[Ack]


class Rejected(msgspec.Struct, frozen=True, tag=True):
    """These requests of ``session`` were not stored."""

    session: int
    request_ids: list[int]
    error: ErrorInfo


class Flushed(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`Flush`."""

    session: int
    request_id: int


WriterOutbox = Appended | Rejected | Flushed


# --- maintenance scheduler -------------------------------------------------------


class RequestMaintenance(msgspec.Struct, frozen=True, tag=True):
    """Fire-and-forget: schedule a maintenance pass of ``session`` (coalesced)."""

    session: int
    manual: bool = False


class Maintain(msgspec.Struct, frozen=True, tag=True):
    """Run a maintenance pass and reply when it is done (the seed's Save path)."""

    session: int
    request_id: int
    manual: bool = False


class OpenScheduler(msgspec.Struct, frozen=True, tag=True):
    """``session`` opened: check its backlog (answered then), then replay its newest chunks'
    after-compaction hook."""

    session: int
    request_id: int


_Count = Annotated[int, msgspec.Meta(ge=0)]


class RecordUsage(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """Usage a provider reported for one model call, or the end of a run."""

    # Counts a provider reports: a negative one is refused in the caller (the client validates).
    prompt_tokens: _Count | None = None
    estimated_prompt_tokens: _Count | None = None
    completion_tokens: _Count | None = None
    cached_tokens: _Count | None = None
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] | None = None
    tool_output_tokens: _Count = 0
    run_ended: bool = False
    model: str | None = None
    session: int = 0


class RotateSession(msgspec.Struct, frozen=True, tag=True):
    """Close the active session: cancel the pass in flight, archive it as ``closed_session_id``."""

    session: int
    request_id: int
    closed_session_id: str


SchedulerInbox = RequestMaintenance | Maintain | OpenScheduler | RecordUsage | RotateSession


class CompactionOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What one maintenance pass did."""

    compacted: bool
    reason: str
    chunk_id: str | None = None
    events_compacted: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    degraded: bool = False
    note: str = ""
    backlog_left: bool = False
    """The pass compacted ``max_pass_events`` of a longer backlog; the next pass is already requested."""


class MaintenanceDone(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`Maintain`."""

    session: int
    request_id: int
    outcome: CompactionOutcome


class Rotated(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`RotateSession`: the closed session's archive id."""

    session: int
    request_id: int
    archived_id: str


class SchedulerOpened(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`OpenScheduler`: the backlog is checked (a pass requested if it is over the trigger)."""

    session: int
    request_id: int


SchedulerOutbox = MaintenanceDone | Rotated | SchedulerOpened | Failed


# --- summarizer -----------------------------------------------------------------


class Summarize(msgspec.Struct, frozen=True, tag=True):
    """Summarize one request of ``session`` under the configured deadline."""

    session: int
    request_id: int
    request: SummaryRequest


class CancelSummarize(msgspec.Struct, frozen=True, tag=True):
    """The caller of ``request_id`` gave up: cancel that call if it is running or queued."""

    session: int
    request_id: int


class SessionClosed(msgspec.Struct, frozen=True, tag=True):
    """``session`` closed: the summarizer forgets what it observed of it (its call times)."""

    session: int


SummarizerInbox = Summarize | CancelSummarize | SessionClosed


class Summarized(msgspec.Struct, frozen=True, tag=True):
    """A successful summary."""

    session: int
    request_id: int
    result: SummaryResult


SummarizerOutbox = Summarized | Failed


# --- recall index ------------------------------------------------------------------


class RecallQuery(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """Full-text recall over the chunks of ``session``."""

    session: int
    request_id: int
    query: str
    k: int | None = None
    types: list[str] | None = None
    roles: list[str] | None = None
    since: float | None = None
    until: float | None = None


class RecallLookup(msgspec.Struct, frozen=True, tag=True):
    """Exact lookup of one chunk by id."""

    session: int
    request_id: int
    chunk_id: str


class RecallRehydrate(msgspec.Struct, frozen=True, tag=True):
    """Verbatim events of a chunk (optionally only ``seqs``)."""

    session: int
    request_id: int
    chunk_id: str
    seqs: list[int] | None = None


class RecallSync(msgspec.Struct, frozen=True, tag=True):
    """Index the chunks committed since the last request and embed their events (after a compaction)."""

    session: int
    request_id: int


class CloseIndex(msgspec.Struct, frozen=True, tag=True):
    """Close the session's index (its SQLite connection) after its earlier requests: it parks or closes."""

    session: int
    request_id: int


RecallInbox = RecallQuery | RecallLookup | RecallRehydrate | RecallSync | CloseIndex


class RecallHits(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`RecallQuery` and :class:`RecallLookup` (an unknown chunk: no hits)."""

    session: int
    request_id: int
    hits: list[RecallHit]


class RecallEvents(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`RecallRehydrate`."""

    session: int
    request_id: int
    events: list[SessionEvent]


class RecallSynced(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`RecallSync` and :class:`CloseIndex`: done (embedder failures are counted, not raised)."""

    session: int
    request_id: int


RecallOutbox = RecallHits | RecallEvents | RecallSynced | Failed


# --- session reader ------------------------------------------------------------------


class HeldWindow(msgspec.Struct, frozen=True):
    """The caller's copy of the hot window: its first and last events (seq and timestamp) and length."""

    first_seq: int
    first_time: float | None
    last_seq: int
    last_time: float | None
    count: int


class ReadHotWindow(msgspec.Struct, frozen=True, tag=True):
    """The retained hot window; with ``held``, only what follows the caller's copy when it is still current."""

    request_id: int
    held: HeldWindow | None = None


class ReadEvents(msgspec.Struct, frozen=True, tag=True):
    """Stored events by seq (hot or compacted)."""

    request_id: int
    seqs: list[int]


class ReadIndex(msgspec.Struct, frozen=True, tag=True):
    """The live chunk index."""

    request_id: int


class ReadSummary(msgspec.Struct, frozen=True, tag=True):
    """The rendered summary (summary.md)."""

    request_id: int


ReaderInbox = ReadHotWindow | ReadEvents | ReadIndex | ReadSummary


class EventsRead(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`ReadEvents`."""

    request_id: int
    events: list[SessionEvent]


class IndexRead(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`ReadIndex`."""

    request_id: int
    index: ChunkIndex


class SummaryRead(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`ReadSummary`."""

    request_id: int
    text: str


class HotWindowRead(msgspec.Struct, frozen=True, tag=True):
    """Reply to :class:`ReadHotWindow`."""

    request_id: int
    events: list[SessionEvent]
    tail: bool = False
    """True: ``events`` are those after the caller's held copy, which the window still starts with;
    False: they are the whole hot window."""


ReaderOutbox = EventsRead | HotWindowRead | IndexRead | SummaryRead | Failed


T = TypeVar("T")


class Codec(Generic[T]):
    """A msgpack encoder/decoder pair for one message union, built once."""

    def __init__(self, union: Any) -> None:
        self.encode: Callable[[T], bytes] = msgspec.msgpack.Encoder().encode
        """Encode one message."""
        self.decode: Callable[[bytes], T] = msgspec.msgpack.Decoder(union).decode
        """Decode one message."""


@functools.cache
def codec(union: Any) -> Codec[Any]:
    """The process's one :class:`Codec` for ``union``: stateless, so every memory's actors share it."""
    return Codec(union)

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


class _Identified(msgspec.Struct, frozen=True, tag=True):
    """A message with the id matching a reply to its request (tagged by its class name)."""

    request_id: int


class _Keyed(msgspec.Struct, frozen=True, tag=True):
    """A message of a host's actor: its session's key in the host, then the request id."""

    session: int
    request_id: int


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True):
    """An exception carried across a boundary: the aiden error class name, message and errno."""

    kind: str
    message: str
    errno: int | None = None


def error_info(exc: BaseException) -> ErrorInfo:
    """Describe an exception for a reply message (non-aiden errors travel as StorageError)."""
    kind = type(exc).__name__ if isinstance(exc, AidenError) else "StorageError"
    return ErrorInfo(kind=kind, message=str(exc), errno=getattr(exc, "errno", None))


class Failed(_Identified, frozen=True):
    """The request ``request_id`` failed: the error travels as :class:`ErrorInfo` (one wire table)."""

    error: ErrorInfo
    session: int = 0


# --- session writer ------------------------------------------------------------


class AppendEvents(_Keyed, frozen=True):
    """Append ``events`` (validated, scrubbed, encoded once with seq 0) to ``session`` as one unit."""

    events: list[PreparedEvent]


class Flush(_Keyed, frozen=True):
    """Reply once everything of ``session`` queued before it is committed."""


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


class Flushed(_Keyed, frozen=True):
    """Reply to :class:`Flush`."""


WriterOutbox = Appended | Rejected | Flushed


# --- maintenance scheduler -------------------------------------------------------


class RequestMaintenance(msgspec.Struct, frozen=True, tag=True):
    """Fire-and-forget: schedule a maintenance pass of ``session`` (coalesced)."""

    session: int
    manual: bool = False


class Maintain(_Keyed, frozen=True):
    """Run a maintenance pass and reply when it is done (the seed's Save path)."""

    manual: bool = False


class OpenScheduler(_Keyed, frozen=True):
    """``session`` opened: check its backlog (answered then), then replay its newest chunks'
    after-compaction hook."""


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


class RotateSession(_Keyed, frozen=True):
    """Close the active session: cancel the pass in flight, archive it as ``closed_session_id``."""

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


class MaintenanceDone(_Keyed, frozen=True):
    """Reply to :class:`Maintain`."""

    outcome: CompactionOutcome


class Rotated(_Keyed, frozen=True):
    """Reply to :class:`RotateSession`: the closed session's archive id."""

    archived_id: str


class SchedulerOpened(_Keyed, frozen=True):
    """Reply to :class:`OpenScheduler`: the backlog is checked (a pass requested if it is over the trigger)."""


SchedulerOutbox = MaintenanceDone | Rotated | SchedulerOpened | Failed


# --- summarizer -----------------------------------------------------------------


class Summarize(_Keyed, frozen=True):
    """Summarize one request of ``session`` under the configured deadline."""

    request: SummaryRequest


class CancelSummarize(_Keyed, frozen=True):
    """The caller of ``request_id`` gave up: cancel that call if it is running or queued."""


class SessionClosed(msgspec.Struct, frozen=True, tag=True):
    """``session`` closed: the summarizer forgets what it observed of it (its call times)."""

    session: int


SummarizerInbox = Summarize | CancelSummarize | SessionClosed


class Summarized(_Keyed, frozen=True):
    """A successful summary."""

    result: SummaryResult


SummarizerOutbox = Summarized | Failed


# --- recall index ------------------------------------------------------------------


class RecallQuery(_Keyed, frozen=True, kw_only=True):
    """Full-text recall over the chunks of ``session``."""

    query: str
    k: int | None = None
    types: list[str] | None = None
    roles: list[str] | None = None
    since: float | None = None
    until: float | None = None


class RecallLookup(_Keyed, frozen=True):
    """Exact lookup of one chunk by id."""

    chunk_id: str


class RecallRehydrate(_Keyed, frozen=True):
    """Verbatim events of a chunk (optionally only ``seqs``)."""

    chunk_id: str
    seqs: list[int] | None = None


class RecallSync(_Keyed, frozen=True):
    """Index the chunks committed since the last request and embed their events (after a compaction)."""


class CloseIndex(_Keyed, frozen=True):
    """Close the session's index (its SQLite connection) after its earlier requests: it parks or closes."""


RecallInbox = RecallQuery | RecallLookup | RecallRehydrate | RecallSync | CloseIndex


class RecallHits(_Keyed, frozen=True):
    """Reply to :class:`RecallQuery` and :class:`RecallLookup` (an unknown chunk: no hits)."""

    hits: list[RecallHit]


class RecallEvents(_Keyed, frozen=True):
    """Reply to :class:`RecallRehydrate`."""

    events: list[SessionEvent]


class RecallSynced(_Keyed, frozen=True):
    """Reply to :class:`RecallSync` and :class:`CloseIndex`: done (embedder failures are counted, not raised)."""


RecallOutbox = RecallHits | RecallEvents | RecallSynced | Failed


# --- session reader ------------------------------------------------------------------


class HeldWindow(msgspec.Struct, frozen=True):
    """The caller's copy of the hot window: its first and last events (seq and timestamp) and length."""

    first_seq: int
    first_time: float | None
    last_seq: int
    last_time: float | None
    count: int


class ReadHotWindow(_Identified, frozen=True):
    """The retained hot window; with ``held``, only what follows the caller's copy when it is still current."""

    held: HeldWindow | None = None


class ReadEvents(_Identified, frozen=True):
    """Stored events by seq (hot or compacted)."""

    seqs: list[int]


class ReadIndex(_Identified, frozen=True):
    """The live chunk index."""


class ReadSummary(_Identified, frozen=True):
    """The rendered summary (summary.md)."""


ReaderInbox = ReadHotWindow | ReadEvents | ReadIndex | ReadSummary


class EventsRead(_Identified, frozen=True):
    """Reply to :class:`ReadEvents`."""

    events: list[SessionEvent]


class IndexRead(_Identified, frozen=True):
    """Reply to :class:`ReadIndex`."""

    index: ChunkIndex


class SummaryRead(_Identified, frozen=True):
    """Reply to :class:`ReadSummary`."""

    text: str


class HotWindowRead(_Identified, frozen=True):
    """Reply to :class:`ReadHotWindow`."""

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

"""On-disk event records of a session.

One :class:`SessionEvent` is one JSON object on one line of ``events.jsonl``
(and of ``chunks/<chunk_id>.jsonl``). Fields added later must have defaults;
unknown fields found on read are ignored so older readers survive newer files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final, Literal, get_args

import msgspec

from aiden.errors import EventTooLargeError, InvalidEventError, InvalidIdError

__all__ = [
    "EVENT_TYPES",
    "MAX_META_DEPTH",
    "MAX_SEQ",
    "RETRACTS",
    "Seq",
    "EventType",
    "SessionEvent",
    "decode_event",
    "encode_event",
    "is_retraction",
    "retracted_seqs",
    "with_retractions",
    "without_withdrawn",
    "validate_id",
]

EventType = Literal[
    "user_input",
    "assistant_output",
    "role_output",
    "tool_call",
    "tool_result",
    "system_event",
    "screen_context",
]
EVENT_TYPES: Final[frozenset[str]] = frozenset(get_args(EventType))

RETRACTS: Final = "retracts"
"""Meta key of a retraction: a ``system_event`` with ``meta={RETRACTS: seq}`` withdraws the earlier
event ``seq`` of its session from every later prompt and every summary made after it. The log stays
append-only: both events stay on disk and in recall."""


_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

MAX_META_DEPTH: Final = 64
"""Deepest nesting of dicts/lists accepted in ``meta``. Far below the ~500 levels at which
msgspec and Python's recursion limit fail, so a hostile value is refused with a clear
InvalidEventError instead of a RecursionError (or a stack overflow in a reader)."""

MAX_SEQ: Final = 2**63 - 1
"""The largest seq: a signed 64-bit integer (what msgpack, SQLite and PostgreSQL all store)."""

Seq = Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQ)]
"""A seq as read from a file: decoding refuses what no session could have written (over 63 bits,
negative), so a damaged number is a damaged file, never an actor dying on it while encoding a reply."""
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**63 - 1


class _MetaTooDeep(InvalidEventError, ValueError):
    """InvalidEventError for callers; a ValueError so msgspec turns it into a ValidationError on decode."""


# gc=False: a pass decodes thousands of events, whose tracking would make full collections
# (a walk of the whole heap, an append stall) due. An event holds only JSON values: no cycle.
class SessionEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One event of a session.

    ``seq`` is assigned by the session writer: per session, gap-free and
    strictly increasing. An event built by a caller has ``seq == 0`` until it
    is appended. ``event_id`` is an optional client key: appending an event
    whose ``event_id`` the writer has already stored returns the stored event
    instead of writing it twice.
    """

    type: EventType
    content: str = ""
    seq: int = 0
    role: str | None = None
    event_id: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    # JSON text of a tool call's arguments, as the OpenAI API carries them.
    tool_args: str | None = None
    # Unix seconds; the API fills it in when the caller leaves it unset.
    timestamp: float | None = None
    # Sticky pin (seed 001): the reason this event must never be compacted.
    pinned: str | None = None
    # True for text aiden itself produced (the split-turn prefix summary).
    synthetic: bool = False
    meta: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        # Depth is checked at construction: intake walks meta recursively (the screenshot scrub)
        # before encode_event runs. _MetaTooDeep so msgspec reports it as a ValidationError.
        if self.meta and isinstance(self.meta, dict):
            try:
                _walk_meta(self.meta, check_ints=False)
            except InvalidEventError as exc:
                raise _MetaTooDeep(str(exc)) from None

    @property
    def id(self) -> str:
        """A stable identifier: the client ``event_id`` when given, else ``seq-<seq>``."""
        return self.event_id if self.event_id is not None else f"seq-{self.seq}"


_encoder: Final = msgspec.json.Encoder()


def _walk_meta(meta: Any, *, check_ints: bool) -> None:
    """Refuse ``meta`` nested deeper than :data:`MAX_META_DEPTH` (and, with ``check_ints``,
    ints outside signed 64 bits). Iterative, so the check itself cannot hit the recursion limit."""
    stack: list[tuple[Any, int]] = [(meta, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list | tuple):
            if depth > MAX_META_DEPTH:
                raise InvalidEventError(f"event meta is nested deeper than {MAX_META_DEPTH} levels")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
        elif check_ints and isinstance(value, int) and not _INT_MIN <= value <= _INT_MAX:
            raise InvalidEventError(
                f"event meta int {value} is outside the signed 64-bit range [-2**63, 2**63-1]"
            )


def _check_bounds(event: SessionEvent) -> None:
    """Refuse values JSON would store differently or a reader could not load back.

    A non-finite timestamp is written as ``null`` (the append is acknowledged, the
    time silently lost); ints outside signed 64 bits make msgspec raise OverflowError
    on decode (or encode, from 2**64); deeply nested meta raises RecursionError.
    """
    ts = event.timestamp
    if ts is not None and not (
        isinstance(ts, int | float) and not isinstance(ts, bool) and math.isfinite(ts)
    ):
        raise InvalidEventError(f"event timestamp must be a finite number, got {ts!r}")
    # Empty meta (the common case) has nothing to walk: one test instead of a
    # stack walk on every appended event.
    if event.meta:
        _walk_meta(event.meta, check_ints=True)


_decoder: Final = msgspec.json.Decoder(SessionEvent)
# Room for the seq the store adds to a new event's line ("seq": and up to 19 digits).
_SEQ_ROOM: Final = 32


def encode_event(event: SessionEvent, *, max_bytes: int | None = None) -> bytes:
    """Encode ``event`` as one JSON line (with trailing newline).

    Raises :class:`InvalidEventError` for text that cannot be stored (lone surrogates) and
    :class:`EventTooLargeError` when the line, with room for the seq the store adds, is above
    ``max_bytes``; nothing has been written then. With
    ``max_bytes`` (the intake of a new event) it also refuses what :func:`_check_bounds` refuses;
    re-encoding stored events passes none, so never refuses what an older version accepted.
    """
    if max_bytes is not None:
        _check_bounds(event)
    try:
        line = _encoder.encode(event)
    except UnicodeEncodeError as exc:
        raise InvalidEventError(f"event text is not valid Unicode: {exc.reason}") from exc
    except (TypeError, OverflowError, RecursionError) as exc:
        raise InvalidEventError(f"event cannot be encoded as JSON: {exc}") from exc
    if max_bytes is not None and len(line) + 1 > max_bytes - _SEQ_ROOM:
        raise EventTooLargeError(
            f"event of {len(line) + 1} bytes exceeds max_event_bytes={max_bytes} less {_SEQ_ROOM} bytes kept for its seq"
        )
    return line + b"\n"


def decode_event(line: bytes | str) -> SessionEvent:
    """Decode one JSON line; raises ``msgspec.DecodeError``/``ValidationError`` on bad data."""
    return _decoder.decode(line)


def validate_id(value: str, *, what: str = "id") -> str:
    """Return ``value`` if it matches ``^[A-Za-z0-9_-]{1,64}$``; otherwise raise :class:`InvalidIdError`.

    Every id that becomes part of a path goes through here first, so ``../x``,
    absolute paths, NUL bytes and over-long names never reach the filesystem.
    """
    if not isinstance(value, str) or _SAFE_ID.fullmatch(value) is None:
        raise InvalidIdError(f"invalid {what} {value!r}: expected ^[A-Za-z0-9_-]{{1,64}}$")
    return value


def is_retraction(event: SessionEvent) -> bool:
    """True for a retraction event (see :data:`RETRACTS`)."""
    return event.type == "system_event" and RETRACTS in event.meta


def without_withdrawn(events: Sequence[SessionEvent], *, context: Iterable[SessionEvent] = ()) -> list[SessionEvent]:
    """``events`` less what a retraction among them (or in ``context``) withdrew, and less the retractions.

    What a summary made after a retraction may show: the log keeps both, no later summary or prompt does.
    """
    withdrawn = retracted_seqs((*events, *context))
    return [e for e in events if e.seq not in withdrawn and not is_retraction(e)]


def with_retractions(events: Sequence[SessionEvent], kept: Sequence[bool]) -> list[bool]:
    """``kept`` (one flag per event) with every retraction of a kept event kept too.

    A retraction stays as long as its target: a prompt hides only the withdrawn seqs it sees retracted.
    """
    kept_seqs = {e.seq for e, k in zip(events, kept, strict=True) if k}
    return [k or bool(retracted_seqs((e,)) & kept_seqs) for e, k in zip(events, kept, strict=True)]


def retracted_seqs(events: Iterable[SessionEvent]) -> set[int]:
    """The seqs that the retractions among ``events`` withdrew.

    Only an earlier event can be withdrawn: a stored retraction naming its own seq or a later one
    withdraws nothing (else an event acknowledged after it would never be shown).
    """
    out: set[int] = set()
    for event in events:
        target = event.meta.get(RETRACTS) if event.type == "system_event" else None
        if isinstance(target, int) and not isinstance(target, bool) and (event.seq == 0 or target < event.seq):
            out.add(target)
    return out

"""Intake of a caller's event: validated, scrubbed and encoded once, before any byte is written.

Pure (no I/O, no clock: the caller passes ``now``). A bad event raises
:class:`~aiden.errors.InvalidEventError` in the caller's task, never inside an actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from aiden.errors import InvalidEventError
from aiden.events import EVENT_TYPES, SessionEvent, decode_event, encode_event
from aiden.policy.scrub import strip_screenshot_data
from aiden.storage.protocol import PreparedEvent

__all__ = ["as_stored", "prepare_event"]

# Room for the seq the store adds ("seq": + up to 19 digits) when checking size.
_SEQ_ROOM: Final = 32
_OPTIONAL_STR: Final = ("role", "event_id", "tool_name", "tool_call_id", "tool_args", "pinned")


def _first_non_str(event: SessionEvent) -> str:
    # Only on the error path: which optional field is not a str.
    return next(n for n in _OPTIONAL_STR if not isinstance(getattr(event, n), str | None))


def prepare_event(
    event: SessionEvent, *, now: float, max_event_bytes: int
) -> tuple[SessionEvent, PreparedEvent]:
    """The event as it will be stored (seq 0, timestamp set, screenshots scrubbed) and its encoded line."""
    if not isinstance(event, SessionEvent):
        raise InvalidEventError(f"expected SessionEvent, got {type(event).__name__}")
    if event.type not in EVENT_TYPES:
        raise InvalidEventError(f"unknown event type {event.type!r}; expected one of {sorted(EVENT_TYPES)}")
    if not isinstance(event.content, str):
        raise InvalidEventError("event content must be str")
    if not isinstance(event.meta, dict):
        raise InvalidEventError("event meta must be a dict")
    # Attribute reads in one tuple, not getattr by name: this runs once per event
    # on the caller's task and is a measurable share of an append's CPU.
    for value in (
        event.role,
        event.event_id,
        event.tool_name,
        event.tool_call_id,
        event.tool_args,
        event.pinned,
    ):
        if value is not None and not isinstance(value, str):
            raise InvalidEventError(f"event {_first_non_str(event)} must be str or None")
    if event.event_id is not None and not event.event_id:
        raise InvalidEventError("event_id must not be empty")
    # The store assigns seqs (a caller's value is ignored); one replace at most.
    if event.timestamp is None:
        prepared = msgspec.structs.replace(event, seq=0, timestamp=now)
    elif event.seq != 0:
        prepared = msgspec.structs.replace(event, seq=0)
    else:
        prepared = event
    prepared = strip_screenshot_data(prepared)
    line = encode_event(prepared, max_bytes=max_event_bytes - _SEQ_ROOM)
    if prepared.meta and decode_event(line) != prepared:
        # NaN, sets, bytes, tuples... JSON would store something else than what
        # append() returns: refuse rather than silently change the caller's data.
        raise InvalidEventError(
            "event meta holds values JSON cannot carry unchanged (NaN/inf, sets, bytes...)"
        )
    return prepared, PreparedEvent(line, prepared.event_id)


def as_stored(
    events: Sequence[SessionEvent], seqs: Sequence[int], found: Sequence[SessionEvent]
) -> list[SessionEvent]:
    """What an append returns: each prepared event with its new seq, or for a dedupe hit
    (reported as ``-seq``) the stored event among ``found``, read back by the caller.

    A hit whose stored event was not found (the session rotated meanwhile) or
    now holds another id keeps the caller's copy with the stored seq.
    """
    if not found:  # no hit (the common case), or none of them found
        return [msgspec.structs.replace(e, seq=abs(s)) for e, s in zip(events, seqs, strict=True)]
    by_seq = {e.seq: e for e in found}
    out: list[SessionEvent] = []
    for event, seq in zip(events, seqs, strict=True):
        hit = by_seq.get(-seq) if seq < 0 else None
        if hit is not None and hit.event_id == event.event_id:
            out.append(hit)
        else:
            out.append(msgspec.structs.replace(event, seq=abs(seq)))
    return out

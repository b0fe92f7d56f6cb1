"""On-disk event records of a session.

One :class:`SessionEvent` is one JSON object on one line of ``events.jsonl``
(and of ``chunks/<chunk_id>.jsonl``). Fields added later must have defaults;
unknown fields found on read are ignored so older readers survive newer files.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal, get_args

import msgspec

from aiden.errors import EventTooLargeError, InvalidEventError, InvalidIdError

__all__ = [
    "EVENT_TYPES",
    "EventType",
    "SessionEvent",
    "decode_event",
    "encode_event",
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

_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


class SessionEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
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

    @property
    def id(self) -> str:
        """A stable identifier: the client ``event_id`` when given, else ``seq-<seq>``."""
        return self.event_id if self.event_id is not None else f"seq-{self.seq}"


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(SessionEvent)


def encode_event(event: SessionEvent, *, max_bytes: int | None = None) -> bytes:
    """Encode ``event`` as one JSON line (with trailing newline).

    Raises :class:`InvalidEventError` for text that cannot be stored (lone
    surrogates) and :class:`EventTooLargeError` above ``max_bytes``; in both
    cases nothing has been written anywhere.
    """
    try:
        line = _encoder.encode(event)
    except UnicodeEncodeError as exc:
        raise InvalidEventError(f"event text is not valid Unicode: {exc.reason}") from exc
    except (TypeError, OverflowError) as exc:
        raise InvalidEventError(f"event cannot be encoded as JSON: {exc}") from exc
    if max_bytes is not None and len(line) + 1 > max_bytes:
        raise EventTooLargeError(
            f"event of {len(line) + 1} bytes exceeds max_event_bytes={max_bytes}"
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

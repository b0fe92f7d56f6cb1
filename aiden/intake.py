"""Intake of a caller's event: validated, scrubbed and encoded once, before any byte is written.

Pure (no I/O, no clock: the caller passes ``now``). A bad event raises
:class:`~aiden.errors.InvalidEventError` in the caller's task, never inside an actor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from aiden.errors import AidenError, InvalidEventError
from aiden.events import EVENT_TYPES, MAX_META_DEPTH, SessionEvent, decode_event, encode_event
from aiden.policy.scrub import strip_screenshot_data
from aiden.storage.protocol import PreparedEvent

__all__ = ["MAX_EVENT_ID_CHARS", "MAX_LABEL_CHARS", "as_stored", "check_text", "prepare_event", "without_surrogates"]
MAX_EVENT_ID_CHARS: Final = 256
"""The longest client ``event_id`` an append takes."""
MAX_LABEL_CHARS: Final = 256
"""The longest ``role``, ``tool_name``, ``tool_call_id`` or ``pinned`` reason an append takes.

Recall shows these whole beside an event's text, which alone is cut to fit an answer: a longer one
would leave the event unreadable by recall. Providers' own limits are far lower (tool names 64)."""
_LABELS: Final = ("role", "tool_name", "tool_call_id", "pinned")
_OPTIONAL_STR: Final = ("role", "event_id", "tool_name", "tool_call_id", "tool_args", "pinned")


# A JSON \\u escape of a UTF-16 surrogate: where one stands alone, decoding the text gives a str
# that cannot be encoded as UTF-8 again, and every summary, index or file it reaches fails.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def without_surrogates(value: Any) -> Any:
    """``value`` (text, or lists, tuples and dicts of it) with each lone surrogate as U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list | tuple):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value


def _repair_tool_args(args: str) -> str | None:
    """``args`` with lone surrogate escapes replaced by U+FFFD, or None when there are none.

    A model that cuts an emoji in half sends ``{"cmd": "\\ud83d"}``: valid JSON text, but what it
    decodes to cannot be stored. Pairs (a whole emoji) are kept.
    """
    if _SURROGATE_ESCAPE.search(args) is None:
        return None
    try:
        decoded = json.loads(args)
    except (ValueError, RecursionError):
        # Not JSON: nothing decodes it as a whole; replace every surrogate escape in the text.
        return _SURROGATE_ESCAPE.sub("\ufffd", args)
    repaired = without_surrogates(decoded)
    if repaired == decoded:
        return None
    return json.dumps(repaired, ensure_ascii=False)


def check_text(what: str, value: object, error: type[AidenError] = InvalidEventError) -> None:
    """Refuse what is not text, or cannot be stored as UTF-8 (a lone surrogate), before anything accepts it."""
    if not isinstance(value, str):
        raise error(f"{what} must be str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(f"{what} is not valid Unicode: {exc.reason}") from None


def _json_depth_over(text: str, limit: int) -> bool:
    """True when ``text`` nests arrays/objects deeper than ``limit`` (brackets inside strings ignored)."""
    if text.count("[") + text.count("{") <= limit:  # the common case, at C speed
        return False
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


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
    # Attribute reads in one tuple, not getattr by name: this runs once per appended event.
    for value in (event.role, event.event_id, event.tool_name, event.tool_call_id, event.tool_args, event.pinned):
        if value is not None and not isinstance(value, str):
            name = next(n for n in _OPTIONAL_STR if not isinstance(getattr(event, n), str | None))
            raise InvalidEventError(f"event {name} must be str or None")
    if event.event_id is not None:
        # A key every store can index and look up: a database's unique index refuses a NUL or a
        # key past its row size, which in a group commit would fail other sessions' appends too.
        if not event.event_id:
            raise InvalidEventError("event_id must not be empty")
        if len(event.event_id) > MAX_EVENT_ID_CHARS:
            raise InvalidEventError(f"event_id longer than {MAX_EVENT_ID_CHARS} characters")
        if "\x00" in event.event_id:
            raise InvalidEventError("event_id must not contain a NUL character")
    for name, label in zip(_LABELS, (event.role, event.tool_name, event.tool_call_id, event.pinned), strict=True):
        if label is not None and len(label) > MAX_LABEL_CHARS:
            raise InvalidEventError(f"event {name} longer than {MAX_LABEL_CHARS} characters ({len(label)})")
    if event.tool_args is not None and _json_depth_over(event.tool_args, MAX_META_DEPTH):
        # Every reader of tool arguments (summaries, recall, the agent's own replay) would hit
        # the recursion limit on them: refused here, before anything stores them.
        raise InvalidEventError(f"tool_args nest JSON deeper than {MAX_META_DEPTH} levels")
    if event.tool_args is not None and (repaired := _repair_tool_args(event.tool_args)) is not None:
        meta = {**event.meta, "repaired": "tool_args: lone surrogate escapes replaced by U+FFFD"}
        event = msgspec.structs.replace(event, tool_args=repaired, meta=meta)
    # The store assigns seqs (a caller's value is ignored); one replace at most.
    if event.timestamp is None:
        prepared = msgspec.structs.replace(event, seq=0, timestamp=now)
    elif event.seq != 0:
        prepared = msgspec.structs.replace(event, seq=0)
    else:
        prepared = event
    prepared = strip_screenshot_data(prepared)
    line = encode_event(prepared, max_bytes=max_event_bytes)
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
    by_seq = {e.seq: e for e in found}
    out: list[SessionEvent] = []
    for event, seq in zip(events, seqs, strict=True):
        hit = by_seq.get(-seq) if seq < 0 else None
        if hit is not None and hit.event_id == event.event_id:
            out.append(hit)
        else:
            out.append(msgspec.structs.replace(event, seq=abs(seq)))
    return out

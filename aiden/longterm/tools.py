"""The ``save_memory`` and ``forget_memory`` agent tools: OpenAI function schemas and handlers.

Handlers always answer with a JSON string: bad arguments (invalid JSON, wrong
types, unknown fields, hostile ids, bad dates) and aiden errors become
``{"error": "..."}``. Only aiden errors, ``ValueError`` and msgspec errors are
caught, so cancellation and programming errors still propagate.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec

from aiden.errors import AidenError
from aiden.longterm.entries import MAX_CONTENT_CHARS, MAX_TITLE_CHARS, MEMORY_TYPES
from aiden.longterm.summaries import format_stamp
from aiden.tools import decode_arguments, error_result

if TYPE_CHECKING:
    from aiden.longterm.backend import EntryStore

__all__ = [
    "FORGET_MEMORY_TOOL",
    "SAVE_MEMORY_TOOL",
    "LongTermTools",
    "parse_expiry",
]

_MAX_ARGUMENT_CHARS: Final = 32768
_MAX_EXPIRY: Final = 253402300799.0  # 9999-12-31T23:59:59Z: the last second a saved entry can be shown with

SAVE_MEMORY_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "save_memory",
        "description": (
            "Save something worth remembering across sessions: a user preference, a rule to follow, "
            "a project fact, a procedure that works, or a note the user asked you to keep. Save only "
            "durable knowledge, not the current conversation. Pass id to replace an earlier memory."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": list(MEMORY_TYPES), "description": "Kind of memory."},
                "title": {"type": "string", "maxLength": MAX_TITLE_CHARS, "description": "One-line title."},
                "content": {"type": "string", "maxLength": MAX_CONTENT_CHARS, "description": "The memory."},
                "expires_at": {
                    "type": "string",
                    "description": "Optional ISO-8601 date or time (UTC if no zone) after which it is forgotten.",
                },
                "id": {
                    "type": "string",
                    "pattern": "^[A-Za-z0-9_-]{1,64}$",
                    "description": "Optional id of an existing memory to replace.",
                },
            },
            "required": ["type", "title", "content"],
            "additionalProperties": False,
        },
    },
}
"""OpenAI / litellm function-tool definition of ``save_memory``."""

FORGET_MEMORY_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "forget_memory",
        "description": "Delete a saved long-term memory by its id (as shown in the profile or by save_memory).",
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "Memory id."},
            },
            "required": ["id"],
            "additionalProperties": False,
        },
    },
}
"""OpenAI / litellm function-tool definition of ``forget_memory``."""


class _SaveArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    type: str
    title: str
    content: str
    expires_at: str | float | None = None
    id: str | None = None


class _ForgetArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str


_encoder: Final = msgspec.json.Encoder()
_save_decoder: Final = msgspec.json.Decoder(_SaveArgs)
_forget_decoder: Final = msgspec.json.Decoder(_ForgetArgs)


def parse_expiry(value: str | float | None) -> float | None:
    """Unix seconds for an ISO-8601 date/time (naive = UTC) or a number; ValueError otherwise.

    The result is bounded to 1970-01-01 .. 9999-12-31T23:59:59Z (finite), so it can
    always be stored and shown back; ints too large for a float are refused as well.
    """
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond the float range (>= ~1.8e308)
            seconds = math.inf
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            when = datetime.fromisoformat(text)
        except ValueError:  # its own message names neither the field nor the format
            raise ValueError(f"expires_at must be an ISO-8601 date or time, got {value!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:
            seconds = when.timestamp()
        except OverflowError:  # an offset pushing year 1 / 9999 past the datetime range
            seconds = math.inf
    else:
        raise ValueError("expires_at must be an ISO-8601 string")
    if not (math.isfinite(seconds) and 0.0 <= seconds <= _MAX_EXPIRY):
        raise ValueError(
            f"expires_at must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z, got {value!r}"
        )
    return seconds


class SaveRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A decoded ``save_memory`` call with its expiry parsed and bounded (checked before anything is sent)."""

    type: str
    title: str
    content: str
    expires_at: float | None = None
    memory_id: str | None = None


def parse_save_memory(arguments: str | Mapping[str, Any]) -> SaveRequest:
    """Decode ``save_memory`` arguments; ValueError or a msgspec error for a bad call."""
    # A blank call is left to msgspec (empty=None): its answer is the one the model always had.
    args = decode_arguments(arguments, _save_decoder, max_chars=_MAX_ARGUMENT_CHARS, empty=None)
    # Parsed (and bounded) before save: nothing is written for an invalid expiry.
    return SaveRequest(
        type=args.type,
        title=args.title,
        content=args.content,
        expires_at=parse_expiry(args.expires_at),
        memory_id=args.id,
    )


def parse_forget_memory(arguments: str | Mapping[str, Any]) -> str:
    """The memory id of a ``forget_memory`` call; ValueError or a msgspec error for a bad call."""
    return decode_arguments(arguments, _forget_decoder, max_chars=_MAX_ARGUMENT_CHARS, empty=None).id


async def save_memory(store: EntryStore, request: SaveRequest, *, now: float) -> str:
    """Save one decoded call: ``{"saved": {...}}`` or ``{"error": "..."}``."""
    try:
        # SaveRequest's fields are save's keyword arguments.
        entry = await store.save(**msgspec.structs.asdict(request), now=now)
    except (AidenError, ValueError, msgspec.MsgspecError) as exc:
        return error_result(f"save_memory: {exc}")
    expires = format_stamp(entry.expires_at) if entry.expires_at is not None else None
    saved = {"id": entry.id, "type": entry.type, "title": entry.title, "expires_at": expires}
    return _encoder.encode({"saved": saved}).decode()


async def forget_memory(store: EntryStore, memory_id: str) -> str:
    """Forget one memory by id: ``{"forgotten": id}`` or ``{"error": "..."}``."""
    try:
        found = await store.forget(memory_id)
    except (AidenError, ValueError, msgspec.MsgspecError) as exc:
        return error_result(f"forget_memory: {exc}")
    if not found:
        return error_result(f"forget_memory: no memory with id {memory_id!r}")
    return _encoder.encode({"forgotten": memory_id}).decode()


class _Port(Protocol):
    def save_memory(self, request: SaveRequest) -> Awaitable[str]: ...
    def forget_memory(self, memory_id: str) -> Awaitable[str]: ...


class LongTermTools:
    """``save_memory`` and ``forget_memory`` as an :class:`aiden.tools.ToolSet` of an open memory.

    Arguments are checked here, so a bad call answers its error without reaching the long-term actor.
    """

    schemas: Final = (SAVE_MEMORY_TOOL, FORGET_MEMORY_TOOL)

    def __init__(self, port: Callable[[], _Port]) -> None:
        self._port = port

    def handles(self, name: str) -> bool:
        """``save_memory`` and ``forget_memory``."""
        return name in ("save_memory", "forget_memory")

    async def run(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Run one call; the JSON result text for the model."""
        try:
            if name == "save_memory":
                return await self._port().save_memory(parse_save_memory(arguments))
            return await self._port().forget_memory(parse_forget_memory(arguments))
        except (ValueError, msgspec.MsgspecError) as exc:
            return error_result(f"{name}: {exc}")

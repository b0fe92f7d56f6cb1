"""The agent tools' plumbing: how a :class:`ToolSet` plugs in, and how a model's arguments are read.

This module knows no tool by name. Every call returns a JSON string for the model, errors
included; :class:`ToolArgumentError` is a call that parses but makes no request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

import msgspec

__all__ = ["ToolArgumentError", "ToolSet", "agent_tools", "decode_arguments", "error_result", "run_tool_call"]

T = TypeVar("T")
_MAX_ERROR_CHARS: Final = 400
_encoder: Final = msgspec.json.Encoder()


class ToolSet(Protocol):
    """Agent tools of one room: their function-tool schemas, and the run of one call."""

    @property
    def schemas(self) -> Sequence[Mapping[str, Any]]:
        """The OpenAI function-tool schemas, in the order the agent is shown them."""
        ...

    def handles(self, name: str) -> bool:
        """Whether a call of the tool ``name`` is this set's to run."""
        ...

    async def run(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Run one call; the JSON result text for the model (a bad call's error included)."""
        ...


def agent_tools(tool_sets: Sequence[ToolSet]) -> list[dict[str, Any]]:
    """The function-tool schemas of every set, in order."""
    # Copies: a caller adding to its tool list's dicts changes no module's schema.
    return [dict(schema) for tools in tool_sets for schema in tools.schemas]


async def run_tool_call(name: str, arguments: str | Mapping[str, Any], tool_sets: Sequence[ToolSet]) -> str:
    """Run one of :func:`agent_tools` by name; an unknown name is an error result, not an exception."""
    for tools in tool_sets:
        if tools.handles(name):
            return await tools.run(name, arguments)
    return error_result(f"unknown tool {name!r}")


class ToolArgumentError(ValueError):
    """Arguments that parse but make no request (answered as a JSON error, never raised to the model)."""


def error_result(message: str) -> str:
    """A tool's error answer, ``{"error": message}`` (the message cut to 400 characters)."""
    return _encoder.encode({"error": message[:_MAX_ERROR_CHARS]}).decode()


def decode_arguments(
    arguments: str | Mapping[str, Any], decoder: msgspec.json.Decoder[T], *, max_chars: int, empty: str | None
) -> T:
    """``arguments`` as the decoder's type; :class:`ToolArgumentError` for an oversized, empty or non-object input,
    or for text that is not valid Unicode (a lone surrogate, named by its field).

    A blank string is refused with the message ``empty`` (None: left to msgspec, as malformed JSON).
    msgspec's DecodeError/ValidationError propagate for malformed or mistyped JSON.
    """
    # A lone surrogate could be neither stored nor sent to an actor (and msgspec fails on one with
    # UnicodeEncodeError): refused here, by name.
    if isinstance(arguments, str):
        if len(arguments) > max_chars:
            raise ToolArgumentError(f"arguments longer than {max_chars} characters")
        _check_unicode("the JSON text", arguments)
        if empty is not None and not arguments.strip():
            raise ToolArgumentError(empty)
        try:
            return decoder.decode(arguments)
        except msgspec.DecodeError:
            _check_escapes(arguments)
            raise
    if isinstance(arguments, Mapping):
        _check_fields(arguments)
        return msgspec.convert(dict(arguments), decoder.type, strict=True)  # type: ignore[no-any-return]
    raise ToolArgumentError(f"arguments must be a JSON object, got {type(arguments).__name__}")


def _check_fields(arguments: Mapping[Any, Any]) -> None:
    _check_unicode("a field name", list(arguments))
    for key, value in arguments.items():
        _check_unicode(str(key), value)


def _check_escapes(text: str) -> None:
    """:class:`ToolArgumentError` naming the field if JSON ``text`` escapes a lone surrogate.

    msgspec refuses the escape (``"\\ud83d"``, half an emoji a model cut) as "Input data was
    truncated", which sends a model looking for a missing brace.
    """
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        return  # not JSON: msgspec's error says so
    if isinstance(decoded, dict):
        _check_fields(decoded)
    _check_unicode("the JSON text", json.dumps(decoded, ensure_ascii=False))


def _check_unicode(name: str, value: object) -> None:
    """:class:`ToolArgumentError` if ``value`` is, or is a list holding, text that cannot be encoded as UTF-8."""
    for text in value if isinstance(value, list) else (value,):
        if isinstance(text, str):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ToolArgumentError(f"{name} is not valid Unicode: {exc.reason}") from None

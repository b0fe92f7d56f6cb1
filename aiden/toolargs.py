"""Decoding a model's tool-call arguments: JSON text or an already-decoded mapping, bounded first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

__all__ = ["ToolArgumentError", "decode_arguments"]

T = TypeVar("T")


class ToolArgumentError(ValueError):
    """Arguments that parse but make no request (answered as a JSON error, never raised to the model)."""


def decode_arguments(
    arguments: str | Mapping[str, Any], decoder: msgspec.json.Decoder[T], *, max_chars: int, empty: str
) -> T:
    """``arguments`` as the decoder's type; :class:`ToolArgumentError` for an oversized, empty or non-object input.

    msgspec's DecodeError/ValidationError propagate for malformed or mistyped JSON.
    """
    if isinstance(arguments, str):
        if len(arguments) > max_chars:
            raise ToolArgumentError(f"arguments longer than {max_chars} characters")
        if not arguments.strip():
            raise ToolArgumentError(empty)
        return decoder.decode(arguments)
    if isinstance(arguments, Mapping):
        return msgspec.convert(dict(arguments), decoder.type, strict=True)  # type: ignore[no-any-return]
    raise ToolArgumentError(f"arguments must be a JSON object, got {type(arguments).__name__}")

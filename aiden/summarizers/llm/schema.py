"""What a model's answer may hold: per-field length bounds, and the JSON schema that asks for them.

The bounds cut one runaway field (a paragraph, fifty items) instead of the
whole-answer limit throwing every field away. A provider that constrains
sampling to the schema (``response_format``) always returns parseable JSON,
and the bounds become ``maxLength``/``maxItems`` that also cap a slow
model's tokens.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from aiden.summarizers.mustkeep.text import clip
from aiden.summarizers.protocol import StructuredSummary

__all__ = [
    "ASKED_ITEMS",
    "ITEM_CHARS",
    "LIST_ITEMS",
    "SCALAR_CHARS",
    "TEXT_LISTS",
    "StructuredOutput",
    "answer_schema",
    "bound_fields",
    "response_format",
]


ITEM_CHARS: Final = 300
"""One list item (a decision's what/why, an error, a constraint ...): the must-keep items' bound too."""
SCALAR_CHARS: Final = 600
"""The goal and the outcome: a sentence or two, never the transcript."""
LIST_ITEMS: Final = 12
"""Items kept per list; the prompt asks for at most 8, the strict retry for 5."""


TEXT_LISTS: Final = tuple(
    field.name for field in msgspec.structs.fields(StructuredSummary) if field.type == tuple[str, ...]
)
"""The fields of :class:`StructuredSummary` that are lists of plain strings."""


def _clipped(item: Any) -> Any:
    """A list item (a string, a :class:`Decision`, an :class:`ErrorResolution`) with each text clipped."""
    if isinstance(item, str):
        return clip(item, ITEM_CHARS)
    return type(item)(**{name: clip(getattr(item, name), ITEM_CHARS) for name in item.__struct_fields__})


def bound_fields(structured: StructuredSummary) -> tuple[StructuredSummary, int]:
    """``structured`` within the per-field bounds, and how many items were cut or dropped."""
    changed = 0
    fields: dict[str, Any] = {}
    for name in structured.__struct_fields__:
        value = getattr(structured, name)
        if isinstance(value, str):
            fields[name] = clip(value, SCALAR_CHARS)
            changed += fields[name] != value
        else:
            fields[name] = bounded = tuple(_clipped(item) for item in value[:LIST_ITEMS])
            changed += len(value) - len(bounded) + sum(a != b for a, b in zip(bounded, value, strict=False))
    return (StructuredSummary(**fields), changed) if changed else (structured, 0)


StructuredOutput = Literal["prompt", "json_object", "json_schema"]
"""How the one-call answer's shape is asked for.

``"prompt"``: in the prompt only (any provider). ``"json_object"``:
``{"type": "json_object", "schema": ...}`` (llama.cpp's servers, vLLM).
``"json_schema"``: ``{"type": "json_schema", "json_schema": {..., "strict": true}}``
(OpenAI structured outputs; llama.cpp's C++ server and Ollama through litellm too).
"""

ASKED_ITEMS: Final = 8
"""Items per list, as ``compaction.md`` asks (the bounds keep up to ``LIST_ITEMS`` of an unconstrained answer)."""


def _text(max_chars: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_chars}


def _items(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item, "maxItems": ASKED_ITEMS}


def _record(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: _text(ITEM_CHARS) for name in names},
        "required": list(names),
        "additionalProperties": False,
    }


def answer_schema() -> dict[str, Any]:
    """The JSON schema of the one-call answer: ``compaction.md``'s keys, in its order, all required.

    No other keys are allowed (OpenAI's strict mode wants both); an empty
    field is ``""`` or ``[]``, as the prompt says.
    """
    properties: dict[str, Any] = {
        "user_goal": _text(SCALAR_CHARS),
        "outcome": _text(SCALAR_CHARS),
        "decisions": _items(_record("what", "why")),
        "constraints": _items(_text(ITEM_CHARS)),
        "user_preferences": _items(_text(ITEM_CHARS)),
        "errors": _items(_record("error", "resolution")),
        "failed_approaches": _items(_text(ITEM_CHARS)),
        "open_threads": _items(_text(ITEM_CHARS)),
        "files_touched": _items(_text(ITEM_CHARS)),
        "working_recipes": _items(_text(ITEM_CHARS)),
        "facts": _items(_text(ITEM_CHARS)),
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def response_format(mode: StructuredOutput) -> dict[str, Any] | None:
    """The ``response_format`` request field for ``mode``; ``None`` for ``"prompt"`` (send none)."""
    if mode == "prompt":
        return None
    if mode == "json_object":
        return {"type": "json_object", "schema": answer_schema()}
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "compaction_summary", "strict": True, "schema": answer_schema()},
        }
    raise ValueError(f"structured_output must be 'prompt', 'json_object' or 'json_schema', not {mode!r}")

"""What a model's answer may hold: per-field length bounds, and a JSON object cut off mid-way repaired.

A small model asked for short items sometimes writes a paragraph into one
field, fifty items into one list, or runs into its output cap in the middle of
a list. The whole-answer limit (``summary_max_chars``) catches only the worst
of it and then throws every field away; these bounds cut the one runaway field
instead. A JSON object truncated at the output cap keeps every field and list
item that was complete before the cut; the item being written is dropped (the
must-keep check appends the load-bearing facts it may have held).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from aiden.summarizers.mustkeep import clip
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary

__all__ = ["ITEM_CHARS", "LIST_ITEMS", "SCALAR_CHARS", "bound_fields", "repair_truncated_json"]

ITEM_CHARS: Final = 300
"""One list item (a decision's what/why, an error, a constraint ...): the must-keep items' bound too."""
SCALAR_CHARS: Final = 600
"""The goal and the outcome: a sentence or two, never the transcript."""
LIST_ITEMS: Final = 12
"""Items kept per list; the prompt asks for at most 8, the strict retry for 5."""


def _bounded(values: tuple[str, ...]) -> tuple[tuple[str, ...], int]:
    kept = values[:LIST_ITEMS]
    out = tuple(clip(v, ITEM_CHARS) for v in kept)
    return out, (len(values) - len(kept)) + sum(a != b for a, b in zip(out, kept, strict=True))


def bound_fields(structured: StructuredSummary) -> tuple[StructuredSummary, int]:
    """``structured`` within the per-field bounds, and how many items were cut or dropped."""
    changed = 0
    lists: dict[str, tuple[str, ...]] = {}
    for name in (
        "constraints",
        "open_threads",
        "files_touched",
        "user_preferences",
        "failed_approaches",
        "working_recipes",
        "facts",
    ):
        lists[name], n = _bounded(getattr(structured, name))
        changed += n
    decisions = tuple(
        Decision(what=clip(d.what, ITEM_CHARS), why=clip(d.why, ITEM_CHARS))
        for d in structured.decisions[:LIST_ITEMS]
    )
    errors = tuple(
        ErrorResolution(error=clip(e.error, ITEM_CHARS), resolution=clip(e.resolution, ITEM_CHARS))
        for e in structured.errors[:LIST_ITEMS]
    )
    changed += len(structured.decisions) - len(decisions) + len(structured.errors) - len(errors)
    changed += sum(a != b for a, b in zip(decisions, structured.decisions, strict=False))
    changed += sum(a != b for a, b in zip(errors, structured.errors, strict=False))
    goal, outcome = clip(structured.user_goal, SCALAR_CHARS), clip(structured.outcome, SCALAR_CHARS)
    changed += (goal != structured.user_goal) + (outcome != structured.outcome)
    if not changed:
        return structured, 0
    bounded = StructuredSummary(user_goal=goal, outcome=outcome, decisions=decisions, errors=errors, **lists)
    return bounded, changed


_MAX_CUTS: Final = 64


def repair_truncated_json(
    content: str, parse: Callable[[str], dict[str, Any] | None]
) -> dict[str, Any] | None:
    """The object an answer cut off mid-way held up to its last complete value, or ``None``.

    The text from the first ``{`` is scanned for the places where a value
    inside an object or list had just ended (a ``,`` or a closing bracket
    outside strings); the latest such place that parses once its open brackets
    are closed wins (``parse`` reads a candidate: a dict or ``None``). ``None`` when no complete value came before the cut (a
    reply cut inside its first field) or the text is not JSON-like at all.
    """
    start = content.find("{")
    if start < 0:
        return None
    text = content[start:]
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            if not stack:
                return None  # a complete object: nothing to repair (the caller's parser refused it)
            cuts.append((i + 1, "".join(reversed(stack))))
        elif ch == ",":
            cuts.append((i, "".join(reversed(stack))))
    for end, closing in reversed(cuts[-_MAX_CUTS:]):
        data = parse(text[:end].rstrip().rstrip(",") + closing)
        if data is not None:
            return data
    return None

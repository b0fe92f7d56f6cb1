"""What a model's answer may hold: per-field length bounds.

A small model asked for short items sometimes writes a paragraph into one
field or fifty items into one list. The whole-answer limit
(``summary_max_chars``) catches only the worst of it and then throws every
field away; these bounds cut the one runaway field instead. (An answer cut off
at the output cap is repaired by
:func:`~aiden.summarizers.llm.loose.repair_truncated_json`.)
"""

from __future__ import annotations

from typing import Final

from aiden.summarizers.mustkeep import clip
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary

__all__ = ["ITEM_CHARS", "LIST_ITEMS", "SCALAR_CHARS", "bound_fields"]

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

"""The kept-fact record every stage passes along: :class:`_Item`, its sections and priority tiers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import msgspec

Section = Literal[
    "goal",
    "constraints",
    "preferences",
    "decisions",
    "errors",
    "failed",
    "open",
    "files",
    "commands",
    "facts",
    "requests",
    "notes",
    "tool_notes",
    "outcome",
]

# Priority tiers (lower is kept first), seed 001 order.
_R_GOAL: Final = 0
_R_USER: Final = 1  # user constraints, preferences, corrections
_R_DECISION: Final = 2
_R_ERROR_RESOLVED: Final = 3  # errors with their resolution, errors named in prose
_R_FAILED: Final = 4
_R_OPEN: Final = 5
_R_FACT: Final = 6  # files, sentences naming ids / numbers
_R_MINOR: Final = 7  # unresolved error lines of tool output (often log noise), commands in prose
_R_REST: Final = 8  # other requests, tool-call commands, assistant-stated constraints
_R_NOTE: Final = 9  # first line of a tool result, unclassified summary lines

# Every load-bearing tier (rank <= _R_FACT) may place this many items before
# the others are considered in strict order, so one talkative kind cannot
# starve the rest; noise tiers only ever get what is left.
_QUOTA: Final = 3

_TOOL_NOTE_CHARS: Final = 160

FIXED_SEP: Final = " → fixed: "
"""Separator between an error and its resolution in a rendered ``Errors:`` line."""


class _Item(msgspec.Struct, frozen=True):
    """One kept fact: its section, exact text, priority tier, first-seen order and information."""

    section: Section
    text: str
    rank: int
    order: int
    extra: str = ""  # errors: the resolution
    info: float = 0.0  # information per token within its range (salience.py): breaks ties within a tier
    when: str = ""  # the date the last system event before it stated ("17 July, 2023"); render.py shows it


def _line_of(item: _Item) -> str:
    if item.section == "errors" and item.extra:
        return f"{item.text}{FIXED_SEP}{item.extra}"
    return item.text


def _texts(items: Sequence[_Item], section: Section) -> tuple[str, ...]:
    return tuple(it.text for it in sorted(items, key=lambda it: it.order) if it.section == section)

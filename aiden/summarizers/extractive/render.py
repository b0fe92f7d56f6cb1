"""Rendering: kept items as history-summary text or as the session summary, and the structured views of them.

The history form lists sections (``Goal:``, ``Decisions:`` ...); the session
summary (seed 004) regroups the kept items under five headings, selected
within the budget on their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.extractive.collector import (
    _QUOTA,
    _R_USER,
    FIXED_SEP,
    Section,
    _Collector,
    _Item,
    _line_of,
    _texts,
)
from aiden.summarizers.mustkeep import normalize, split_reason
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary

_SECTION_ORDER: Final[tuple[Section, ...]] = (
    "goal",
    "outcome",
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
)
_SECTION_TITLES: Final[dict[Section, str]] = {
    "goal": "Goal",
    "outcome": "Outcome",
    "constraints": "Constraints",
    "preferences": "Preferences",
    "decisions": "Decisions",
    "errors": "Errors",
    "failed": "Failed approaches",
    "open": "Open thread",
    "files": "Files",
    "commands": "Commands",
    "facts": "Facts",
    "requests": "Requests",
    "notes": "Notes",
    "tool_notes": "Tool results",
}


def _render_history(items: Sequence[_Item]) -> str:
    by_section: dict[Section, list[_Item]] = {}
    for item in sorted(items, key=lambda it: it.order):
        by_section.setdefault(item.section, []).append(item)
    blocks: list[str] = []
    for section in _SECTION_ORDER:
        group = by_section.get(section)
        if not group:
            continue
        title = _SECTION_TITLES[section]
        if section in ("goal", "outcome"):
            blocks.append("\n".join(f"{title}: {it.text}" for it in group))
        elif section == "files":
            blocks.append(f"{title}: " + ", ".join(it.text for it in group))
        else:
            blocks.append(f"{title}:\n" + "\n".join(f"- {line}" for line in _dated(section, group)))
    return "\n".join(blocks)


# What happened, and when: the lines a date belongs on (a rule or an open thread holds whenever it was said).
_DATED: Final[frozenset[Section]] = frozenset({"facts", "notes"})


def _dated(section: Section, group: Sequence[_Item]) -> list[str]:
    """``group``'s lines, each that starts a run said on another date than the line before it led by that
    date ("(17 July, 2023) Melanie: I went camping last weekend"): the date a relative time needs, at the
    cost of one short prefix a date, not one a line."""
    lines: list[str] = []
    date = ""
    for item in group:
        line = _line_of(item)
        if section in _DATED and item.when and item.when != date and item.when not in line:
            line = f"({item.when}) {line}"
        date = item.when or date
        lines.append(line)
    return lines


def _structured_history(items: Sequence[_Item]) -> StructuredSummary:
    ordered = sorted(items, key=lambda it: it.order)
    goals = _texts(ordered, "goal")
    decisions = []
    for item in ordered:
        if item.section == "decisions":
            what, why = split_reason(item.text)
            decisions.append(Decision(what=what, why=why))
    errors = tuple(
        ErrorResolution(error=it.text, resolution=it.extra) for it in ordered if it.section == "errors"
    )
    return StructuredSummary(
        user_goal=goals[0] if goals else "",
        decisions=tuple(decisions),
        constraints=_texts(ordered, "constraints"),
        open_threads=_texts(ordered, "open"),
        errors=errors,
        files_touched=_texts(ordered, "files"),
        user_preferences=_texts(ordered, "preferences"),
        failed_approaches=_texts(ordered, "failed"),
        working_recipes=_texts(ordered, "commands"),
        facts=_texts(ordered, "facts"),
        outcome=" ".join(_texts(ordered, "outcome")),
    )


def render_structured(structured: StructuredSummary, *, session: bool = False) -> str:
    """Render ``structured`` as summary text: history sections, or seed 004's five headings if ``session``."""
    if session:
        # The durable headings have no place of their own for the user's rules and the decisions
        # taken: a rule is a preference to keep, a decision a fact of the project (#35: an answer
        # holding only those is a summary, not the prompt's skeleton).
        decided = [f"Decided: {d.what} ({d.why})" if d.why else f"Decided: {d.what}" for d in structured.decisions]
        blocks = [
            ("## OUTCOME", [structured.outcome] if structured.outcome else []),
            ("## WORKING RECIPES", list(structured.working_recipes)),
            ("## FAILED APPROACHES", list(structured.failed_approaches)),
            ("## USER PREFERENCES", list(dict.fromkeys((*structured.user_preferences, *structured.constraints)))),
            ("## PROJECT FACTS", list(dict.fromkeys((*structured.facts, *decided)))),
        ]
        return "\n\n".join(
            heading + "\n" + ("\n".join(f"- {line}" for line in lines) if lines else "- (none)")
            for heading, lines in blocks
        )
    items: list[_Item] = []
    order = 0

    def add(section: Section, text: str, extra: str = "") -> None:
        nonlocal order
        if text.strip():
            order += 1
            items.append(_Item(section, _one_line(text), 0, order, _one_line(extra)))

    add("goal", structured.user_goal)
    add("outcome", structured.outcome)
    for text in structured.constraints:
        add("constraints", text)
    for text in structured.user_preferences:
        add("preferences", text)
    for decision in structured.decisions:
        add("decisions", f"{decision.what} ({decision.why})" if decision.why else decision.what)
    for error in structured.errors:
        add("errors", error.error, error.resolution)
    for text in structured.failed_approaches:
        add("failed", text)
    for text in structured.open_threads:
        add("open", text)
    for text in structured.files_touched:
        add("files", text)
    for text in structured.working_recipes:
        add("commands", text)
    for text in structured.facts:
        add("facts", text)
    return _render_history(items)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# The session summary (seed 004): kept items regrouped under five headings, selected and rendered.
_SESSION_HEADINGS: Final = (
    ("outcome", "## OUTCOME"),
    ("recipes", "## WORKING RECIPES"),
    ("failed", "## FAILED APPROACHES"),
    ("preferences", "## USER PREFERENCES"),
    ("facts", "## PROJECT FACTS"),
)

_SessionSection = Literal["outcome", "recipes", "failed", "preferences", "facts"]
_SESSION_RANK: Final[dict[_SessionSection, int]] = {
    "outcome": 0,
    "preferences": 1,
    "failed": 2,
    "recipes": 3,
    "facts": 4,
}


class _SessionItem(msgspec.Struct, frozen=True):
    section: _SessionSection
    text: str
    rank: int
    order: int


def _session_items(collector: _Collector, items: Sequence[_Item]) -> list[_SessionItem]:
    out: list[_SessionItem] = []
    order = 0

    def add(section: _SessionSection, text: str, rank_offset: int = 0) -> None:
        nonlocal order
        if text.strip():
            order += 1
            out.append(_SessionItem(section, text, _SESSION_RANK[section] * 10 + rank_offset, order))

    ordered = sorted(items, key=lambda it: it.order)
    goals = _texts(ordered, "goal")
    outcomes = _texts(ordered, "outcome")
    for text in outcomes:
        add("outcome", text)
    if not outcomes and goals:
        add("outcome", f"Goal: {goals[0]}")
    for text in collector.outcomes[-3:]:
        add("outcome", text, 1)
    if not outcomes and not collector.outcomes:
        for text in _texts(ordered, "open")[-1:]:
            add("outcome", f"Open: {text}", 2)
    failed_commands = {cmd for cmd, _ in collector.commands_failed} - set(collector.commands_ok)
    for item in ordered:
        if item.section in ("preferences", "constraints") and item.rank <= _R_USER:
            add("preferences", item.text)
        elif item.section == "failed":
            add("failed", item.text)
        elif item.section == "commands" and item.text.startswith("$ ") and item.text not in failed_commands:
            add("recipes", item.text)
        elif item.section == "decisions":
            add("facts", item.text)
        elif item.section == "errors" and item.extra:
            add("facts", f"{item.text}{FIXED_SEP}{item.extra}", 1)
        elif item.section == "constraints":
            add("facts", item.text, 2)
        elif item.section == "facts":
            add("facts", item.text, 3)
    for command, error in collector.commands_failed:
        if command in failed_commands:
            add("failed", f"{command} failed: {error}", 1)
    files = _texts(ordered, "files")
    if files:
        add("facts", "Key files: " + ", ".join(dict.fromkeys(files)), 2)
    return out


def _render_session(items: Sequence[_SessionItem]) -> str:
    blocks: list[str] = []
    for section, heading in _SESSION_HEADINGS:
        lines = [it.text for it in sorted(items, key=lambda it: it.order) if it.section == section]
        body = "\n".join(f"- {line}" for line in lines) if lines else "- (none)"
        blocks.append(f"{heading}\n{body}")
    return "\n\n".join(blocks)


def _select_session(items: Sequence[_SessionItem], budget: int) -> list[_SessionItem]:
    seen: set[str] = set()
    unique: list[_SessionItem] = []
    for item in sorted(items, key=lambda it: (it.rank, it.order)):
        key = normalize(item.text)
        if key and key not in seen:
            seen.add(key)
            unique.append(item)
    chosen: list[_SessionItem] = []
    used = estimate_tokens(_render_session(()))
    per_section: dict[str, int] = {}
    rest: list[_SessionItem] = []
    for item in unique:
        if per_section.get(item.section, 0) < _QUOTA:
            cost = estimate_tokens(item.text) + 2
            if used + cost <= budget:
                used += cost
                chosen.append(item)
                per_section[item.section] = per_section.get(item.section, 0) + 1
                continue
        rest.append(item)
    for item in rest:
        cost = estimate_tokens(item.text) + 2
        if used + cost <= budget:
            used += cost
            chosen.append(item)
    chosen.sort(key=lambda it: (it.rank, it.order))
    while chosen and estimate_tokens(_render_session(chosen)) > budget:
        chosen.pop()
    return chosen


def _structured_session(items: Sequence[_SessionItem]) -> StructuredSummary:
    ordered = sorted(items, key=lambda it: it.order)

    def texts(section: _SessionSection) -> tuple[str, ...]:
        return tuple(it.text for it in ordered if it.section == section)

    return StructuredSummary(
        outcome=" ".join(texts("outcome")),
        working_recipes=texts("recipes"),
        failed_approaches=texts("failed"),
        user_preferences=texts("preferences"),
        facts=texts("facts"),
    )

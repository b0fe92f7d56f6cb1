"""Section rendering: kept items as history-summary text, and the structured views of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aiden.summarizers.extractive.items import Section, _Item, _line_of, _texts
from aiden.summarizers.mustkeep import split_reason
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

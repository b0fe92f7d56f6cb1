"""Rendering: kept items as history-summary sections or as the session summary's five headings,
and the structured views of them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from aiden.summarizers.extractive.extract import (
    R_REST,
    SECTIONS,
    Collector,
    Item,
    Section,
    line_of,
)
from aiden.summarizers.extractive.salience import addresses_listener, names_relative_date
from aiden.summarizers.mustkeep.classify import split_reason, split_speaker
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary


def texts(items: Sequence[Item], section: Section) -> tuple[str, ...]:
    """The texts of ``items`` in ``section``, oldest first."""
    return tuple(it.text for it in sorted(items, key=lambda it: it.order) if it.section == section)


def render_history(items: Sequence[Item]) -> str:
    """``items`` as history-summary text: a block a section."""
    by_section: dict[Section, list[Item]] = {}
    for item in sorted(items, key=lambda it: it.order):
        by_section.setdefault(item.section, []).append(item)
    blocks: list[str] = []
    for section, (title, _tier) in SECTIONS.items():
        group = by_section.get(section)
        if not group:
            continue
        if section in ("goal", "outcome"):
            blocks.append("\n".join(f"{title}: {it.text}" for it in group))
        elif section == "files":
            blocks.append(f"{title}: " + ", ".join(it.text for it in group))
        else:
            blocks.append(f"{title}:\n" + "\n".join(f"- {line}" for line in _dated(section, group)))
    return "\n".join(blocks)


# What happened, and when: the lines a date belongs on (a rule or an open thread holds whenever it was said).
_DATED: Final[frozenset[Section]] = frozenset({"facts", "notes"})


def _dated(section: Section, group: Sequence[Item]) -> list[str]:
    """``group``'s lines; one that starts a run said on another date is led by that date
    ("(17 July, 2023) Melanie: I went camping last weekend"): a relative time needs it."""
    lines: list[str] = []
    date = ""
    for item in group:
        line = line_of(item)
        if section in _DATED and item.when and item.when != date and item.when not in line:
            line = f"({item.when}) {line}"
        date = item.when or date
        lines.append(line)
    return lines


# The structured view's lists of plain strings, by the section their items are filed under.
_LIST_FIELDS: Final[dict[Section, str]] = {
    "constraints": "constraints",
    "preferences": "user_preferences",
    "failed": "failed_approaches",
    "open": "open_threads",
    "files": "files_touched",
    "commands": "working_recipes",
    "facts": "facts",
}


def structured_history(items: Sequence[Item]) -> StructuredSummary:
    """The structured view of a history summary's items, or of a session summary's (their sections are a subset)."""
    ordered = sorted(items, key=lambda it: it.order)
    goals = texts(ordered, "goal")
    return StructuredSummary(
        user_goal=goals[0] if goals else "",
        decisions=tuple(Decision(what=w, why=y) for w, y in map(split_reason, texts(ordered, "decisions"))),
        errors=tuple(
            ErrorResolution(error=it.text, resolution=it.extra) for it in ordered if it.section == "errors"
        ),
        outcome=" ".join(texts(ordered, "outcome")),
        **{name: texts(ordered, section) for section, name in _LIST_FIELDS.items()},
    )


def render_structured(structured: StructuredSummary, *, session: bool = False) -> str:
    """Render ``structured`` as summary text: history sections, or seed 004's five headings if ``session``."""
    if session:
        # The durable headings have no place of their own for the user's rules and the decisions
        # taken: a rule is a preference to keep, a decision a fact of the project.
        decided = [
            f"Decided: {d.what} ({d.why})" if d.why else f"Decided: {d.what}" for d in structured.decisions
        ]
        return _under_headings(
            {
                "outcome": [structured.outcome] if structured.outcome else [],
                "commands": structured.working_recipes,
                "failed": structured.failed_approaches,
                "preferences": list(dict.fromkeys((*structured.user_preferences, *structured.constraints))),
                "facts": list(dict.fromkeys((*structured.facts, *decided))),
            }
        )
    # Each section holds one field's items: the rows' order across sections does not matter.
    rows: list[tuple[Section, str, str]] = [
        ("goal", structured.user_goal, ""),
        ("outcome", structured.outcome, ""),
        *(("decisions", f"{d.what} ({d.why})" if d.why else d.what, "") for d in structured.decisions),
        *(("errors", error.error, error.resolution) for error in structured.errors),
        *((section, text, "") for section, name in _LIST_FIELDS.items() for text in getattr(structured, name)),
    ]
    kept = [row for row in rows if row[1].strip()]
    return render_history([Item(s, _one_line(t), 0, n, _one_line(x)) for n, (s, t, x) in enumerate(kept, 1)])


def _one_line(text: str) -> str:
    return " ".join(text.split())


_OPEN_LABEL: Final = re.compile(r"^(?:User|Plan):\s*")
# The session summary's headings in written order (working recipes are filed as commands), each with its priority.
_SESSION_HEADINGS: Final[dict[Section, tuple[str, int]]] = {
    "outcome": ("## OUTCOME", 0),
    "commands": ("## WORKING RECIPES", 3),
    "failed": ("## FAILED APPROACHES", 2),
    "preferences": ("## USER PREFERENCES", 1),
    "facts": ("## PROJECT FACTS", 4),
}


def session_items(collector: Collector, items: Sequence[Item]) -> list[Item]:
    """``items`` (and the collector's outcomes and commands) regrouped under the session summary's headings."""
    out: list[Item] = []

    def add(section: Section, text: str, rank_offset: int = 0, info: float = 0.0) -> None:
        out.append(Item(section, text, _SESSION_HEADINGS[section][1] * 10 + rank_offset, len(out) + 1, info=info))

    ordered = sorted(items, key=lambda it: it.order)
    goals = [it for it in ordered if it.section == "goal"]
    outcomes = texts(ordered, "outcome")
    for text in outcomes:
        add("outcome", text)
    if not outcomes and goals:
        add("outcome", f"Goal: {_dated_line(goals[0])}")
    for text in collector.outcomes[-3:]:
        add("outcome", text, 1)
    if not outcomes and not collector.outcomes:
        for text in texts(ordered, "open")[-1:]:
            # A chat participant's last word is talk (often a goodbye: "Stay safe!"), no thread left
            # open for the agent; what it tells is among their facts.
            if not split_speaker(_OPEN_LABEL.sub("", text))[0]:
                add("outcome", f"Open: {text}", 2)
    failed_commands = {cmd for cmd, _ in collector.commands_failed} - set(collector.commands_ok)
    for item in ordered:
        line = _dated_line(item)
        if item.section in ("preferences", "constraints"):
            add("preferences", line)
        elif item.section == "failed":
            add("failed", line)
        elif item.section == "commands" and item.text.startswith("$ ") and item.text not in failed_commands:
            add("commands", item.text)
        elif item.section == "decisions":
            add("facts", line)
        elif item.section == "errors" and item.extra:
            add("facts", line, 1)
        elif item.section == "facts":
            add("facts", line, 3)
        elif item.section == "notes" and item.rank == R_REST and _tells(item.text):
            add("facts", line, 4, item.info)
    for command, error in collector.commands_failed:
        if command in failed_commands:
            add("failed", f"{command} failed: {error}", 1)
    files = texts(ordered, "files")
    if files:
        add("facts", "Key files: " + ", ".join(dict.fromkeys(files)), 2)
    return out


def _tells(line: str) -> bool:
    """True for a chat participant's line that tells their news, plans or events (what a later session
    asks about), not a remark to the other ("Your support means a lot")."""
    who, said = split_speaker(line)
    return bool(who) and not addresses_listener(said)


def _dated_line(item: Item) -> str:
    """``item``'s line; a relative time in it ("last week") led by the day it was said (each line of a
    session summary is read on its own, sessions later)."""
    line = line_of(item)
    if item.when and item.when not in line and names_relative_date(line):
        return f"({item.when}) {line}"
    return line


def render_session(items: Sequence[Item]) -> str:
    """Session items under seed 004's five headings."""
    return _under_headings({section: texts(items, section) for section in _SESSION_HEADINGS})


def _under_headings(lines: Mapping[Section, Sequence[str]]) -> str:
    return "\n\n".join(
        heading + "\n" + ("\n".join(f"- {line}" for line in lines[section]) if lines[section] else "- (none)")
        for section, (heading, _rank) in _SESSION_HEADINGS.items()
    )

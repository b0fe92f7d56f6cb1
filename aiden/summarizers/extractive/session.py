"""The session summary (seed 004): kept items regrouped under five headings, selected and rendered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.extractive.collector import _Collector
from aiden.summarizers.extractive.items import _QUOTA, _R_USER, FIXED_SEP, _Item, _texts
from aiden.summarizers.mustkeep import normalize
from aiden.summarizers.protocol import StructuredSummary

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

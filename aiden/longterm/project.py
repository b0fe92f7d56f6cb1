"""The PROJECT MEMORY block: the digest and the kept session summaries merged under a token budget.

The newest wins on conflicts; the GOAL leads, then sections in :data:`PRIORITY` order,
newest first within a section, while the block fits ``budget_tokens``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from aiden.config import Config
from aiden.longterm.files import digest_path, list_session_files, read_summary
from aiden.longterm.summaries import Section, SessionSummary, merge_many
from aiden.policy.tokens import estimate_tokens
from aiden.storage.layout import Layout

__all__ = ["BLOCK_TITLE", "PRIORITY", "load_project_memory", "render_project_memory"]

BLOCK_TITLE: Final = "PROJECT MEMORY"
_INTRO: Final = "Durable knowledge from earlier sessions of this project (newest wins on conflicts)."
PRIORITY: Final[tuple[Section, ...]] = (
    "user_preferences",
    "failed_approaches",
    "working_recipes",
    "facts",
    "outcome",
)
"""Sections in the order the budget is filled (and the block is rendered), after the GOAL."""
_GOAL: Final = re.compile(r"^Goal:\s", re.IGNORECASE)
_MAX_GOALS: Final = 2  # the current goal and the one it re-stated; older ones are superseded
_BLOCK_HEADINGS: Final[dict[Section | None, str]] = {
    None: "GOAL (why this project exists)",
    "user_preferences": "USER PREFERENCES (follow these)",
    "failed_approaches": "FAILED APPROACHES (do not repeat)",
    "working_recipes": "WORKING RECIPES",
    "facts": "PROJECT FACTS",
    "outcome": "RECENT OUTCOMES",
}


def _render(chosen: dict[Section | None, list[str]]) -> str:
    parts = [f"{BLOCK_TITLE}\n{_INTRO}"]
    for section in (None, *PRIORITY):  # None: the goals
        items = chosen.get(section)
        if items:
            parts.append(_BLOCK_HEADINGS[section] + "\n" + "\n".join(f"- {item}" for item in items))
    return "\n\n".join(parts)


def render_project_memory(
    summaries: Sequence[SessionSummary],
    digest: SessionSummary | None,
    *,
    budget_tokens: int,
    estimate: Callable[[str], int],
) -> str:
    """The PROJECT MEMORY block for ``summaries`` (oldest first) on top of ``digest``.

    Returns text starting with ``PROJECT MEMORY`` whose ``estimate`` is at most
    ``budget_tokens``, or ``""`` when there is nothing to say or the budget
    cannot hold a single item.
    """
    layers = [digest, *summaries] if digest is not None else list(summaries)
    merged = merge_many(layers)
    if merged is None or merged.is_empty:
        return ""
    # Why the work is done leads the block: a person resuming reads the goal first, and the
    # budget must never spend itself on details before the goal is in.
    order = {
        section: [item for item in merged.section(section) if not _GOAL.match(item)] for section in PRIORITY
    }
    goals = [item for section in PRIORITY for item in merged.section(section) if _GOAL.match(item)]
    goals = list(dict.fromkeys(goals))[::-1][:_MAX_GOALS]  # newest first: a re-statement wins
    chosen: dict[Section | None, list[str]] = {section: [] for section in (None, *PRIORITY)}
    picks: list[tuple[Section | None, str]] = []
    used = estimate(_render(chosen))
    candidates = [(None, goals), *((section, order[section][::-1]) for section in PRIORITY)]  # newest first
    for where, items in candidates:
        heading_cost = estimate(_BLOCK_HEADINGS[where]) + 1
        for item in items:
            cost = estimate(f"- {item}") + 1 + (0 if chosen[where] else heading_cost)
            if used + cost > budget_tokens:
                continue
            used += cost
            chosen[where].append(item)
            picks.append((where, item))
    for section in PRIORITY:  # render chronologically within each section
        position = {item: i for i, item in enumerate(order[section])}
        chosen[section].sort(key=position.__getitem__)
    # The per-item costs are an estimate of the whole; drop the last picks until it truly fits.
    while picks and estimate(_render(chosen)) > budget_tokens:
        where, item = picks.pop()
        chosen[where].remove(item)
    if not picks:
        return ""
    return _render(chosen)


def load_project_memory(
    layout: Layout, config: Config, *, current: str = "", estimate: Callable[[str], int] = estimate_tokens
) -> str:
    """The block from the digest and every kept summary (blocking; ``""`` if none).

    All of them: a summary left out would drop from every prompt until the cap merged it into the
    digest, then come back there with values newer summaries had superseded. The budget fills newest first.

    ``current`` (a running summary's session id) leaves that session's own summary out: a checkpoint
    or close writes it mid-session, and the block is for earlier sessions only. The current
    session's knowledge is in the prompt already (its summaries and hot window).
    """
    files = [p for p in list_session_files(layout) if p.stem.partition("-")[2] != current]
    summaries = [s for s in (read_summary(p, kind="session") for p in files) if s is not None]
    digest = read_summary(digest_path(layout), kind="digest")
    return render_project_memory(
        summaries, digest, budget_tokens=config.project_memory_budget(), estimate=estimate
    )

"""The PROJECT MEMORY block (seed 004, step 3): latest summaries merged under a token budget.

:func:`render_project_memory` is pure: the digest and the latest summaries are
merged (oldest first, so the most recent wins on conflicts), then items are
taken in priority order — USER PREFERENCES, FAILED APPROACHES, WORKING
RECIPES, PROJECT FACTS, then OUTCOMES — newest first within a section, while
the block stays within ``budget_tokens``. :func:`load_project_memory` reads
the files and renders the block for a new session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from aiden.config import Config
from aiden.longterm.files import digest_path, list_session_files, read_summary
from aiden.longterm.merge import merge_many
from aiden.longterm.summaries import Section, SessionSummary
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
"""Sections in the order the budget is filled (and the block is rendered)."""
_BLOCK_HEADINGS: Final[dict[Section, str]] = {
    "user_preferences": "USER PREFERENCES (follow these)",
    "failed_approaches": "FAILED APPROACHES (do not repeat)",
    "working_recipes": "WORKING RECIPES",
    "facts": "PROJECT FACTS",
    "outcome": "RECENT OUTCOMES",
}


def _render(chosen: dict[Section, list[str]]) -> str:
    parts = [f"{BLOCK_TITLE}\n{_INTRO}"]
    for section in PRIORITY:
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
    order = {section: list(merged.section(section)) for section in PRIORITY}
    chosen: dict[Section, list[str]] = {section: [] for section in PRIORITY}
    picks: list[tuple[Section, str]] = []
    used = estimate(_render(chosen))
    for section in PRIORITY:
        heading_cost = estimate(_BLOCK_HEADINGS[section]) + 1
        for item in reversed(order[section]):  # newest first
            cost = estimate(f"- {item}") + 1 + (0 if chosen[section] else heading_cost)
            if used + cost > budget_tokens:
                continue
            used += cost
            chosen[section].append(item)
            picks.append((section, item))
    for section in PRIORITY:  # render chronologically within each section
        position = {item: i for i, item in enumerate(order[section])}
        chosen[section].sort(key=position.__getitem__)
    # The per-item costs are an estimate of the whole; drop the last picks until it truly fits.
    while picks and estimate(_render(chosen)) > budget_tokens:
        section, item = picks.pop()
        chosen[section].remove(item)
    if not picks:
        return ""
    return _render(chosen)


def load_project_memory(
    layout: Layout, config: Config, *, estimate: Callable[[str], int] = estimate_tokens
) -> str:
    """Read the latest ``config.project_memory_sessions`` summaries and the digest; render the block.

    Blocking file I/O: call it from a worker thread in async code. Returns ``""``
    when no durable summary exists yet.
    """
    files = list_session_files(layout)[-config.project_memory_sessions :]
    summaries = [s for s in (read_summary(p, kind="session") for p in files) if s is not None]
    digest = read_summary(digest_path(layout), kind="digest")
    return render_project_memory(
        summaries, digest, budget_tokens=config.project_memory_budget(), estimate=estimate
    )

"""The PROJECT MEMORY block: the digest and the kept session summaries merged under a token budget.

The newest wins on conflicts; the GOAL leads, then sections in :data:`PRIORITY` order, the most
informative items first within a section (an older session's weighed down a little; the outcome's
newest first: where the work was left), while the block fits ``budget_tokens``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Final

from aiden.config import Config
from aiden.context.summary_fit import LayerItem, LayerSection, LongTermText
from aiden.longterm.files import digest_path, list_session_files, read_summary
from aiden.longterm.summaries import Section, SessionSummary, merge_many, same_key
from aiden.policy.tokens import estimate_tokens
from aiden.storage.layout import Layout
from aiden.summarizers.extractive.salience import Rarity

__all__ = [
    "BLOCK_TITLE",
    "PRIORITY",
    "load_project_memory",
    "project_memory_block",
    "render_project_memory",
    "with_profile",
]

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
_AGE_DISCOUNT: Final = 0.1  # an item 10 sessions old counts 0.79 of its information: news beats recency
_MAX_GOALS: Final = 2  # the current goal and the one it re-stated; older ones are superseded
_BLOCK_HEADINGS: Final[dict[Section | None, str]] = {
    None: "GOAL (why this project exists)",
    "user_preferences": "USER PREFERENCES (follow these)",
    "failed_approaches": "FAILED APPROACHES (do not repeat)",
    "working_recipes": "WORKING RECIPES",
    "facts": "PROJECT FACTS",
    "outcome": "RECENT OUTCOMES",
}


def _render(chosen: dict[Section | None, list[str]]) -> LongTermText:
    sections = [LayerSection(f"{BLOCK_TITLE}\n{_INTRO}")]
    for section in (None, *PRIORITY):  # None: the goals
        items = chosen.get(section)
        if items:
            # Goals are listed newest first, the other sections oldest first (chronologically).
            ages = range(len(items)) if section is None else range(len(items) - 1, -1, -1)
            lines = (LayerItem(f"- {item}", age) for item, age in zip(items, ages, strict=True))
            sections.append(LayerSection(_BLOCK_HEADINGS[section], tuple(lines)))
    return LongTermText.of(sections)


def render_project_memory(
    summaries: Sequence[SessionSummary],
    digest: SessionSummary | None,
    *,
    budget_tokens: int,
    estimate: Callable[[str], int],
) -> LongTermText:
    """The PROJECT MEMORY block for ``summaries`` (oldest first) on top of ``digest``.

    Returns text starting with ``PROJECT MEMORY`` whose ``estimate`` is at most
    ``budget_tokens``, or ``""`` when there is nothing to say or the budget
    cannot hold a single item; its sections are those of the block.
    """
    layers = [digest, *summaries] if digest is not None else list(summaries)
    # No per-section cap here: the budget caps the block, and a cap would keep the newest session's items only.
    merged = merge_many(layers, max_items=sum(len(layer.section(s)) for layer in layers for s in PRIORITY))
    if merged is None or merged.is_empty:
        return LongTermText()
    # Why the work is done leads the block: a person resuming reads the goal first, and the
    # budget must never spend itself on details before the goal is in.
    order = {
        section: [item for item in merged.section(section) if not _GOAL.match(item)] for section in PRIORITY
    }
    goals = [item for section in PRIORITY for item in merged.section(section) if _GOAL.match(item)]
    goals = list(dict.fromkeys(goals))[::-1][:_MAX_GOALS]  # newest first: a re-statement wins
    # Within a section the budget goes to the most informative items first (rare words, numbers,
    # dates and names per token), an older session's weighed down a little. Filled newest first, one
    # long session's items (a chat's every line) would push every older session out.
    rarity = Rarity(item for section in PRIORITY for item in merged.section(section))
    age: dict[tuple[Section, str], int] = {}
    for sessions_ago, layer in enumerate(reversed(layers)):  # the newest holder of an item is where merge kept it
        for section in PRIORITY:
            for item in layer.section(section):
                age.setdefault((section, same_key(item)), sessions_ago)

    def worth(section: Section, item: str) -> float:
        return rarity.density(item) * math.pow(1 + age[section, same_key(item)], -_AGE_DISCOUNT)

    chosen: dict[Section | None, list[str]] = {section: [] for section in (None, *PRIORITY)}
    picks: list[tuple[Section | None, str]] = []
    used = estimate(_render(chosen))
    candidates: list[tuple[Section | None, list[str]]] = [(None, goals)]
    for section in PRIORITY:  # reversed: the newest first on a tie
        newest_first = order[section][::-1]
        # Where the work was left (the outcome's open threads) is the newest's, however plain.
        ranked = newest_first if section == "outcome" else sorted(newest_first, key=lambda item: -worth(section, item))
        candidates.append((section, ranked))
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
    return _render(chosen) if picks else LongTermText()


def project_memory_block(
    summaries: Sequence[SessionSummary],
    digest: SessionSummary | None,
    config: Config,
    *,
    budget_tokens: int,
    estimate: Callable[[str], int] = estimate_tokens,
) -> LongTermText:
    """The block within ``budget_tokens``; when that holds more than ``project_memory_budget``, its
    :attr:`~aiden.context.summary_fit.LongTermText.compact` form is the block within that budget
    (what a session carries once it compacted or its log grew: :func:`~aiden.policy.triggers.fresh_block_fits`)."""
    compact = render_project_memory(summaries, digest, budget_tokens=config.project_memory_budget(), estimate=estimate)
    if budget_tokens <= config.project_memory_budget():
        return compact
    block = render_project_memory(summaries, digest, budget_tokens=budget_tokens, estimate=estimate)
    return compact if block == compact else LongTermText.of(block.sections, compact=compact)


def with_profile(block: LongTermText, profile: LongTermText) -> LongTermText:
    """The long-term prompt layer: ``block``, then ``profile`` (in its compact form too)."""
    compact = None if block.compact is None else with_profile(block.compact, profile)
    return LongTermText.of([*block.sections, *profile.sections], compact=compact)


def load_project_memory(
    layout: Layout,
    config: Config,
    *,
    current: str = "",
    budget_tokens: int | None = None,
    estimate: Callable[[str], int] = estimate_tokens,
) -> LongTermText:
    """The block (:func:`project_memory_block`, within ``budget_tokens``, default
    ``project_memory_budget``) from the digest and every kept summary (blocking; ``""`` if none).

    All of them: a summary left out would drop from every prompt until the cap merged it into the
    digest, then come back there with values newer summaries had superseded.

    ``current`` (a running summary's session id) leaves that session's own summary out: a checkpoint
    or close writes it mid-session, and the block is for earlier sessions only. The current
    session's knowledge is in the prompt already (its summaries and hot window).
    """
    files = [p for p in list_session_files(layout) if p.stem.partition("-")[2] != current]
    summaries = [s for s in (read_summary(p, kind="session") for p in files) if s is not None]
    digest = read_summary(digest_path(layout), kind="digest")
    budget = config.project_memory_budget() if budget_tokens is None else budget_tokens
    return project_memory_block(summaries, digest, config, budget_tokens=budget, estimate=estimate)

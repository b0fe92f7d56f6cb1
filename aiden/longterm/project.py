"""The PROJECT MEMORY block: the digest and the kept session summaries merged under a token budget.

The newest wins on conflicts; the GOAL leads, then the preferences the kept summaries state, then the
older preferences, the other durable sections and the recent outcomes share what is left
(:func:`share_budget`); the most informative items first within a section (an older session's
weighed down a little; the outcome's newest first: where the work was left).
The digest keeps its items the same way within its size (:func:`fit_digest`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from aiden.config import Config
from aiden.context.summary_fit import LayerItem, LayerSection, LongTermText
from aiden.longterm.entries import MemoryEntry
from aiden.longterm.files import digest_path, list_session_files, read_summary
from aiden.longterm.store import fit_profile
from aiden.longterm.summaries import Section, SessionSummary, merge_many, same_key
from aiden.policy.tokens import estimate_tokens
from aiden.storage.layout import Layout
from aiden.summarizers.extractive.salience import Rarity

__all__ = [
    "BLOCK_TITLE",
    "PRIORITY",
    "fit_digest",
    "load_project_memory",
    "project_memory_block",
    "render_project_memory",
    "share_budget",
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
"""Sections in the order the block lists them, after the GOAL."""
_GOAL: Final = re.compile(r"^Goal:\s", re.IGNORECASE)
# An item 10 sessions old counts 0.62 of its information: news beats recency, yet the digest's many old
# items leave the newest sessions' room (at 0.1 they took it).
_AGE_DISCOUNT: Final = 0.2
# RECENT OUTCOMES is where the recent sessions left the work: the kept sessions' outcomes and only the
# newest few of the digest's (one per digested session; hundreds of sessions back, their threads are
# most likely closed).
_DIGEST_OUTCOMES: Final = 3
# Ranked by the session that last said them: the latest say of a preference wins, and the latest
# failures are the ones the next session is about to repeat (by density, with one session kept and so
# every digested item one session old, older and rarer failures pushed the last session's out).
_BY_SAID: Final[frozenset[Section]] = frozenset({"user_preferences", "failed_approaches"})
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


def _ages(layers: Sequence[SessionSummary], *, by_place: bool) -> dict[tuple[Section, str], float]:
    """How many sessions ago each item of ``layers`` (oldest first) was said, by its newest holder.

    ``by_place``: a digest holds many sessions in order, so its items are aged by their place in their
    section, each a session's worth of items (the section's mean over the other layers) one session older.
    """
    age: dict[tuple[Section, str], float] = {}
    for sessions_ago, layer in enumerate(reversed(layers)):  # the newest holder of an item is where merge kept it
        for section in PRIORITY:
            items = layer.section(section)
            if by_place and layer.kind == "digest":
                sizes = [len(other.section(section)) for other in layers if other is not layer]
                per_session = max(1.0, sum(sizes) / len(sizes)) if sizes else 1.0
                older = [key for key in map(same_key, reversed(items)) if (section, key) not in age]
                for place, key in enumerate(older):
                    age[section, key] = sessions_ago + place / per_session
            else:
                for item in items:
                    age.setdefault((section, same_key(item)), sessions_ago)
    return age


def _ranked(layers: Sequence[SessionSummary], merged: SessionSummary, *, by_place: bool) -> dict[Section, list[str]]:
    """Each section's items of ``merged`` (merged from ``layers``), the most valuable first.

    Most informative first (rare words, numbers, dates and names per token), an older session's
    weighed down a little: filled newest first, one long session's items (a chat's every line) would
    push every older session out. The outcome's newest first: where the work was left, however plain.
    The preferences' and failed approaches' by the session that last said them (the digest's by their
    place), the most informative first within one: the latest say wins, a preference restated again
    and again is in use, not old, and the newest failures are the ones the next session may repeat.
    """
    rarity = Rarity(item for section in PRIORITY for item in merged.section(section))
    age = _ages(layers, by_place=by_place)
    said = age if by_place else _ages(layers, by_place=True)

    def worth(section: Section, item: str) -> float:
        return rarity.density(item) * math.pow(1 + age[section, same_key(item)], -_AGE_DISCOUNT)

    ranked: dict[Section, list[str]] = {}
    for section in PRIORITY:
        newest_first = list(merged.section(section))[::-1]  # the newest first on a tie
        if section == "outcome":
            ranked[section] = newest_first
        elif section in _BY_SAID:
            ranked[section] = sorted(newest_first, key=lambda i: (said[section, same_key(i)], -worth(section, i)))
        else:
            ranked[section] = sorted(newest_first, key=lambda i: -worth(section, i))
    return ranked


def share_budget(ranked: Sequence[tuple[int, Sequence[tuple[str, int]]]], budget: int) -> list[list[str]]:
    """Pure: the items each section of ``ranked`` (its heading's cost, then its items most valuable
    first with their costs) takes of ``budget``, in the order taken; a heading is paid with its first item.

    First each section's best item, in section order (a budget too small for them all goes to the
    first sections). Then the sections share the rest: each takes its best items within an equal
    share, a section needing less leaves the rest to the others (max-min fair), so no long section
    starves the others. What the shares leave (items bigger than what was left of a share) then
    goes in section order.
    """
    picked: list[list[str]] = [[] for _ in ranked]
    left = budget

    def cost(i: int, item_cost: int) -> int:
        return item_cost + (0 if picked[i] else ranked[i][0])

    for i, (_, items) in enumerate(ranked):
        if items and cost(i, items[0][1]) <= left:
            left -= cost(i, items[0][1])
            picked[i].append(items[0][0])
    rest = [list(items[len(picked[i]):]) for i, (_, items) in enumerate(ranked)]
    sharing = [i for i, items in enumerate(rest) if items]
    while sharing:
        share = left // len(sharing)
        need = {i: cost(i, sum(c for _, c in rest[i])) for i in sharing}
        small = [i for i in sharing if need[i] <= share]
        if not small:
            for i in sharing:
                used = 0
                for item, item_cost in rest[i]:
                    if used + cost(i, item_cost) <= share:
                        used += cost(i, item_cost)
                        picked[i].append(item)
                left -= used
            break
        for i in small:
            picked[i].extend(item for item, _ in rest[i])
            left -= need[i]
            sharing.remove(i)
    for i in sharing:
        taken = set(picked[i])
        for item, item_cost in rest[i]:
            if item not in taken and cost(i, item_cost) <= left:
                left -= cost(i, item_cost)
                picked[i].append(item)
    return picked


def _fill(
    order: dict[Section, list[str]],
    stages: Sequence[Sequence[tuple[Section | None, list[str]]]],
    *,
    budget_tokens: int,
    estimate: Callable[[str], int],
) -> LongTermText:
    """The block of ``order``'s items, ``stages`` (each: the sections' items, the most valuable first) filling
    ``budget_tokens`` one after the other, a stage's sections sharing what the earlier ones left."""
    chosen: dict[Section | None, list[str]] = {section: [] for section in (None, *PRIORITY)}
    picks: list[tuple[Section | None, str]] = []

    def costs(where: Section | None, items: list[str]) -> tuple[int, list[tuple[str, int]]]:
        heading = 0 if chosen[where] else estimate(_BLOCK_HEADINGS[where]) + 1
        return heading, [(item, estimate(f"- {item}") + 1) for item in items]

    for stage in stages:
        used = estimate(_render(chosen))
        taken = share_budget([costs(where, items) for where, items in stage], budget_tokens - used)
        for (where, _), items in zip(stage, taken, strict=True):
            chosen[where].extend(items)
            picks.extend((where, item) for item in items)
    for section in PRIORITY:  # render chronologically within each section
        position = {item: i for i, item in enumerate(order[section])}
        chosen[section].sort(key=position.__getitem__)
    # The per-item costs are an estimate of the whole; drop the last picks until it truly fits.
    while picks and estimate(_render(chosen)) > budget_tokens:
        where, item = picks.pop()
        chosen[where].remove(item)
    return _render(chosen) if picks else LongTermText()


def _prepared(
    summaries: Sequence[SessionSummary], digest: SessionSummary | None
) -> tuple[dict[Section, list[str]], list[list[tuple[Section | None, list[str]]]]]:
    """(each section's items in order, the stages filling the block: :func:`_fill`); no stage if empty."""
    layers = [digest, *summaries] if digest is not None else list(summaries)
    # No per-section cap here: the budget caps the block, and a cap would keep the newest session's items only.
    merged = merge_many(layers, max_items=sum(len(layer.section(s)) for layer in layers for s in PRIORITY))
    if merged is None or merged.is_empty:
        return {section: [] for section in PRIORITY}, []  # nothing to say: the block is ""
    order = {
        section: [item for item in merged.section(section) if not _GOAL.match(item)] for section in PRIORITY
    }
    goals = [item for section in PRIORITY for item in merged.section(section) if _GOAL.match(item)]
    goals = list(dict.fromkeys(goals))[::-1][:_MAX_GOALS]  # newest first: a re-statement wins
    # The digest's items alike, older than every kept summary's: a long chat's last session asks about
    # every earlier one (by their place, LoCoMo's last sessions found 1.8 points fewer of them).
    ranked = _ranked(layers, merged, by_place=False)
    ranked = {section: [item for item in ranked[section] if not _GOAL.match(item)] for section in PRIORITY}
    # Why the work is done leads the block: a person resuming reads the goal first, and the budget
    # must never spend itself on details before the goal is in. What the recent sessions asked to
    # follow comes next; the older preferences, the failed approaches, where the work was left (the kept
    # sessions' outcomes and the digest's newest few, a short list), the recipes and the facts then share
    # what is left, so none starves the others (a long project's digest holds hundreds of each). The
    # outcomes before the recipes and facts: those fill every token a share leaves, and the final trim
    # drops the last picks (filled last, a long project's outcomes were left no token).
    said = {same_key(item) for summary in summaries for item in summary.user_preferences}
    prefs = ranked["user_preferences"]
    recent = [item for item in prefs if same_key(item) in said]
    outcomes = _recent_outcomes(ranked["outcome"], digest, summaries) if digest is not None else ranked["outcome"]
    sharing: list[tuple[Section | None, list[str]]] = [
        ("user_preferences", [i for i in prefs if same_key(i) not in said]),
        ("failed_approaches", ranked["failed_approaches"]),
        ("outcome", outcomes),
        ("working_recipes", ranked["working_recipes"]),
        ("facts", ranked["facts"]),
    ]
    return order, [[(None, goals)], [("user_preferences", recent)], sharing]


def _recent_outcomes(newest_first: list[str], digest: SessionSummary, summaries: Sequence[SessionSummary]) -> list[str]:
    """``newest_first`` but for the digest's outcomes past its newest :data:`_DIGEST_OUTCOMES`."""
    recent = {same_key(item) for summary in summaries for item in summary.outcome}
    recent.update(map(same_key, digest.outcome[::-1][:_DIGEST_OUTCOMES]))
    return [item for item in newest_first if same_key(item) in recent]


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
    return _fill(*_prepared(summaries, digest), budget_tokens=budget_tokens, estimate=estimate)


def fit_digest(digest: SessionSummary, merged: Sequence[SessionSummary], *, max_bytes: int) -> SessionSummary:
    """``digest``, into which ``merged`` (oldest first) were just merged, cut to its most valuable items
    whose lines take at most ``max_bytes`` (UTF-8), its sections sharing them as the block's do.

    Valued as the block values them, the merged sessions the newest: so the digest keeps what the
    block would show, and every backend keeps the same bounded digest.
    """
    if sum(len(f"- {item}\n".encode()) for section in PRIORITY for item in digest.section(section)) <= max_bytes:
        return digest
    # Of the outcomes only the newest few are ever shown (:data:`_DIGEST_OUTCOMES`): the bytes go to the rest.
    digest = msgspec.structs.replace(digest, outcome=digest.outcome[::-1][:_DIGEST_OUTCOMES][::-1])
    ranked = _ranked([digest, *merged], digest, by_place=True)  # what it evicts: the older of the equally informative
    lines = [(0, [(item, len(f"- {item}\n".encode())) for item in ranked[section]]) for section in PRIORITY]
    kept = {section: set(items) for section, items in zip(PRIORITY, share_budget(lines, max_bytes), strict=True)}
    return msgspec.structs.replace(
        digest, **{section: tuple(i for i in digest.section(section) if i in kept[section]) for section in PRIORITY}
    )


def project_memory_block(
    summaries: Sequence[SessionSummary],
    digest: SessionSummary | None,
    config: Config,
    *,
    budget_tokens: int,
) -> LongTermText:
    """The block within ``budget_tokens``; when that holds more than ``project_memory_budget``, its
    :attr:`~aiden.context.summary_fit.LongTermText.compact` form is the block within that budget
    (what a session carries once it compacted or its log grew: :func:`~aiden.policy.triggers.fresh_block_fits`)."""
    prepared = _prepared(summaries, digest)  # once for both: merging a long project's summaries is the cost
    compact = _fill(*prepared, budget_tokens=config.project_memory_budget(), estimate=estimate_tokens)
    if budget_tokens <= config.project_memory_budget():
        return compact
    block = _fill(*prepared, budget_tokens=budget_tokens, estimate=estimate_tokens)
    return compact if block == compact else LongTermText.of(block.sections, compact=compact)


def with_profile(
    block: LongTermText, entries: Sequence[MemoryEntry], config: Config, *, now: float
) -> LongTermText:
    """The long-term prompt layer: ``block``, then the profile of the saved ``entries`` within
    ``project_memory_budget`` (:func:`~aiden.longterm.store.fit_profile`; in the compact form too)."""
    # From the entries, as the profile is rendered from them: the cut works on them, not on its text.
    budget = config.project_memory_budget()
    profile = fit_profile(entries, now=now, budget_tokens=budget, estimate=estimate_tokens)
    compact = None if block.compact is None else LongTermText.of([*block.compact.sections, *profile.sections])
    return LongTermText.of([*block.sections, *profile.sections], compact=compact)


def load_project_memory(
    layout: Layout,
    config: Config,
    *,
    current: str = "",
    budget_tokens: int | None = None,
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
    return project_memory_block(summaries, digest, config, budget_tokens=budget)

"""What is kept and how it reads: repeats dropped, runs of numbered requests collapsed, the rest
chosen under the budget, which the rendered text (history sections or the session summary's five
headings) must fit; and the structured views of the kept items.

A long session repeats one request with the next step number; the collapse
keeps the current state ("steps 1-33; now at step 33"), not every step.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

import msgspec

from aiden.policy.summary_md import normalize, step_match
from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.extractive.extract import (
    OPEN_PREFIX,
    R_FACT,
    R_OPEN,
    R_REST,
    SECTIONS,
    Collector,
    Item,
    Section,
    line_of,
)
from aiden.summarizers.extractive.salience import addresses_listener, names_a_date, names_relative_date
from aiden.summarizers.extractive.tools import digitless
from aiden.summarizers.mustkeep.classify import is_routine_request, split_reason, split_speaker
from aiden.summarizers.mustkeep.text import clip, key_tokens
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary

_BARE_NUMBER: Final = re.compile(r"^\d+(?:[.,:]\d+)*$")
_EXACT_ONLY: Final[frozenset[Section]] = frozenset({"files", "commands", "tool_notes"})


class Deduped(msgspec.Struct, frozen=True):
    """Unique items, plus the items absorbed into a more important one that contains them."""

    kept: list[Item]
    absorbed: list[tuple[Item, Item]]  # (absorbed item, the kept item containing it)


_GRAM: Final = 8
_QUOTA: Final = 3  # items a tier may place before strict priority (see select)


class _Containers(msgspec.Struct):
    """The kept sentence lines, searchable for "which first one contains ``norm``" without a full scan.

    Containers are indexed by their ``_GRAM``-character grams starting after a
    space; a contained ``norm``'s own such grams are among them, so only the
    postings of its rarest gram need the exact ``in`` check (in insertion
    order: the answer of a plain scan). A ``norm`` without a gram is scanned.
    """

    norms: list[str] = []
    items: list[Item] = []
    grams: dict[str, list[int]] = {}

    def add(self, norm: str, item: Item) -> None:
        index = len(self.norms)
        self.norms.append(norm)
        self.items.append(item)
        for gram in _word_grams(norm):
            posting = self.grams.setdefault(gram, [])
            if not posting or posting[-1] != index:
                posting.append(index)

    def first_containing(self, norm: str) -> Item | None:
        best: list[int] | None = None
        for gram in _word_grams(norm):
            posting = self.grams.get(gram)
            if posting is None:
                return None
            if best is None or len(posting) < len(best):
                best = posting
        norms = self.norms
        if best is None:
            return next((self.items[i] for i, n in enumerate(norms) if norm in n), None)
        return next((self.items[i] for i in best if norm in norms[i]), None)


def _first_holding(containers: _Containers, tokens: Sequence[str]) -> Item | None:
    return next(
        (c for n, c in zip(containers.norms, containers.items, strict=True) if all(t in n for t in tokens)),
        None,
    )


def _word_grams(norm: str) -> Iterator[str]:
    end = len(norm) - _GRAM
    start = norm.find(" ")
    while 0 <= start < end:
        yield norm[start + 1 : start + 1 + _GRAM]
        start = norm.find(" ", start + 1)


def dedupe(items: Iterable[Item]) -> Deduped:
    """Drop repeats, keeping each fact's most important (then earliest) occurrence.

    A sentence item is also absorbed when a kept, more important line
    already contains it verbatim (a constraint quoted in the goal).
    """
    ordered = sorted(items, key=lambda it: (it.rank, it.order))
    kept: list[Item] = []
    absorbed: list[tuple[Item, Item]] = []
    seen: dict[tuple[str, str], Item] = {}
    containers = _Containers()
    for item in ordered:
        norm = normalize(line_of(item))
        if not norm:
            continue
        bucket = item.section if item.section in _EXACT_ONLY else "text"
        if item.section == "errors":
            # Log lines repeat with new timestamps and counters; the
            # "(from ...)" context does not make an error a different one.
            bucket, norm = "errors", digitless(item.text.split(" (from ", 1)[0])
        twin = seen.get((bucket, norm))
        if twin is not None:
            if twin.section != item.section:
                absorbed.append((item, twin))
            continue
        if bucket == "text":
            # Who said it is not part of what was said: "Caroline: I joined a group." is in the
            # goal "Caroline: A lot happened. I joined a group."
            _who, said = split_speaker(item.text.strip())
            container = containers.first_containing(normalize(said) or norm)
            if container is not None:
                absorbed.append((item, container))
                continue
            if item.section == "facts":
                # A fact sentence is kept for its ids and numbers: one that
                # names nothing new ("step 19 of PROJ-6915" again) adds nothing.
                tokens = [t for t in key_tokens(item.text) if not _BARE_NUMBER.match(t)]
                if tokens and (holder := _first_holding(containers, tokens)) is not None:
                    absorbed.append((item, holder))
                    continue
                # ... unless it says when something happened ("on 8 May, 2023").
                if not tokens and not names_a_date(item.text):
                    item = msgspec.structs.replace(item, rank=max(item.rank, R_REST))
            containers.add(norm, item)
        seen[(bucket, norm)] = item
        kept.append(item)
    return Deduped(kept, absorbed)


def with_absorbed(chosen: Sequence[Item], deduped: Deduped) -> list[Item]:
    """``chosen`` plus the items absorbed by a chosen item (for the structured view)."""
    chosen_ids = {id(it) for it in chosen}
    extra = [item for item, container in deduped.absorbed if id(container) in chosen_ids]
    return [*chosen, *extra]


# Collapse: runs of numbered near-identical requests become one current-state line.
_USER: Final = "User: "


def _request_text(item: Item) -> str | None:
    if item.section == "requests":
        return item.text
    if item.section == "open" and item.text.startswith(_USER):
        return item.text[len(_USER) :]
    return None


def collapse_requests(items: Sequence[Item]) -> list[Item]:
    """``items`` with each run of numbered near-identical requests replaced by one current-state line.

    Requests match when they read the same up to their step number. The most
    recent routine group ("continue ..., step N") is the open thread; older
    routine groups counting in other words are superseded and dropped.
    """
    # By what the requests read up to their numbers, and the counting word: the newest request
    # (with its parts) and every step number the group names.
    latest: dict[tuple[str, str], tuple[Item, re.Match[str]]] = {}
    numbers: dict[tuple[str, str], list[int]] = {}
    member: dict[int, tuple[str, str]] = {}
    for item in items:
        text = _request_text(item)
        match = step_match(text) if text is not None else None
        if match is None:
            continue
        key = (re.sub(r"\d+", "#", normalize(match.group("head"))), match.group("word").casefold())
        member[id(item)] = key
        first = int(match.group("a"))
        numbers.setdefault(key, []).extend((first, int(match.group("b") or first)))
        if key not in latest or item.order >= latest[key][0].order:
            latest[key] = (item, match)
    routine = [k for k, (_, m) in latest.items() if is_routine_request(f"{m.group('head')}{k[1]} 1{m.group('tail')}")]
    current = max(routine, key=lambda k: latest[k][0].order, default=None)
    superseded = {
        k
        for k in routine
        if current is not None and k[1] != current[1] and latest[k][0].order < latest[current][0].order
    }
    out: list[Item] = []
    for item in items:
        group = member.get(id(item))
        if group is None:
            out.append(item)
            continue
        newest, match = latest[group]
        if group in superseded or item is not newest:
            continue
        lo, hi = min(numbers[group]), max(numbers[group])
        if lo == hi:
            out.append(item)  # the same step twice (a request and the open thread): nothing to collapse
            continue
        word, now = group[1], int(match.group("b") or match.group("a"))
        text = f"{match.group('head')}{word}s {lo}\u2013{hi}; now at {word} {now}{match.group('tail')}"
        out.append(msgspec.structs.replace(item, section="open", text=_USER + text, rank=R_OPEN, extra=""))
    return out


# Selection under budget.
_INLINE_SECTIONS: Final[frozenset[Section]] = frozenset({"goal", "outcome", "files"})


def select(items: Sequence[Item], budget: int, *, max_lines: int = sys.maxsize) -> list[Item]:
    """Pick items under ``budget`` tokens (and ``max_lines``): a quota per tier first, then strict priority."""
    candidates = sorted(items, key=_priority)
    chosen: dict[int, Item] = {}  # by id, in the order taken
    sections_used: set[Section] = set()
    used = lines_used = 0

    def try_take(item: Item) -> None:
        nonlocal used, lines_used
        new_section = item.section not in sections_used
        tokens = estimate_tokens(line_of(item)) + 2
        if new_section:
            tokens += estimate_tokens(SECTIONS[item.section][0]) + 2
        if item.section in _INLINE_SECTIONS:
            lines = 1 if (new_section or item.section != "files") else 0
        else:
            lines = 2 if new_section else 1
        if used + tokens <= budget and lines_used + lines <= max_lines:
            used, lines_used = used + tokens, lines_used + lines
            chosen[id(item)] = item
            sections_used.add(item.section)

    # Every load-bearing tier (rank <= R_FACT) may place this many items before the others are
    # considered in strict order, so one talkative kind cannot starve the rest; noise tiers only
    # ever get what is left.
    per_tier: Counter[tuple[int, Section]] = Counter()
    for item in candidates:
        if item.rank <= R_FACT and per_tier[item.rank, item.section] < _QUOTA:
            per_tier[item.rank, item.section] += 1
            try_take(item)
    for item in candidates:
        if id(item) not in chosen:
            try_take(item)

    # The running cost is an estimate; the rendered text is what must fit.
    kept = sorted(chosen.values(), key=_priority)
    while kept and (estimate_tokens(text := render_history(kept)) > budget or len(text.splitlines()) > max_lines):
        kept.pop()
    if not kept and candidates:
        return [_shrink_to_fit(candidates[0], budget)]
    return kept


def _priority(item: Item) -> tuple[int, float, int]:
    """Tier first; within the fact and talk tiers more information per token first, above them
    first-seen order (every one matters, the oldest states the rule)."""
    return item.rank, -item.info if item.rank >= R_FACT else 0.0, item.order


def _shrink_to_fit(item: Item, budget: int) -> Item:
    """The most important item alone, clipped until it fits a tiny budget (best effort below ~8 tokens)."""
    limit = len(item.text)
    while limit > 1:
        shrunk = msgspec.structs.replace(item, text=clip(item.text, limit), extra="")
        if estimate_tokens(render_history([shrunk])) <= budget:
            return shrunk
        limit = min(limit - 1, limit * 2 // 3)
    return msgspec.structs.replace(item, text=clip(item.text, 1), extra="")


def select_session(items: Sequence[Item], budget: int) -> list[Item]:
    """Pick session items under ``budget`` tokens: repeats dropped, a quota per heading first, then by rank."""
    unique: dict[str, Item] = {}
    # Within a rank, more information per token first (a chat's facts are many; the budget takes the best).
    for item in sorted(items, key=lambda it: (it.rank, -it.info, it.order)):
        unique.setdefault(normalize(item.text), item)
    unique.pop("", None)
    taken: set[int] = set()
    used = estimate_tokens(render_session(()))
    per_section: Counter[Section] = Counter()
    for quota in (_QUOTA, sys.maxsize):
        for item in unique.values():
            cost = estimate_tokens(item.text) + 2
            if id(item) not in taken and per_section[item.section] < quota and used + cost <= budget:
                used += cost
                taken.add(id(item))
                per_section[item.section] += 1
    chosen = [item for item in unique.values() if id(item) in taken]  # (in the order sorted above)
    while chosen and estimate_tokens(render_session(chosen)) > budget:
        chosen.pop()
    return chosen


# Rendering: kept items as text and as the structured view.

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
            if not split_speaker(OPEN_PREFIX.sub("", text))[0]:
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

"""What is kept: repeats dropped, runs of numbered requests collapsed, the rest chosen under the budget.

A long session repeats one request with the next step number; the collapse
keeps the current state ("steps 1-33; now at step 33"), not every step.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import msgspec

from aiden.policy.summary_md import normalize, step_match
from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.extractive.extract import R_FACT, R_OPEN, R_REST, SECTIONS, Item, Section, line_of
from aiden.summarizers.extractive.render import render_history, render_session
from aiden.summarizers.extractive.salience import names_a_date
from aiden.summarizers.extractive.tools import digitless
from aiden.summarizers.mustkeep.classify import is_routine_request, split_speaker
from aiden.summarizers.mustkeep.text import clip, key_tokens

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
    """The first container holding every one of ``tokens``."""
    return next(
        (c for n, c in zip(containers.norms, containers.items, strict=True) if all(t in n for t in tokens)),
        None,
    )


def _word_grams(norm: str) -> Iterator[str]:
    """``norm``'s ``_GRAM``-character slices starting right after a space."""
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
                if not tokens:
                    # ... unless it says when something happened ("on 8 May, 2023").
                    if not names_a_date(item.text):
                        item = msgspec.structs.replace(item, rank=max(item.rank, R_REST))
                else:
                    holder = _first_holding(containers, tokens)
                    if holder is not None:
                        absorbed.append((item, holder))
                        continue
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
    chosen: list[Item] = []
    used = estimate_tokens(render_session(()))
    per_section: Counter[Section] = Counter()
    rest: list[Item] = []
    for item in unique.values():
        cost = estimate_tokens(item.text) + 2
        if per_section[item.section] < _QUOTA and used + cost <= budget:
            used += cost
            chosen.append(item)
            per_section[item.section] += 1
        else:
            rest.append(item)
    for item in rest:
        cost = estimate_tokens(item.text) + 2
        if used + cost <= budget:
            used += cost
            chosen.append(item)
    chosen.sort(key=lambda it: (it.rank, -it.info, it.order))
    while chosen and estimate_tokens(render_session(chosen)) > budget:
        chosen.pop()
    return chosen

"""What is kept: repeats dropped, runs of numbered requests collapsed, the rest chosen under the budget.

* Deduplication: exact repeats, and sentences another kept line already contains.
* Collapse: repeated near-identical requests become the current state ("steps
  1-33 of X; now at step 33", with an en dash). A long session repeats one request with the next
  step number ("Continue with the gateway migration (PROJ-1791), step 12:
  ..."); listing every step buries what matters. Seed 001: keep the current
  state of the plan, drop superseded versions. Linear in the number of items.
* Selection under budget: which kept items fit a request's token budget (and a fold's line cap), and
  which session items fit a session summary's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import msgspec

from aiden.policy.summary_md import step_match
from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.extractive.extract import R_FACT, R_OPEN, R_REST, SECTIONS, Item, Section, line_of
from aiden.summarizers.extractive.render import render_history, render_session
from aiden.summarizers.extractive.salience import names_a_date
from aiden.summarizers.extractive.tools import digitless
from aiden.summarizers.mustkeep import clip, is_routine_request, key_tokens, normalize
from aiden.summarizers.mustkeep.classify import split_speaker

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

    Every container is indexed by its ``_GRAM``-character grams that start
    right after a space. A ``norm`` contained in a container has each of its
    own such grams at a word start of the container too, so only the
    containers posted under the rarest of ``norm``'s grams need the exact
    ``in`` check; scanning them in insertion order keeps the answer that of a
    plain scan (the first container in order). A ``norm`` without such a gram
    (a word or two) falls back to the plain scan.
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
    already contains it verbatim (a constraint quoted in the goal): it is in
    the text either way. A rolling fold re-extracts the sentences of goal and
    open-thread lines it demotes or drops, so absorbed facts survive folds.
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


class _Group(msgspec.Struct):
    """Requests that read the same up to their step number; the latest says where the run is now."""

    word: str
    latest: Item
    latest_number: int = 0
    head: str = ""
    tail: str = ""
    items: list[Item] = []
    numbers: list[int] = []


def _request_text(item: Item) -> str | None:
    if item.section == "requests":
        return item.text
    if item.section == "open" and item.text.startswith(_USER):
        return item.text[len(_USER) :]
    return None


def collapse_requests(items: Sequence[Item]) -> list[Item]:
    """``items`` with each run of numbered near-identical requests replaced by one current-state line.

    Requests match when they read the same up to their step number
    (digits aside). The most recent routine group ("continue ..., step N")
    is the open thread; older routine groups counting in other words are
    superseded and dropped.
    """
    groups: dict[tuple[str, str], _Group] = {}
    member: dict[int, tuple[str, str]] = {}
    for item in items:
        text = _request_text(item)
        match = step_match(text) if text is not None else None
        if match is None:
            continue
        word = match.group("word").casefold()
        key = (re.sub(r"\d+", "#", normalize(match.group("head"))), word)
        group = groups.setdefault(key, _Group(word, item))
        group.items.append(item)
        member[id(item)] = key
        first = int(match.group("a"))
        last = int(match.group("b") or first)
        group.numbers.extend((first, last))
        if item.order >= group.latest.order:
            group.latest, group.latest_number = item, last
            group.head, group.tail = match.group("head"), match.group("tail")
    collapsed = {key for key, group in groups.items() if len(group.items) > 1 or len(set(group.numbers)) > 1}
    routine = [key for key, g in groups.items() if is_routine_request(f"{g.head}{g.word} 1{g.tail}")]
    current = max(routine, key=lambda k: groups[k].latest.order, default=None)
    superseded = {
        k
        for k in routine
        if current is not None
        and k != current
        and groups[k].word != groups[current].word
        and groups[k].latest.order < groups[current].latest.order
    }
    out: list[Item] = []
    for item in items:
        found = member.get(id(item))
        if found is None or (found not in collapsed and found not in superseded):
            out.append(item)
            continue
        group = groups[found]
        if found in superseded or item is not group.latest:
            continue
        lo, hi = min(group.numbers), max(group.numbers)
        if lo == hi:
            out.append(item)  # the same step twice (a request and the open thread): nothing to collapse
            continue
        text = (
            f"{group.head}{group.word}s {lo}\u2013{hi}; now at {group.word} {group.latest_number}{group.tail}"
        )
        out.append(msgspec.structs.replace(item, section="open", text=_USER + text, rank=R_OPEN, extra=""))
    return out


# Selection under budget.
_INLINE_SECTIONS: Final[frozenset[Section]] = frozenset({"goal", "outcome", "files"})


def select(items: Sequence[Item], budget: int, *, max_lines: int | None = None) -> list[Item]:
    """Pick items under ``budget`` tokens (and ``max_lines``): a quota per tier first, then strict priority."""
    candidates = sorted(items, key=_priority)
    chosen: list[Item] = []
    chosen_ids: set[int] = set()
    sections_used: set[Section] = set()
    used = 0
    lines_used = 0

    def cost(item: Item) -> tuple[int, int]:
        new_section = item.section not in sections_used
        tokens = estimate_tokens(line_of(item)) + 2
        if new_section:
            tokens += estimate_tokens(SECTIONS[item.section][0]) + 2
        if item.section in _INLINE_SECTIONS:
            lines = 1 if (new_section or item.section != "files") else 0
        else:
            lines = 2 if new_section else 1
        return tokens, lines

    def try_take(item: Item) -> None:
        nonlocal used, lines_used
        tokens, lines = cost(item)
        if used + tokens > budget:
            return
        if max_lines is not None and lines_used + lines > max_lines:
            return
        used += tokens
        lines_used += lines
        chosen.append(item)
        chosen_ids.add(id(item))
        sections_used.add(item.section)

    # Every load-bearing tier (rank <= R_FACT) may place this many items before the others are
    # considered in strict order, so one talkative kind cannot starve the rest; noise tiers only
    # ever get what is left.
    per_tier: dict[tuple[int, Section], int] = {}
    for item in candidates:
        key = (item.rank, item.section)
        if item.rank <= R_FACT and per_tier.get(key, 0) < _QUOTA:
            per_tier[key] = per_tier.get(key, 0) + 1
            try_take(item)
    for item in candidates:
        if id(item) not in chosen_ids:
            try_take(item)

    # The running cost is an estimate; the rendered text is what must fit.
    chosen.sort(key=_priority)
    while chosen and (
        estimate_tokens(render_history(chosen)) > budget
        or (max_lines is not None and len(render_history(chosen).splitlines()) > max_lines)
    ):
        chosen.pop()
    if not chosen and candidates:
        chosen = [_shrink_to_fit(candidates[0], budget)]
    return chosen


def _priority(item: Item) -> tuple[int, float, int]:
    """Tier first; within the fact and talk tiers the line with more information per token (#38).

    The load-bearing tiers above (constraints, decisions, errors ...) keep
    their first-seen order: every one of them matters, the oldest states the rule.
    """
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
    seen: set[str] = set()
    unique: list[Item] = []
    for item in sorted(items, key=lambda it: (it.rank, it.order)):
        key = normalize(item.text)
        if key and key not in seen:
            seen.add(key)
            unique.append(item)
    chosen: list[Item] = []
    used = estimate_tokens(render_session(()))
    per_section: dict[str, int] = {}
    rest: list[Item] = []
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
    while chosen and estimate_tokens(render_session(chosen)) > budget:
        chosen.pop()
    return chosen

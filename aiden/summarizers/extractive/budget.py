"""Selection under budget: which kept items fit a request's token budget (and a fold's line cap)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.extractive.items import _QUOTA, _R_FACT, Section, _Item, _line_of
from aiden.summarizers.extractive.render import _SECTION_TITLES
from aiden.summarizers.mustkeep import clip

_INLINE_SECTIONS: Final[frozenset[Section]] = frozenset({"goal", "outcome", "files"})


def _select(
    items: Sequence[_Item],
    budget: int,
    render: Callable[[Sequence[_Item]], str],
    *,
    max_lines: int | None = None,
) -> list[_Item]:
    """Pick items under ``budget`` tokens (and ``max_lines``): a quota per tier first, then strict priority."""
    candidates = sorted(items, key=_priority)
    chosen: list[_Item] = []
    chosen_ids: set[int] = set()
    sections_used: set[Section] = set()
    used = 0
    lines_used = 0

    def cost(item: _Item) -> tuple[int, int]:
        new_section = item.section not in sections_used
        tokens = estimate_tokens(_line_of(item)) + 2
        if new_section:
            tokens += estimate_tokens(_SECTION_TITLES[item.section]) + 2
        if item.section in _INLINE_SECTIONS:
            lines = 1 if (new_section or item.section != "files") else 0
        else:
            lines = 2 if new_section else 1
        return tokens, lines

    def try_take(item: _Item) -> None:
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

    per_tier: dict[tuple[int, Section], int] = {}
    for item in candidates:
        key = (item.rank, item.section)
        if item.rank <= _R_FACT and per_tier.get(key, 0) < _QUOTA:
            per_tier[key] = per_tier.get(key, 0) + 1
            try_take(item)
    for item in candidates:
        if id(item) not in chosen_ids:
            try_take(item)

    # The running cost is an estimate; the rendered text is what must fit.
    chosen.sort(key=_priority)
    while chosen and (
        estimate_tokens(render(chosen)) > budget
        or (max_lines is not None and len(render(chosen).splitlines()) > max_lines)
    ):
        chosen.pop()
    if not chosen and candidates:
        chosen = [_shrink_to_fit(candidates[0], budget, render)]
    return chosen


def _priority(item: _Item) -> tuple[int, float, int]:
    """Tier first; within the fact and talk tiers the line with more information per token (#38).

    The load-bearing tiers above (constraints, decisions, errors ...) keep
    their first-seen order: every one of them matters, the oldest states the rule.
    """
    return item.rank, -item.info if item.rank >= _R_FACT else 0.0, item.order


def _shrink_to_fit(item: _Item, budget: int, render: Callable[[Sequence[_Item]], str]) -> _Item:
    """The most important item alone, clipped until it fits a tiny budget (best effort below ~8 tokens)."""
    limit = len(item.text)
    shrunk = msgspec.structs.replace(item, extra="")
    while limit > 1:
        shrunk = msgspec.structs.replace(item, text=clip(item.text, limit), extra="")
        if estimate_tokens(render([shrunk])) <= budget:
            return shrunk
        limit = min(limit - 1, limit * 2 // 3)
    return msgspec.structs.replace(item, text=clip(item.text, 1), extra="")

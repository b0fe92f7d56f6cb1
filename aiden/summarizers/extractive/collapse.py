"""Repeated near-identical requests collapse to the current state ("steps 1-33 of X; now at step 33", with an en dash).

A long session repeats one request with the next step number ("Continue with
the gateway migration (PROJ-1791), step 12: ..."); listing every step buries
what matters. Seed 001: keep the current state of the plan, drop superseded
versions. Linear in the number of items.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import msgspec

from aiden.policy.summary_md import step_match
from aiden.summarizers.extractive.items import _R_OPEN, _Item
from aiden.summarizers.mustkeep import is_routine_request, normalize

_USER: Final = "User: "


class _Group:
    __slots__ = ("head", "items", "latest", "latest_number", "numbers", "tail", "word")

    def __init__(self, word: str) -> None:
        self.word = word
        self.items: list[_Item] = []
        self.numbers: list[int] = []
        self.head = ""
        self.tail = ""
        self.latest: _Item | None = None
        self.latest_number = 0


def _request_text(item: _Item) -> str | None:
    if item.section == "requests":
        return item.text
    if item.section == "open" and item.text.startswith(_USER):
        return item.text[len(_USER) :]
    return None


def collapse_requests(items: Sequence[_Item]) -> list[_Item]:
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
        group = groups.setdefault(key, _Group(word))
        group.items.append(item)
        member[id(item)] = key
        first = int(match.group("a"))
        last = int(match.group("b") or first)
        group.numbers.extend((first, last))
        if group.latest is None or item.order >= group.latest.order:
            group.latest, group.latest_number = item, last
            group.head, group.tail = match.group("head"), match.group("tail")
    collapsed = {key for key, group in groups.items() if len(group.items) > 1 or len(set(group.numbers)) > 1}
    routine = [key for key, g in groups.items() if is_routine_request(f"{g.head}{g.word} 1{g.tail}")]
    current = max(routine, key=lambda k: _latest_order(groups[k]), default=None)
    superseded = {
        k
        for k in routine
        if current is not None
        and k != current
        and groups[k].word != groups[current].word
        and _latest_order(groups[k]) < _latest_order(groups[current])
    }
    out: list[_Item] = []
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
        out.append(msgspec.structs.replace(item, section="open", text=_USER + text, rank=_R_OPEN, extra=""))
    return out


def _latest_order(group: _Group) -> int:
    return group.latest.order if group.latest is not None else -1

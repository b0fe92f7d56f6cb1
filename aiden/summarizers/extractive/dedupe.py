"""Deduplication of kept items: exact repeats and sentences another kept line already contains."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import msgspec

from aiden.summarizers.extractive.items import _R_REST, Section, _Item, _line_of
from aiden.summarizers.extractive.salience import names_a_date
from aiden.summarizers.extractive.tools import _digitless
from aiden.summarizers.mustkeep import key_tokens, normalize
from aiden.summarizers.mustkeep.phatic import split_speaker

_BARE_NUMBER: Final = re.compile(r"^\d+(?:[.,:]\d+)*$")
_EXACT_ONLY: Final[frozenset[Section]] = frozenset({"files", "commands", "tool_notes"})


class _Deduped(msgspec.Struct, frozen=True):
    """Unique items, plus the items absorbed into a more important one that contains them."""

    kept: list[_Item]
    absorbed: list[tuple[_Item, _Item]]  # (absorbed item, the kept item containing it)


_GRAM: Final = 8


class _Containers:
    """The kept sentence lines, searchable for "which first one contains ``norm``" without a full scan.

    Every container is indexed by its ``_GRAM``-character grams that start
    right after a space. A ``norm`` contained in a container has each of its
    own such grams at a word start of the container too, so only the
    containers posted under the rarest of ``norm``'s grams need the exact
    ``in`` check; scanning them in insertion order keeps the answer that of a
    plain scan (the first container in order). A ``norm`` without such a gram
    (a word or two) falls back to the plain scan.
    """

    __slots__ = ("_grams", "items", "norms")

    def __init__(self) -> None:
        self.norms: list[str] = []
        self.items: list[_Item] = []
        self._grams: dict[str, list[int]] = {}

    def add(self, norm: str, item: _Item) -> None:
        index = len(self.norms)
        self.norms.append(norm)
        self.items.append(item)
        for gram in _word_grams(norm):
            posting = self._grams.setdefault(gram, [])
            if not posting or posting[-1] != index:
                posting.append(index)

    def first_containing(self, norm: str) -> _Item | None:
        best: list[int] | None = None
        for gram in _word_grams(norm):
            posting = self._grams.get(gram)
            if posting is None:
                return None
            if best is None or len(posting) < len(best):
                best = posting
        norms = self.norms
        if best is None:
            return next((self.items[i] for i, n in enumerate(norms) if norm in n), None)
        return next((self.items[i] for i in best if norm in norms[i]), None)


def _first_holding(containers: _Containers, tokens: Sequence[str]) -> _Item | None:
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


def _dedupe(items: Iterable[_Item]) -> _Deduped:
    """Drop repeats, keeping each fact's most important (then earliest) occurrence.

    A sentence item is also absorbed when a kept, more important line
    already contains it verbatim (a constraint quoted in the goal): it is in
    the text either way. A rolling fold re-extracts the sentences of goal and
    open-thread lines it demotes or drops, so absorbed facts survive folds.
    """
    ordered = sorted(items, key=lambda it: (it.rank, it.order))
    kept: list[_Item] = []
    absorbed: list[tuple[_Item, _Item]] = []
    seen: dict[tuple[str, str], _Item] = {}
    containers = _Containers()
    for item in ordered:
        norm = normalize(_line_of(item))
        if not norm:
            continue
        bucket = item.section if item.section in _EXACT_ONLY else "text"
        if item.section == "errors":
            # Log lines repeat with new timestamps and counters; the
            # "(from ...)" context does not make an error a different one.
            bucket, norm = "errors", _digitless(item.text.split(" (from ", 1)[0])
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
                        item = msgspec.structs.replace(item, rank=max(item.rank, _R_REST))
                else:
                    holder = _first_holding(containers, tokens)
                    if holder is not None:
                        absorbed.append((item, holder))
                        continue
            containers.add(norm, item)
        seen[(bucket, norm)] = item
        kept.append(item)
    return _Deduped(kept, absorbed)


def _with_absorbed(chosen: Sequence[_Item], deduped: _Deduped) -> list[_Item]:
    """``chosen`` plus the items absorbed by a chosen item (for the structured view)."""
    chosen_ids = {id(it) for it in chosen}
    extra = [item for item, container in deduped.absorbed if id(container) in chosen_ids]
    return [*chosen, *extra]

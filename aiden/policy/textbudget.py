"""Cut text to a token budget at a sentence or line boundary (pure)."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["cut_to_tokens"]

_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")
_MARK = " [...]"
_WORD = re.compile(r"\S+")


def cut_to_tokens(text: str, budget: int, estimate: Callable[[str], int]) -> str:
    """``text`` if it fits ``budget`` tokens, else its longest prefix ending at a sentence or line end.

    A summary over its budget is cut rather than rejected: the compaction still
    commits, and the cut is marked so a reader knows text was dropped. With no
    boundary inside the budget the cut falls on a word.
    """
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    if estimate(text) <= budget:
        return text
    room = budget - estimate(_MARK)
    ends = [m.start() for m in _BOUNDARY.finditer(text)]
    # Binary search over boundaries: estimate is monotone in the prefix length.
    lo, hi, best = 0, len(ends) - 1, -1
    while lo <= hi:
        mid = (lo + hi) // 2
        if estimate(text[: ends[mid]]) <= room:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if best >= 0 and ends[best] > 0:
        return text[: ends[best]].rstrip() + _MARK
    # The word fallback cuts the original text too, so the result stays a prefix of it
    # (joining split() words would fold a leading or doubled whitespace run away).
    word_ends = [m.end() for m in _WORD.finditer(text)]
    lo, hi, keep = 0, len(word_ends) - 1, -1
    while lo <= hi:
        mid = (lo + hi) // 2
        if estimate(text[: word_ends[mid]]) <= room:
            keep, lo = mid, mid + 1
        else:
            hi = mid - 1
    return (text[: word_ends[keep]] if keep >= 0 else "") + _MARK

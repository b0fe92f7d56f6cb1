"""Cut text to a token budget at a sentence or line boundary (pure)."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["cut_to_tokens"]

_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")
_MARK = " [...]"


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
    words = text.split()
    lo, hi, keep = 0, len(words), 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if estimate(" ".join(words[:mid])) <= room:
            keep, lo = mid, mid + 1
        else:
            hi = mid - 1
    return " ".join(words[:keep]) + _MARK

"""Cut-point search: the candidate cuts of one planning pass over the hot window.

Rules 2-5 and 7 of :func:`~aiden.policy.cutpoints.plan_compaction` (see its
module docstring): :class:`PlanningWindow` holds the per-event arrays of one
pass (legality, leading context, root input and sticky pins, token prefix
sums) and answers the questions the paths ask; :func:`token_cut`,
:func:`count_cut` and :func:`progress_cut` are the three paths. A cut is a
pair ``(cut, effective)``: the legal cut and the same cut pulled back over
the leading context right before it. Everything is O(len(events)).
"""

from __future__ import annotations

from collections.abc import Sequence

from aiden.events import SessionEvent
from aiden.policy.boundaries import call_of_results, classify, is_leading_context, legal_mask

__all__ = [
    "PlanningWindow",
    "backlog_cut",
    "count_cut",
    "progress_cut",
    "token_cut",
]


class PlanningWindow:
    """Per-event arrays of one planning pass (all linear to build)."""

    def __init__(self, events: Sequence[SessionEvent], tokens: Sequence[int], max_pins: int) -> None:
        n = len(events)
        self.events = events
        self.n = n
        call_of = call_of_results(events)
        self.legal = legal_mask(events, call_of)
        self.context = [is_leading_context(e) for e in events]
        self.root = next((i for i, e in enumerate(events) if classify(e) == "boundary"), -1)
        # Sticky pins keep their whole call/results group together, so a
        # pinned call never leaves its result behind (or the reverse).
        group = [call if call >= 0 else i for i, call in enumerate(call_of)]
        pinned_groups: set[int] = set()
        honoured = 0
        for i in range(n - 1, -1, -1):
            if honoured >= max_pins:
                break
            if events[i].pinned is not None:
                pinned_groups.add(group[i])
                honoured += 1
        self.kept_mask = [group[i] in pinned_groups or i == self.root for i in range(n)]
        # prefix[i]: tokens of events[:i]; kept_prefix[i]: of the kept ones;
        # free[i]: how many of events[:i] are compactable (not kept).
        self.prefix = [0] * (n + 1)
        self.kept_prefix = [0] * (n + 1)
        self.free = [0] * (n + 1)
        for i in range(n):
            kept = self.kept_mask[i]
            self.prefix[i + 1] = self.prefix[i] + tokens[i]
            self.kept_prefix[i + 1] = self.kept_prefix[i] + (tokens[i] if kept else 0)
            self.free[i + 1] = self.free[i] + (0 if kept else 1)
        self.total = self.prefix[n]

    def pull_back(self, cut: int) -> int:
        """``cut`` moved back over the leading context events right before it."""
        while cut > 0 and self.context[cut - 1]:
            cut -= 1
        return cut

    def useful(self, cut: int) -> bool:
        """Whether a (pulled-back) cut leaves at least one event to compact."""
        return self.free[cut] > 0

    def compacted_tokens(self, cut: int) -> int:
        """Tokens a (pulled-back) cut compacts: the events before it that are not kept."""
        return self.prefix[cut] - self.kept_prefix[cut]

    def kept_tokens(self, cut: int) -> int:
        """Tokens of the hot window a (pulled-back) cut leaves: kept events + the suffix."""
        return self.kept_prefix[cut] + self.total - self.prefix[cut]

    def first_useful_from(self, index: int) -> tuple[int, int] | None:
        """The first legal cut at or after ``index`` that is useful: (cut, pulled-back cut)."""
        for cut in range(max(index, 1), self.n):
            if self.legal[cut]:
                effective = self.pull_back(cut)
                if self.useful(effective):
                    return cut, effective
        return None

    def last_legal_at_or_before(self, index: int) -> int | None:
        """The last legal cut at or before ``index``; None when there is none."""
        for cut in range(min(index, self.n - 1), 0, -1):
            if self.legal[cut]:
                return cut
        return None


def token_cut(
    window: PlanningWindow, keep_recent_tokens: int, tokens: Sequence[int]
) -> tuple[int, int] | None:
    """The token path: the first useful cut at or after the point keeping ``keep_recent_tokens``.

    None when everything fits in ``keep_recent_tokens`` or no useful cut follows.
    """
    if window.total <= keep_recent_tokens:
        return None
    accumulated = 0
    index = window.n - 1
    while index > 0:
        accumulated += tokens[index]
        if accumulated >= keep_recent_tokens:
            break
        index -= 1
    return window.first_useful_from(index)


def count_cut(window: PlanningWindow, hot_window_events: int) -> tuple[int, int] | None:
    """The count path: snap to the last legal cut keeping ``hot_window_events``, then to a useful one.

    None when the window holds no more than ``hot_window_events`` events or no cut qualifies.
    """
    target = window.n - hot_window_events
    if target < 1:
        return None
    cut = window.last_legal_at_or_before(target)
    if cut is None:
        return None
    return window.first_useful_from(cut)


def progress_cut(
    window: PlanningWindow, start: tuple[int, int] | None, target_tokens: int
) -> tuple[tuple[int, int], bool]:
    """The least aggressive useful cut from ``start`` on whose hot window is below target.

    Falls back to the most aggressive useful cut (the smallest reachable hot
    window) with ``False`` when no cut gets under the target.
    """
    first = start[0] if start is not None else 1
    latest: tuple[int, int] | None = start
    for cut in range(first, window.n):
        if not window.legal[cut]:
            continue
        effective = window.pull_back(cut)
        if not window.useful(effective):
            continue
        if window.kept_tokens(effective) < target_tokens:
            return (cut, effective), True
        latest = (cut, effective)
    assert latest is not None  # the caller checked that a useful cut exists
    return latest, False


def backlog_cut(window: PlanningWindow, max_events: int, max_tokens: int) -> tuple[int, int] | None:
    """Rule 8: the last useful legal cut compacting at most ``max_events`` events and ``max_tokens``
    tokens; None when there is none.

    ``free`` and the compacted tokens are non-decreasing, so the cuts at or before the first index
    past either cap are exactly the ones within both.
    """
    limit = next(
        (i for i in range(window.n + 1) if window.free[i] > max_events or window.compacted_tokens(i) > max_tokens),
        window.n,
    )
    cut = window.last_legal_at_or_before(limit - 1)
    if cut is None:
        return None
    # Pulling back only shrinks what is compacted; an earlier cut would compact even less.
    effective = window.pull_back(cut)
    return (cut, effective) if window.useful(effective) else None

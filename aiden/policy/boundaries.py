"""Turn boundaries and legal cut points: which events may open the hot window.

Rule 1 of :func:`~aiden.policy.cutpoints.plan_compaction`. Every event has a
cut class (:func:`classify`): a ``boundary`` (user input) opens a turn, a
``split_allowed`` event may open the hot window inside a turn, a
``forbidden`` one must stay with what precedes it. A cut is legal on a
non-forbidden event that does not separate a ``tool_call`` from a
``tool_result`` answering it (matched by ``tool_call_id``, else the nearest
preceding call), also when the result arrives later with other events in
between (parallel calls). Everything is O(len(events)).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from aiden.events import EVENT_TYPES, SessionEvent

__all__ = [
    "CutClass",
    "call_of_results",
    "classify",
    "is_leading_context",
    "legal_cut_points",
    "legal_mask",
]

CutClass = Literal["boundary", "split_allowed", "forbidden"]

_TYPE_CLASS: Final[dict[str, CutClass]] = {
    "user_input": "boundary",
    "assistant_output": "split_allowed",
    "role_output": "split_allowed",
    "tool_call": "split_allowed",
    "tool_result": "forbidden",
    "system_event": "forbidden",
    "screen_context": "forbidden",
}
_ROLE_CLASS: Final[dict[str, CutClass]] = {
    "user": "boundary",
    "assistant": "split_allowed",
    "tool": "forbidden",
    "system": "forbidden",
}
_CONTEXT_TYPES: Final = frozenset({"system_event", "screen_context"})


def classify(event: SessionEvent) -> CutClass:
    """The cut class of ``event``: by ``type``, falling back to ``role`` for an unknown type.

    ``boundary`` (user input) opens a new turn; ``split_allowed`` (assistant,
    role output, tool call) may open the hot window inside a turn;
    ``forbidden`` (tool result, system event, screen context) must stay
    attached to what precedes it. aiden's own ``synthetic`` events count as
    system events. An unknown type with an unknown role is ``forbidden``.
    """
    if event.synthetic:
        return "forbidden"
    by_type = _TYPE_CLASS.get(event.type)
    if by_type is not None:
        return by_type
    return _ROLE_CLASS.get(event.role or "", "forbidden")


def is_leading_context(event: SessionEvent) -> bool:
    """True for ambient context pulled into the hot window ahead of a cut.

    ``system_event``, ``screen_context`` and ``synthetic`` events, and events
    of an unknown type whose role is ``system``.
    """
    if event.synthetic or event.type in _CONTEXT_TYPES:
        return True
    return event.type not in EVENT_TYPES and event.role == "system"


def _is_tool_call(event: SessionEvent) -> bool:
    return event.type == "tool_call" and not event.synthetic


def _is_tool_result(event: SessionEvent) -> bool:
    if event.synthetic:
        return False
    return event.type == "tool_result" or (event.type not in EVENT_TYPES and event.role == "tool")


def call_of_results(events: Sequence[SessionEvent]) -> list[int]:
    """For each tool result, the index of the call it answers; -1 for none and for other events."""
    call_of = [-1] * len(events)
    by_id: dict[str, int] = {}
    last_call = -1
    for i, event in enumerate(events):
        if _is_tool_call(event):
            last_call = i
            if event.tool_call_id is not None:
                by_id[event.tool_call_id] = i
        elif _is_tool_result(event):
            call = by_id.get(event.tool_call_id, -1) if event.tool_call_id is not None else -1
            # No (known) id: the nearest preceding call, which is what an
            # adjacent call/result pair without ids means.
            call_of[i] = call if call >= 0 else last_call
    return call_of


def legal_mask(events: Sequence[SessionEvent], call_of: Sequence[int]) -> list[bool]:
    """Per index ``c``: whether the hot window may start at ``events[c]``.

    ``call_of`` is :func:`call_of_results` of ``events``. Index 0 is never
    legal (a cut there compacts nothing).
    """
    n = len(events)
    # A cut c keeps events[c:]: it separates call q from its result r when
    # q < c <= r. Mark those ranges with a difference array (linear time).
    inside = [0] * (n + 1)
    for result, call in enumerate(call_of):
        if 0 <= call < result:
            inside[call + 1] += 1
            inside[result + 1] -= 1
    legal = [False] * n
    depth = 0
    for c in range(n):
        depth += inside[c]
        legal[c] = c > 0 and depth == 0 and classify(events[c]) != "forbidden"
    return legal


def legal_cut_points(events: Sequence[SessionEvent]) -> list[int]:
    """Indices ``c`` (``0 < c < len(events)``) where the hot window may start.

    Before the leading-context pull-back of :func:`~aiden.policy.cutpoints.plan_compaction`.
    """
    legal = legal_mask(events, call_of_results(events))
    return [c for c, ok in enumerate(legal) if ok]

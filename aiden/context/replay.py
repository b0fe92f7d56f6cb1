"""Session replay trimming (pure): how many hot-window events one model call replays.

:func:`trim_replay` bounds the replayed events of one call, on a *copy* of the
hot window right before :func:`aiden.context.prompt.build_messages`; nothing
it does is persisted. The cut is made only where the hot window may legally
open (:func:`aiden.policy.cutpoints.legal_cut_points`: never on a tool result,
never between a call and its result) and always keeps the root user input,
the current turn's user input and the events ``keep`` selects (sticky pins),
with their call/result groups.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aiden.context.turns import is_pinned, is_turn_start
from aiden.events import SessionEvent
from aiden.policy.cutpoints import call_of_results, legal_cut_points

__all__ = ["trim_replay"]


def trim_replay(
    events: Sequence[SessionEvent],
    *,
    max_messages: int,
    keep: Callable[[SessionEvent], bool] = is_pinned,
    cut_quantum: int | None = None,
) -> list[SessionEvent]:
    """At most ``max_messages`` of the hot-window ``events`` for one call when a legal cut allows it.

    ``0`` means no bound. Otherwise the replayed list is the *kept* events
    before the cut followed by every event from the cut on, in input order.
    Kept are: the root user input (the first one), the current turn's user
    input (the last one), and every event ``keep`` selects, each with its
    whole call/results group. The cut is the least aggressive legal cut point
    (:func:`~aiden.policy.cutpoints.legal_cut_points`: never on a tool
    result, system event or screen context, never between a tool call and its
    result) that meets the bound, moved on in jumps (below); when none meets
    it, the most aggressive legal cut. Without any legal cut the events are
    returned unchanged.

    Prompt cache: a cut that moved with every new event would change the
    replayed prefix on every call. The cut therefore moves in jumps: the
    least aggressive cut meeting the bound is rounded up to the first legal
    cut at or after the next multiple of ``cut_quantum`` events (default
    ``max_messages // 4``; ``1`` disables it), so the replayed list holds
    between about ``max_messages - cut_quantum`` and ``max_messages`` events
    and its start stays put for ``cut_quantum`` appended events.

    The bound counts events; a tool call merges into the assistant message
    before it, so the chat message count is at most this.
    """
    if max_messages < 0:
        raise ValueError(f"max_messages must be >= 0, got {max_messages}")
    if cut_quantum is not None and cut_quantum < 1:
        raise ValueError(f"cut_quantum must be >= 1, got {cut_quantum}")
    n = len(events)
    if max_messages == 0 or n <= max_messages:
        return list(events)
    call_of = call_of_results(events)
    group = [call if call >= 0 else i for i, call in enumerate(call_of)]
    starts = [i for i, e in enumerate(events) if is_turn_start(e)]
    always = {starts[0], starts[-1]} if starts else set()
    kept_groups = {group[i] for i in range(n) if i in always or keep(events[i])}
    kept = [group[i] in kept_groups for i in range(n)]
    cuts = legal_cut_points(events)
    if not cuts:
        return list(events)
    kept_before = [0] * (n + 1)
    for i in range(n):
        kept_before[i + 1] = kept_before[i] + kept[i]
    # The replayed count kept_before[c] + (n - c) never grows with c.
    chosen = next((c for c in cuts if kept_before[c] + n - c <= max_messages), None)
    if chosen is None:
        chosen = cuts[-1]
    else:
        quantum = cut_quantum if cut_quantum is not None else max(1, max_messages // 4)
        aligned = -(-chosen // quantum) * quantum
        chosen = next((c for c in cuts if c >= aligned), chosen)
    return [e for i, e in enumerate(events) if i >= chosen or kept[i]]

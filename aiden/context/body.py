"""The hot window's part of the prompt, rendered once per settled turn (#35).

A prompt is built before every model call, and its hot window only grows at
its end between compactions. Governance and rendering of an event depend on
what follows it only while its turn is young: once a turn is older than the
``keep_turns`` newest, its tool results the agent acted on are stubbed for
good, and once every call before a point has its result, the messages before
that point never change. :class:`IncrementalBody` keeps the messages of that
*settled* prefix and renders only the rest on each call, so a call costs what
changed since the last one, not the window's length.

The result is exactly what governing and rendering the whole window gives
(:func:`~aiden.context.governance.govern_events`, then
:func:`~aiden.context.prompt.events_to_messages`): whenever continuing from the
settled prefix could differ (the window no longer starts with it, a retraction
or a tool result reaches back into it, other governance parameters or split-turn
context), the whole window is rendered again and a new prefix settles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from aiden.context.governance import govern_events
from aiden.context.prompt import Message, RenderedBody, Renderer, estimate_messages
from aiden.context.turns import is_step, is_turn_start
from aiden.events import SessionEvent, retracted_seqs
from aiden.policy.tokens import estimate_tokens

__all__ = ["Governance", "IncrementalBody"]

Estimate = Callable[[str], int]


class Governance(msgspec.Struct, frozen=True, kw_only=True):
    """The parameters of :func:`~aiden.context.governance.govern_events` for one call."""

    keep_turns: int
    max_tool_tokens: int
    keep_steps: int = 0
    oversized_tokens: int | None = None


class _Settled(msgspec.Struct, frozen=True):
    key: tuple[Governance | None, str, int | None]
    count: int
    """Events of the window the prefix covers."""
    first: tuple[int, float | None]
    last: tuple[int, float | None]
    messages: tuple[Message, ...]
    tokens: int
    stubbed: tuple[int, ...]
    renderer: Renderer

    def holds(self, hot: Sequence[SessionEvent]) -> bool:
        if len(hot) < self.count:
            return False
        head, tail = hot[0], hot[self.count - 1]
        return (head.seq, head.timestamp) == self.first and (tail.seq, tail.timestamp) == self.last


def _mark(event: SessionEvent) -> tuple[int, float | None]:
    return event.seq, event.timestamp


class IncrementalBody:
    """Renders the hot window for each call, reusing the settled prefix of the last one.

    One instance per session's prompt builder; not shared between tasks that
    build concurrently without the builder's own ordering (each call reads and
    replaces the prefix whole, so a race only costs a full render).
    """

    def __init__(self, estimate: Estimate = estimate_tokens) -> None:
        self._estimate = estimate
        self._settled: _Settled | None = None

    def render(
        self,
        hot: Sequence[SessionEvent],
        governance: Governance | None,
        *,
        split_turn_context: str = "",
        split_before_seq: int | None = None,
    ) -> RenderedBody:
        """``hot`` governed (when ``governance`` is given) and rendered as chat messages."""
        key = (governance, split_turn_context, split_before_seq)
        settled = self._settled
        if settled is not None and (settled.key != key or not settled.holds(hot)):
            settled = None
        body = self._continue(settled, hot, key) if settled is not None else None
        if body is None:
            body = self._continue(None, hot, key)
            assert body is not None  # from the window's start nothing can reach back
        return body

    def _continue(
        self, settled: _Settled | None, hot: Sequence[SessionEvent], key: tuple[Governance | None, str, int | None]
    ) -> RenderedBody | None:
        """The body continuing from ``settled`` (None: from the window's start); None if it cannot."""
        governance, split_ctx, split_before = key
        done = settled.count if settled is not None else 0
        rest = list(hot[done:])
        if settled is not None and not _stays_after(rest):
            return None
        stubbed: tuple[int, ...] = ()
        events = rest
        if governance is not None:
            governed = govern_events(
                rest,
                keep_turns=governance.keep_turns,
                max_tool_tokens=governance.max_tool_tokens,
                keep_steps=governance.keep_steps,
                estimate=self._estimate,
                oversized_tokens=governance.oversized_tokens,
            )
            events, stubbed = list(governed.events), governed.stubbed_seqs
        renderer = settled.renderer.copy() if settled is not None else Renderer(split_ctx, split_before)
        cut = _settle_point(rest, governance)
        head: list[Message] = []
        if cut:
            renderer.retracted |= retracted_seqs(rest)  # a later retraction hides an event before the point
            head = Renderer.merged(renderer.feed(events[:cut]))
            if renderer.settled and rest[cut].seq not in renderer.retracted:
                prefix_renderer = renderer.copy()
                tail_renderer = prefix_renderer.copy()
            else:  # a call before the point waits for its result: nothing more settles now
                cut, head = 0, []
                renderer = settled.renderer.copy() if settled is not None else Renderer(split_ctx, split_before)
                tail_renderer = renderer
        else:
            tail_renderer = renderer
        tail = tail_renderer.finish(tail_renderer.feed(events[cut:]))
        before = settled.messages if settled is not None else ()
        before_tokens = settled.tokens if settled is not None else 0
        before_stubbed = settled.stubbed if settled is not None else ()
        head_tokens = estimate_messages(head, self._estimate)
        if cut:
            head_seqs = {e.seq for e in rest[:cut]}
            self._settled = _Settled(
                key,
                done + cut,
                _mark(hot[0]),
                _mark(rest[cut - 1]),
                before + tuple(head),
                before_tokens + head_tokens,
                before_stubbed + tuple(q for q in stubbed if q in head_seqs),
                prefix_renderer,
            )
        else:
            self._settled = settled
        # Copies: a caller may change the messages it sends; the kept prefix must not change with them.
        messages = [dict(m) for m in before]
        messages.extend(dict(m) for m in head)
        messages.extend(tail)
        return RenderedBody(
            messages=messages,
            tokens=before_tokens + head_tokens + estimate_messages(tail, self._estimate),
            stubbed_seqs=before_stubbed + stubbed,
            repairs=tail_renderer.repairs,
        )


def _stays_after(rest: Sequence[SessionEvent]) -> bool:
    """False when an event of ``rest`` reaches back before it: a retraction of an earlier event
    (or of ``rest``'s first), or a tool result whose call is not in ``rest`` before it (governance
    and rendering would pair it with an earlier call)."""
    if not rest:
        return True
    if any(q <= rest[0].seq for q in retracted_seqs(rest)):
        return False
    called: set[str | None] = set()
    for event in rest:
        if event.type == "tool_call" and not event.synthetic:
            called.add(event.tool_call_id)
            called.add(None)  # an id-less result answers the nearest call before it
        elif (event.type == "tool_result" or event.role == "tool") and event.tool_call_id not in called:
            return False
    return True


def _settle_point(rest: Sequence[SessionEvent], governance: Governance | None) -> int:
    """Index in ``rest`` before which governance and rendering are final (0: none).

    A turn start, so governing the rest alone numbers its turns as the whole
    window does. With governance, the events before it must be in turns older
    than the ``keep_turns`` newest (their results are stubbed for good) and be
    followed by a model step (acted on).
    """
    starts = [i for i, e in enumerate(rest) if is_turn_start(e)]
    if not starts:
        return 0
    if governance is None:
        return starts[-1]
    turns = len(starts)
    j = min(turns - governance.keep_turns, turns - 1)
    if j < 0:
        return 0
    cut = starts[j]
    last_step = max((i for i, e in enumerate(rest) if is_step(e)), default=-1)
    return cut if last_step >= cut - 1 else 0

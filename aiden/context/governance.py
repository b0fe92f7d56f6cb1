"""Runner context governance (pure): which tool results one model call replays as stubs.

:func:`govern_events` works on a *copy* of the hot window right before
:func:`aiden.context.prompt.build_messages` and nothing it does is persisted.
It replaces the content of tool results the agent has already acted on by a
short stub (:func:`aiden.context.stubs.render_stub`: tool name and arguments,
original size, head/tail excerpt, and the ``seq`` under which the verbatim
output stays stored). Seed 001: raw tool output is "almost always compactable"
once acted on, and compacting it *before* the action that consumes it is a
pitfall, so results not yet acted on are never stubbed.

Which results are stubbed. Turns start at (non-synthetic) user inputs; the
*current turn* runs from the last user input to the end (the whole list when
there is none). A tool result is *protected* when it is in the current turn,
has not been acted on yet (no assistant output or tool call follows it), is
pinned (or answers a pinned call), or has no stored ``seq`` (``seq <= 0``).
An unprotected result is stubbed when it is *old* (its turn is not one of the
newest ``keep_turns``) or *large* (more than ``max_tool_tokens`` tokens), and
only when the stub saves at least ``min_savings_tokens``: a stub never makes
the prompt bigger and tiny results are not churned for a few tokens.

Agent loops (step mode). A coding agent often works one user input through
dozens of model calls; that whole loop is one turn, so the rule above never
trims it. With ``keep_steps > 0`` the current turn is governed by *steps*
instead: a step is one model response (a run of assistant outputs and tool
calls) plus the results that follow it. Results of the newest steps of the
current turn stay whole; older ones there count as old. The protected horizon
moves in jumps of ``keep_steps`` steps (between ``keep_steps`` and
``2 * keep_steps - 1`` newest steps stay whole), so the governed prompt is
append-only between jumps and the provider's prefix cache keeps hitting
(seed 001, "Interaction with Prompt Cache": change the prefix at predictable
boundaries, not on every call). ``keep_steps=0`` leaves the current turn whole.

Prompt-cache behaviour in turn mode. Stubs depend only on the stubbed event
and its call, so once a result is stubbed it renders identically on every later
call. Within a turn the governed prompt only grows at its end (from the turn's
first model step on); the prefix changes once per new user input, at the
oldest result that became old. Under a prefix cache every change re-bills the
prompt after it, so stubbing deep in the prompt costs more than stubbing near
its end: ``benchmarks/bench_governance.py`` reports both effects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from aiden.context.stubs import DEFAULT_HEAD_CHARS, DEFAULT_TAIL_CHARS, render_stub, stub_seq
from aiden.context.turns import is_step, is_tool_result, is_turn_start
from aiden.events import SessionEvent
from aiden.policy.cutpoints import call_of_results
from aiden.policy.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_tokens

__all__ = ["DEFAULT_MIN_SAVINGS_TOKENS", "GovernedEvents", "govern_events"]

Estimate = Callable[[str], int]

DEFAULT_MIN_SAVINGS_TOKENS: Final = 64
"""A result is only stubbed when the stub is at least this many estimated tokens smaller."""


class GovernedEvents(msgspec.Struct, frozen=True, kw_only=True):
    """The result of :func:`govern_events`: the events to render and what changed.

    ``events`` has the input's length and order; a stubbed event differs from
    its input only in ``content``. Token counts are estimates of the events
    (content, tool arguments and name, per-message framing).
    """

    events: tuple[SessionEvent, ...]
    stubbed_seqs: tuple[int, ...]
    """Seqs of the tool results whose content was replaced by a stub, in input order."""
    tokens_before: int
    tokens_after: int

    @property
    def saved_tokens(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after


def _event_cost(event: SessionEvent, content_tokens: int, estimate: Estimate) -> int:
    cost = MESSAGE_OVERHEAD_TOKENS + content_tokens
    if event.tool_args:
        cost += estimate(event.tool_args)
    if event.tool_name:
        cost += estimate(event.tool_name)
    return cost


def _protected_from(events: Sequence[SessionEvent], current: int, keep_steps: int) -> int:
    """Index from which the current turn (starting at ``current``) is kept whole."""
    if keep_steps <= 0:
        return current
    starts = [
        i
        for i in range(current, len(events))
        if is_step(events[i]) and (i == current or not is_step(events[i - 1]))
    ]
    # Quantized horizon: it advances by keep_steps steps at a time.
    first_kept = max(0, (len(starts) - keep_steps) // keep_steps * keep_steps)
    return current if first_kept == 0 else starts[first_kept]


def govern_events(
    events: Sequence[SessionEvent],
    *,
    keep_turns: int,
    max_tool_tokens: int,
    keep_steps: int = 0,
    estimate: Estimate = estimate_tokens,
    head_chars: int = DEFAULT_HEAD_CHARS,
    tail_chars: int = DEFAULT_TAIL_CHARS,
    min_savings_tokens: int = DEFAULT_MIN_SAVINGS_TOKENS,
    oversized_tokens: int | None = None,
) -> GovernedEvents:
    """Copies of the hot-window ``events`` with acted-on tool results stubbed for this call only.

    See the module docstring for the rules. ``keep_turns``: tool results of
    the newest N turns (the current one included) are only stubbed when
    larger than ``max_tool_tokens``; ``keep_steps > 0`` governs the current
    turn by model steps (agent loops). Pairing of calls and results is
    unchanged: only ``content`` of ``tool_result`` events is replaced, so
    :func:`aiden.context.prompt.build_messages` renders the same message structure.
    ``oversized_tokens``: a result larger than this is stubbed even when it is
    protected (current turn, not yet acted on): one result bigger than its
    share of the window would otherwise overflow every later prompt.
    """
    if keep_turns < 0:
        raise ValueError(f"keep_turns must be >= 0, got {keep_turns}")
    if max_tool_tokens < 1:
        raise ValueError(f"max_tool_tokens must be >= 1, got {max_tool_tokens}")
    if keep_steps < 0:
        raise ValueError(f"keep_steps must be >= 0, got {keep_steps}")
    n = len(events)
    turn_of = [0] * n
    turns = 0
    last_step = -1
    for i, event in enumerate(events):
        if is_turn_start(event):
            turns += 1
        turn_of[i] = turns - 1
        if is_step(event):
            last_step = i
    current_turn = turns - 1
    current_start = next((i for i in range(n - 1, -1, -1) if is_turn_start(events[i])), 0)
    protected_from = _protected_from(events, current_start, keep_steps)
    call_of = call_of_results(events)

    out = list(events)
    stubbed: list[int] = []
    tokens_before = 0
    saved = 0
    for i, event in enumerate(events):
        content_tokens = estimate(event.content) if event.content else 0
        tokens_before += _event_cost(event, content_tokens, estimate)
        oversized = oversized_tokens is not None and content_tokens > oversized_tokens
        if not is_tool_result(event) or event.seq <= 0:
            continue
        if not oversized and (i >= protected_from or i > last_step):
            continue
        if stub_seq(event.content) == event.seq:
            continue  # already a stub (governing twice changes nothing)
        call = events[call_of[i]] if call_of[i] >= 0 else None
        if event.pinned is not None or (call is not None and call.pinned is not None):
            continue
        in_current = i >= current_start and turn_of[i] == current_turn
        old = in_current or turn_of[i] <= current_turn - keep_turns
        if not (oversized or old or content_tokens > max_tool_tokens):
            continue
        stub = render_stub(event, call, tokens=content_tokens, head_chars=head_chars, tail_chars=tail_chars)
        gain = content_tokens - estimate(stub)
        if gain < max(1, min_savings_tokens):
            continue
        out[i] = msgspec.structs.replace(event, content=stub)
        stubbed.append(event.seq)
        saved += gain
    return GovernedEvents(
        events=tuple(out),
        stubbed_seqs=tuple(stubbed),
        tokens_before=tokens_before,
        tokens_after=tokens_before - saved,
    )

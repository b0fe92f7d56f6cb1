"""The event structure the per-call rules read: turn starts, model steps, tool results and pins.

Synthetic events (recorded by aiden itself, not by the agent) never open a
turn, form a step or count as a tool result, so repairs aiden made cannot move
where :mod:`aiden.context.governance` or :mod:`aiden.context.replay` cut.
"""

from __future__ import annotations

from typing import Final

from aiden.events import SessionEvent

__all__ = ["is_pinned", "is_step", "is_tool_result", "is_turn_start"]

_STEP_TYPES: Final = frozenset({"assistant_output", "role_output", "tool_call"})


def is_pinned(event: SessionEvent) -> bool:
    """True for a sticky-pinned event (seed 001); the default ``keep`` of :func:`~aiden.context.replay.trim_replay`."""
    return event.pinned is not None


def is_tool_result(event: SessionEvent) -> bool:
    """True for a tool result the agent recorded."""
    return event.type == "tool_result" and not event.synthetic


def is_step(event: SessionEvent) -> bool:
    """True for part of a model response: an assistant or role output, or a tool call."""
    return event.type in _STEP_TYPES and not event.synthetic


def is_turn_start(event: SessionEvent) -> bool:
    """True for a user input, which opens a turn."""
    return event.type == "user_input" and not event.synthetic

"""When to compact: the seed 000 trigger plus the seed 001 triggers.

:func:`should_compress` is the decision the maintenance scheduler asks after
each run commit. It follows seed 000 exactly for the two base paths:

* with prompt-token data and a known context window it fires when
  ``prompt_tokens >= window - reserve`` (the reserve clamped to at most half
  the window) or when ``prompt_tokens / window`` reaches
  ``compress_at_percent``; the prompt size is the *largest* single prompt of
  the latest run, so a small follow-up call cannot hide a large main prompt;
* without a provider's prompt size (no usage metadata, after a compaction, at
  open) aiden's own estimate stands in for it (#35): the calibrated estimate of
  the latest run's largest built prompt, else of the hot window; only when
  nothing can be estimated does it fire when the hot window holds more than
  :meth:`~aiden.config.Config.count_limit` events. A
  ``count_compress_after_events`` set explicitly keeps the count path for every
  prompt without a provider's size.

On top come the seed 001 triggers, each disabled by a 0 config value: every
N completed turns (predictable, prompt-cache friendly boundaries), a tool
output spike in the last turn, a cost ceiling since the last compaction, and
a manual request, which always fires. Reasons are checked in this order:
manual, the seed 000 path, then the seed 001 triggers.
"""

from __future__ import annotations

import math
from typing import Literal

import msgspec

from aiden.config import Config

__all__ = [
    "TriggerDecision",
    "TriggerInput",
    "TriggerReason",
    "should_compress",
    "trigger_threshold_tokens",
]

TriggerReason = Literal[
    "manual",
    "reserve",
    "percent",
    "event_count",
    "every_n_turns",
    "tool_output_spike",
    "cost_ceiling",
    "none",
]


class TriggerInput(msgspec.Struct, frozen=True, kw_only=True):
    """What the scheduler knows when it asks whether to compact."""

    prompt_tokens: int | None = None
    """Largest single prompt of the latest run (provider-reported); None without usage data."""
    estimated_prompt_tokens: int | None = None
    """aiden's own calibrated estimate of that prompt (or of the hot window); None when unknown."""
    context_window: int | None = None
    """Window of the active model; None when unknown."""
    event_count: int = 0
    """Events in the hot window."""
    turns_since_compaction: int = 0
    """Completed turns since the last compaction."""
    last_turn_tool_tokens: int = 0
    """Tokens of tool output the last turn added."""
    cost_since_compaction_usd: float = 0.0
    """Provider cost since the last compaction."""
    manual: bool = False
    """A user or operator asked for a compaction."""


class TriggerDecision(msgspec.Struct, frozen=True, kw_only=True):
    """The answer of :func:`should_compress`."""

    fire: bool
    reason: TriggerReason
    """The first trigger that fired, ``"none"`` when ``fire`` is False."""
    target_tokens: int | None = None
    """With token data: the prompt size the token path fires at; pass it to ``plan_compaction``."""


def trigger_threshold_tokens(context_window: int, config: Config) -> int:
    """The smallest prompt size at which the token path of :func:`should_compress` fires.

    ``min(window - reserve, first size reaching compress_at_percent)``, with
    the reserve clamped to half the window. A plan whose hot window stays at
    or above this would fire the trigger again on the next turn.
    """
    if context_window <= 0:
        raise ValueError(f"context_window must be positive, got {context_window}")
    reserve = config.reserve(context_window)
    # The first size passing exactly the float test of should_compress: start
    # just below the exact value and step up (one or two steps).
    percent = max(0, math.floor(context_window * config.compress_at_percent / 100) - 1)
    while percent / context_window * 100 < config.compress_at_percent:
        percent += 1
    return min(context_window - reserve, percent)


def should_compress(inp: TriggerInput, config: Config) -> TriggerDecision:
    """Decide whether to compact now, and why (see the module docstring for the rules)."""
    window = inp.context_window
    if window is not None and window <= 0:
        window = None  # a bogus window is an unknown window
    prompt = inp.prompt_tokens
    if prompt is None and config.count_compress_after_events is None:
        prompt = inp.estimated_prompt_tokens
    target = None
    if prompt is not None and window is not None:
        target = trigger_threshold_tokens(window, config)
    if inp.manual:
        return TriggerDecision(fire=True, reason="manual", target_tokens=target)
    if prompt is not None and window is not None:
        reserve = config.reserve(window)
        if prompt >= window - reserve:
            return TriggerDecision(fire=True, reason="reserve", target_tokens=target)
        if prompt / window * 100 >= config.compress_at_percent:
            return TriggerDecision(fire=True, reason="percent", target_tokens=target)
    elif inp.event_count > config.count_limit():
        return TriggerDecision(fire=True, reason="event_count")
    if config.compact_every_turns and inp.turns_since_compaction >= config.compact_every_turns:
        return TriggerDecision(fire=True, reason="every_n_turns", target_tokens=target)
    if (
        config.tool_output_spike_tokens
        and inp.last_turn_tool_tokens > config.tool_output_spike_tokens
    ):
        return TriggerDecision(fire=True, reason="tool_output_spike", target_tokens=target)
    if config.cost_ceiling_usd and inp.cost_since_compaction_usd >= config.cost_ceiling_usd:
        return TriggerDecision(fire=True, reason="cost_ceiling", target_tokens=target)
    return TriggerDecision(fire=False, reason="none", target_tokens=target)


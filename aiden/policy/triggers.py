"""When to compact, the scheduler's trigger state, and when a turn starts a new session.

:func:`should_compress` checks, in order: a manual request; the token path (the *largest* prompt of
the latest run, so a small follow-up call cannot hide a large one, against ``window - reserve`` and
``compress_at_percent``), where aiden's calibrated estimate stands in for a missing provider
figure and the event count decides only when nothing can be estimated; then every N turns, a tool
output spike and a cost ceiling (each disabled by 0). The scheduler actor keeps one immutable
:class:`TriggerState` that :func:`reduce` advances by :data:`TriggerEvent`; what it asks before a
pass is a pure function of that state. :func:`decide_boundary` decides whether a new user turn
starts a new session, from the idle gap (time comes in as an argument).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, Literal, assert_never

import msgspec

from aiden.config import MAX_CONTEXT_WINDOW, Config
from aiden.policy.tokens import TokenCalibration, apply_calibration, calibrate

__all__ = [
    "BoundaryDecision",
    "ChunkResummarized",
    "Classifier",
    "CommitConflicted",
    "Compacted",
    "DeferredForCache",
    "FRESH_BLOCK_MARGIN_PERCENT",
    "FRESH_SESSION_BUDGET_CAP",
    "FellBack",
    "MustKeepAdded",
    "PassStarted",
    "RequestCoalesced",
    "SchedulerCounters",
    "SessionRotated",
    "SummarizerCalled",
    "SummarizerFailed",
    "TriggerDecision",
    "TriggerEvent",
    "TriggerInput",
    "TriggerReason",
    "TriggerState",
    "UsageReported",
    "decide_boundary",
    "defers_for_cache",
    "fresh_block_fits",
    "fresh_session_budget",
    "planning_calibration",
    "reduce",
    "should_compress",
    "trigger_input",
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
    last_turn_tool_tokens: int = 0
    cost_since_compaction_usd: float = 0.0
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

    ``min(window - reserve, first size reaching compress_at_percent)``; raises ValueError for a
    window not in ``1..MAX_CONTEXT_WINDOW``.
    """
    if not 0 < context_window <= MAX_CONTEXT_WINDOW:
        # Past the largest, the float ratio below stops changing by a token and the search would not end.
        raise ValueError(f"context_window must be positive and at most {MAX_CONTEXT_WINDOW:,}, got {context_window}")
    reserve = config.reserve(context_window)
    # The first size passing exactly the float test of should_compress: start
    # just below the exact value and step up (one or two steps).
    percent = max(0, math.floor(context_window * config.compress_at_percent / 100) - 1)
    while percent / context_window * 100 < config.compress_at_percent:
        percent += 1
    return min(context_window - reserve, percent)


FRESH_SESSION_BUDGET_CAP: Final = 8000
"""At most this many tokens of PROJECT MEMORY in a fresh session's prompt: at a 32k window that
budget held everything the kept summaries of LoCoMo's longest chats contain (7,300 tokens), so a
larger window would only add per-call cost."""


def fresh_session_budget(config: Config) -> int:
    """The PROJECT MEMORY block's budget in a session that has not needed it yet (``project_memory_tokens`` if set).

    What the compaction trigger leaves above ``keep_recent_tokens`` (what a compaction keeps), at
    most :data:`FRESH_SESSION_BUDGET_CAP`: an app that starts a session often (a chat session a
    day) would otherwise carry only ``project_memory_budget`` of its past into each one, in a
    prompt mostly empty. Never below ``project_memory_budget``.
    """
    budget = config.project_memory_budget()
    if config.project_memory_tokens is not None:
        return budget
    spare = trigger_threshold_tokens(config.context_window, config) - config.keep_recent()
    return max(budget, min(FRESH_SESSION_BUDGET_CAP, spare))


FRESH_BLOCK_MARGIN_PERCENT: Final = 15
"""The share of the compaction trigger :func:`fresh_block_fits` keeps free: a prompt aiden estimates
below 85% of the trigger stays below it by a provider's count up to 17% higher (a chat session's
first turn with the default block needed about 19%), and it leaves room for the system text, tools
and retrieved text the log does not hold."""


def fresh_block_fits(log_tokens: int, config: Config) -> bool:
    """Whether a session that has not compacted still carries the larger PROJECT MEMORY block: its hot
    window (``log_tokens``) and :func:`fresh_session_budget` stay below the compaction trigger less
    :data:`FRESH_BLOCK_MARGIN_PERCENT`.

    From the log and the config only, so every process serving the session decides alike; one way, as
    the hot window only grows until a compaction. Up to the cap (windows to 32k) that is a log below
    ``keep_recent_tokens`` less the margin, so the block is compact before a compaction has anything
    to take: whatever a call adds, the larger block cannot bring one forward.
    """
    trigger = trigger_threshold_tokens(config.context_window, config)
    return log_tokens + fresh_session_budget(config) < trigger * (100 - FRESH_BLOCK_MARGIN_PERCENT) // 100


def should_compress(inp: TriggerInput, config: Config) -> TriggerDecision:
    """Decide whether to compact now, and why (see the module docstring for the rules)."""
    window = inp.context_window
    if window is not None and not 0 < window <= MAX_CONTEXT_WINDOW:
        window = None  # a bogus window is an unknown window
    prompt = inp.prompt_tokens
    if prompt is None and config.count_compress_after_events is None:
        prompt = inp.estimated_prompt_tokens
    target = None if prompt is None or window is None else trigger_threshold_tokens(window, config)
    reason = _reason(inp, config, prompt, window)
    return TriggerDecision(fire=reason != "none", reason=reason, target_tokens=target)


def _reason(inp: TriggerInput, config: Config, prompt: int | None, window: int | None) -> TriggerReason:
    """The first trigger that fires, in the order of the module docstring."""
    if inp.manual:
        return "manual"
    if prompt is not None and window is not None:
        if prompt >= window - config.reserve(window):
            return "reserve"
        if prompt / window * 100 >= config.compress_at_percent:
            return "percent"
    elif inp.event_count > config.count_limit():
        return "event_count"
    if config.compact_every_turns and inp.turns_since_compaction >= config.compact_every_turns:
        return "every_n_turns"
    if config.tool_output_spike_tokens and inp.last_turn_tool_tokens > config.tool_output_spike_tokens:
        return "tool_output_spike"
    if config.cost_ceiling_usd and inp.cost_since_compaction_usd >= config.cost_ceiling_usd:
        return "cost_ceiling"
    return "none"


# --- the trigger state and its reducer -----------------------------------------------

_replace = msgspec.structs.replace


class SchedulerCounters(msgspec.Struct, frozen=True, kw_only=True):
    """The maintenance scheduler's counters as last published (part of ``memory.stats()``)."""

    passes: int = 0
    compactions: int = 0
    coalesced_requests: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    summarizer_calls: int = 0
    summarizer_failures: int = 0
    fallbacks: int = 0
    degraded_chunks: int = 0
    conflicts: int = 0
    resummarized_chunks: int = 0
    must_keep_added: int = 0
    summarizer_first_error: str = ""
    token_calibration: float = 1.0
    deferred_for_cache: int = 0
    prompt_tokens_since_compaction: int = 0
    cached_tokens_since_compaction: int = 0
    cached_share_before_last_compaction: float | None = None
    last_prompt_tokens: int | None = None


class TriggerState(msgspec.Struct, frozen=True, kw_only=True):
    """What the scheduler knows between passes; only :func:`reduce` makes a new one."""

    model: str = ""
    """The scheduler's own model: its calibration is the one planning uses and the one reported."""
    calibration_weight: float
    """``Config.token_calibration_weight``: the weight of a new sample in :func:`calibrate`."""
    calibration: dict[str, TokenCalibration] = msgspec.field(default_factory=dict)
    """Per-model estimator corrections; replaced, never mutated, so old states stay valid."""
    run_prompt_max: int | None = None
    """Largest provider-reported prompt of the run in progress."""
    run_estimate_max: int | None = None
    """Largest of aiden's own estimates of the prompts built in the run in progress."""
    prompt_reported: bool = False
    """``last_prompt_tokens`` is a provider's figure, not our estimate after a compaction."""
    prompt_estimated: bool = False
    """``last_prompt_tokens`` is aiden's calibrated estimate of the latest run's largest prompt
    (no provider figure came): the token path uses it instead of the event count."""
    turns: int = 0
    """Completed turns since the last compaction or rotation."""
    turn_tool_tokens: int = 0
    """Tool output tokens of the run in progress."""
    last_turn_tool_tokens: int = 0
    """Tool output tokens of the last completed run."""
    cost_usd: float = 0.0
    """Provider cost since the last compaction or rotation."""
    counters: SchedulerCounters = msgspec.field(default_factory=SchedulerCounters)
    """What the actor publishes (``memory.stats()``); the trigger reads its prompt figures too."""


class UsageReported(msgspec.Struct, frozen=True, kw_only=True):
    """Usage of one model call, or the end of a run (the fields of ``RecordUsage`` the trigger uses)."""

    prompt_tokens: int | None = None
    estimated_prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    tool_output_tokens: int = 0
    run_ended: bool = False
    model: str | None = None


class RequestCoalesced(msgspec.Struct, frozen=True):
    """A maintenance request arrived while a pass was already pending and rides on it."""


class PassStarted(msgspec.Struct, frozen=True):
    """A maintenance pass began."""


class DeferredForCache(msgspec.Struct, frozen=True):
    """A soft trigger fired but the pass kept the cached prefix (see :func:`defers_for_cache`)."""


class CommitConflicted(msgspec.Struct, frozen=True):
    """A pass's commit lost to a concurrent change and left everything unchanged."""


class SummarizerCalled(msgspec.Struct, frozen=True):
    """One request went to the summarizer."""


class SummarizerFailed(msgspec.Struct, frozen=True):
    """The summarizer answered a request with a failure, and why (the first one is kept)."""

    reason: str = ""


class MustKeepAdded(msgspec.Struct, frozen=True):
    """The must-keep check appended ``count`` facts a chunk summary had dropped."""

    count: int


class FellBack(msgspec.Struct, frozen=True):
    """A chunk got the raw breadcrumb because the summarizer failed."""


class ChunkResummarized(msgspec.Struct, frozen=True):
    """A degraded (breadcrumb) chunk got a real summary."""


class Compacted(msgspec.Struct, frozen=True, kw_only=True):
    """A pass committed a chunk."""

    tokens_before: int
    kept_tokens: int
    """The estimate of the retained window: the prompt size until a provider reports again."""
    degraded: bool = False


class SessionRotated(msgspec.Struct, frozen=True):
    """The active session was archived and an empty one started."""


TriggerEvent = (
    UsageReported
    | RequestCoalesced
    | PassStarted
    | DeferredForCache
    | CommitConflicted
    | SummarizerCalled
    | SummarizerFailed
    | MustKeepAdded
    | FellBack
    | ChunkResummarized
    | Compacted
    | SessionRotated
)


def reduce(state: TriggerState, event: TriggerEvent) -> TriggerState:
    """The state after ``event``; ``state`` itself is left unchanged."""
    c = state.counters
    match event:
        case UsageReported():
            return _usage(state, event)
        case RequestCoalesced():
            return _count(state, coalesced_requests=c.coalesced_requests + 1)
        case PassStarted():
            return _count(state, passes=c.passes + 1)
        case DeferredForCache():
            return _count(state, deferred_for_cache=c.deferred_for_cache + 1)
        case CommitConflicted():
            return _count(state, conflicts=c.conflicts + 1)
        case SummarizerCalled():
            return _count(state, summarizer_calls=c.summarizer_calls + 1)
        case SummarizerFailed(reason=reason):
            return _count(
                state,
                summarizer_failures=c.summarizer_failures + 1,
                summarizer_first_error=c.summarizer_first_error or reason[:300],
            )
        case MustKeepAdded(count=count):
            return _count(state, must_keep_added=c.must_keep_added + count)
        case FellBack():
            return _count(state, fallbacks=c.fallbacks + 1)
        case ChunkResummarized():
            return _count(
                state,
                degraded_chunks=max(0, c.degraded_chunks - 1),
                resummarized_chunks=c.resummarized_chunks + 1,
            )
        case Compacted():
            return _compacted(state, event)
        case SessionRotated():
            # Calibration and the cache-share figures describe the provider, not the session.
            return _replace(
                state,
                **_FRESH,
                counters=_replace(c, last_prompt_tokens=None),
                run_prompt_max=None,
                run_estimate_max=None,
                turn_tool_tokens=0,
            )
        case _:  # pragma: no cover - exhaustive; mypy checks it
            assert_never(event)


# What a compaction or a rotation starts afresh.
_FRESH: Final = dict(prompt_reported=False, prompt_estimated=False, turns=0, cost_usd=0.0, last_turn_tool_tokens=0)


def _count(state: TriggerState, **changes: object) -> TriggerState:
    return _replace(state, counters=_replace(state.counters, **changes))


def _usage(state: TriggerState, usage: UsageReported) -> TriggerState:
    changes: dict[str, object] = {}
    counted: dict[str, object] = {}
    c = state.counters
    key = usage.model or state.model
    calibration = state.calibration
    if usage.prompt_tokens is not None and usage.estimated_prompt_tokens:
        # Per-model correction of the estimator from what the provider reported.
        cal = calibrate(
            calibration.get(key, TokenCalibration()),
            estimated=usage.estimated_prompt_tokens,
            reported=usage.prompt_tokens,
            weight=state.calibration_weight,
        )
        calibration = changes["calibration"] = {**calibration, key: cal}
        if key == state.model:
            counted["token_calibration"] = cal.factor
    if usage.prompt_tokens is not None and usage.cached_tokens is not None:
        counted["prompt_tokens_since_compaction"] = c.prompt_tokens_since_compaction + usage.prompt_tokens
        counted["cached_tokens_since_compaction"] = c.cached_tokens_since_compaction + usage.cached_tokens
    if usage.cost_usd is not None:
        changes["cost_usd"] = state.cost_usd + usage.cost_usd
    run_max = state.run_prompt_max
    if usage.prompt_tokens is not None:
        run_max = max(run_max or 0, usage.prompt_tokens)
    run_estimate = state.run_estimate_max
    if usage.estimated_prompt_tokens:
        run_estimate = max(run_estimate or 0, usage.estimated_prompt_tokens)
    tool_tokens = state.turn_tool_tokens + usage.tool_output_tokens
    if usage.run_ended:
        if run_max is not None:
            # The trigger uses the largest single prompt of the latest run.
            counted["last_prompt_tokens"] = run_max
            changes.update(prompt_reported=True, prompt_estimated=False)
        elif run_estimate is not None:
            # No provider figure: aiden counted the prompts it built, corrected by what it learned.
            found = calibration.get(key)
            counted["last_prompt_tokens"] = run_estimate if found is None else apply_calibration(run_estimate, found)
            changes.update(prompt_reported=False, prompt_estimated=True)
        changes.update(turns=state.turns + 1, last_turn_tool_tokens=tool_tokens)
        run_max, run_estimate, tool_tokens = None, None, 0
    return _replace(
        state,
        **changes,
        counters=_replace(c, **counted),
        run_prompt_max=run_max,
        run_estimate_max=run_estimate,
        turn_tool_tokens=tool_tokens,
    )


def _compacted(state: TriggerState, done: Compacted) -> TriggerState:
    c = state.counters
    share = c.cached_share_before_last_compaction
    if c.prompt_tokens_since_compaction:
        share = c.cached_tokens_since_compaction / c.prompt_tokens_since_compaction
    # The run in progress (run_prompt_max, turn_tool_tokens) carries on across the pass.
    return _replace(
        state,
        counters=_replace(
            c,
            # Our own estimate of the retained window, so the pending pass does not compact
            # again on the stale pre-compaction prompt size.
            last_prompt_tokens=done.kept_tokens,
            cached_share_before_last_compaction=share,
            prompt_tokens_since_compaction=0,
            cached_tokens_since_compaction=0,
            compactions=c.compactions + 1,
            tokens_before=c.tokens_before + done.tokens_before,
            tokens_after=c.tokens_after + done.kept_tokens,
            degraded_chunks=c.degraded_chunks + (1 if done.degraded else 0),
        ),
        **_FRESH,
    )


def trigger_input(
    state: TriggerState,
    *,
    context_window: int,
    event_count: int,
    manual: bool,
    hot_tokens: int | None = None,
) -> TriggerInput:
    """The :func:`should_compress` input for a pass over a hot window of ``event_count`` events.

    The estimate is that of the latest run's built prompts, else ``hot_tokens`` (the hot window's, a
    lower bound of the prompt), so the event-count fallback decides only when nothing was estimated.
    """
    return TriggerInput(
        prompt_tokens=state.counters.last_prompt_tokens if state.prompt_reported else None,
        # After a compaction (or at open) only the hot window is known: never the stale size.
        estimated_prompt_tokens=state.counters.last_prompt_tokens if state.prompt_estimated else hot_tokens,
        context_window=context_window,
        event_count=event_count,
        turns_since_compaction=state.turns,
        last_turn_tool_tokens=state.last_turn_tool_tokens,
        cost_since_compaction_usd=state.cost_usd,
        manual=manual,
    )


def defers_for_cache(state: TriggerState, decision: TriggerDecision, config: Config) -> bool:
    """A soft (percent) trigger waits for ``compact_batch_turns`` to keep the cached prefix."""
    return decision.reason == "percent" and 0 < state.turns < config.compact_batch_turns


def planning_calibration(state: TriggerState) -> TokenCalibration | None:
    """The calibration a compaction plan's token estimates use: the scheduler model's, if learned."""
    return state.calibration.get(state.model)


# --- the session boundary ---------------------------------------------------------------------

Classifier = Callable[[str, float], bool]
"""``classifier(user_input, idle_seconds) -> True`` when the input starts a new session."""


class BoundaryDecision(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict and why."""

    new_session: bool
    reason: Literal["explicit", "first_turn", "short_gap", "long_gap", "classifier", "default_continue"]
    idle_seconds: float | None = None


def decide_boundary(
    *,
    user_input: str,
    now: float,
    last_activity: float | None,
    config: Config,
    explicit_new: bool | None = None,
    classifier: Classifier | None = None,
) -> BoundaryDecision:
    """Classify a turn. ``last_activity`` is None for an empty session (nothing to rotate)."""
    if explicit_new is not None:
        return BoundaryDecision(new_session=explicit_new, reason="explicit")
    if last_activity is None:
        return BoundaryDecision(new_session=False, reason="first_turn")
    idle = max(0.0, now - last_activity)
    if idle <= config.session_continue_gap_s:
        return BoundaryDecision(new_session=False, reason="short_gap", idle_seconds=idle)
    if idle > config.session_new_gap_s:
        return BoundaryDecision(new_session=True, reason="long_gap", idle_seconds=idle)
    if classifier is not None:
        return BoundaryDecision(new_session=bool(classifier(user_input, idle)), reason="classifier", idle_seconds=idle)
    return BoundaryDecision(new_session=False, reason="default_continue", idle_seconds=idle)

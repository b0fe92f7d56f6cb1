"""The scheduler's trigger state: what each event changes, and the invariants over any sequence."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from aiden.config import Config
from aiden.policy.tokens import TokenCalibration, apply_calibration
from aiden.policy.triggers import (
    ChunkResummarized,
    CommitConflicted,
    Compacted,
    DeferredForCache,
    FellBack,
    PassStarted,
    RequestCoalesced,
    SchedulerCounters,
    SessionRotated,
    SummarizerCalled,
    SummarizerFailed,
    TriggerDecision,
    TriggerEvent,
    TriggerInput,
    TriggerState,
    UsageReported,
    defers_for_cache,
    planning_calibration,
    reduce,
    trigger_input,
)

START = TriggerState(model="m", calibration_weight=0.5)


def expected(base: TriggerState, counters: dict[str, object] | None = None, **fields: object) -> TriggerState:
    """``base`` with ``fields`` and the ``counters`` fields changed."""
    return msgspec.structs.replace(base, counters=msgspec.structs.replace(base.counters, **(counters or {})), **fields)


def fold(state: TriggerState, *events: TriggerEvent) -> TriggerState:
    for event in events:
        state = reduce(state, event)
    return state


# --- usage and runs ---------------------------------------------------------------------


def test_usage_within_a_run_tracks_the_largest_prompt_cost_and_tool_output() -> None:
    state = fold(
        START,
        UsageReported(prompt_tokens=900, cost_usd=0.25, tool_output_tokens=40),
        UsageReported(prompt_tokens=300, cost_usd=0.5, tool_output_tokens=2),
        UsageReported(tool_output_tokens=1),
    )
    assert state == msgspec.structs.replace(START, run_prompt_max=900, cost_usd=0.75, turn_tool_tokens=43)
    # Nothing reaches the trigger before the run ends.
    assert state.counters.last_prompt_tokens is None
    assert state.turns == 0


def test_run_end_reports_the_largest_prompt_of_the_run() -> None:
    state = fold(
        START,
        UsageReported(prompt_tokens=900, tool_output_tokens=40),
        UsageReported(prompt_tokens=300, tool_output_tokens=2, run_ended=True),
    )
    assert state == expected(
        START, {"last_prompt_tokens": 900}, prompt_reported=True, turns=1, last_turn_tool_tokens=42
    )


def test_run_end_without_prompt_data_keeps_the_previous_figure() -> None:
    reported = fold(START, UsageReported(prompt_tokens=500, run_ended=True))
    state = fold(reported, UsageReported(tool_output_tokens=7), UsageReported(run_ended=True))
    assert state == msgspec.structs.replace(reported, turns=2, last_turn_tool_tokens=7)


def test_run_end_without_a_provider_figure_uses_the_calibrated_estimate_of_its_largest_prompt() -> None:
    # An earlier run taught factor 1.2; this run reports no provider figure at all.
    calibrated = fold(START, UsageReported(prompt_tokens=120, estimated_prompt_tokens=100, run_ended=True))
    state = fold(
        calibrated,
        UsageReported(estimated_prompt_tokens=1000),
        UsageReported(estimated_prompt_tokens=400, run_ended=True),
    )
    assert (state.counters.last_prompt_tokens, state.prompt_reported, state.prompt_estimated) == (1200, False, True)
    # Uncalibrated (no sample yet): the estimate itself.
    raw = fold(START, UsageReported(estimated_prompt_tokens=700, run_ended=True))
    assert (raw.counters.last_prompt_tokens, raw.prompt_reported, raw.prompt_estimated) == (700, False, True)


def test_calibration_of_the_scheduler_model_is_the_reported_one() -> None:
    state = fold(START, UsageReported(prompt_tokens=200, estimated_prompt_tokens=100))
    assert state.calibration == {"m": TokenCalibration(factor=2.0, samples=1)}
    assert state.counters.token_calibration == 2.0
    # weight 0.5: halfway from 2.0 towards the new ratio 1.0
    state = fold(state, UsageReported(prompt_tokens=100, estimated_prompt_tokens=100, model="m"))
    assert state.calibration == {"m": TokenCalibration(factor=1.5, samples=2)}
    assert state.counters.token_calibration == 1.5


def test_calibration_of_another_model_is_kept_but_not_reported() -> None:
    state = fold(START, UsageReported(prompt_tokens=150, estimated_prompt_tokens=100, model="other"))
    assert state.calibration == {"other": TokenCalibration(factor=1.5, samples=1)}
    assert state.counters.token_calibration == 1.0
    assert START.calibration == {}


def test_no_calibration_without_both_sizes() -> None:
    state = fold(
        START,
        UsageReported(prompt_tokens=150),
        UsageReported(prompt_tokens=150, estimated_prompt_tokens=0),
        UsageReported(estimated_prompt_tokens=100),
    )
    assert state.calibration == {}
    assert state.counters.token_calibration == 1.0


def test_cache_share_counts_only_calls_reporting_both_sizes() -> None:
    state = fold(
        START,
        UsageReported(prompt_tokens=1000, cached_tokens=400),
        UsageReported(prompt_tokens=550, cached_tokens=50),
        UsageReported(prompt_tokens=999),
        UsageReported(cached_tokens=999),
    )
    assert state.counters.prompt_tokens_since_compaction == 1550
    assert state.counters.cached_tokens_since_compaction == 450


# --- compaction and rotation ------------------------------------------------------------


def test_compaction_resets_the_trigger_to_the_retained_estimate() -> None:
    before = fold(
        START,
        UsageReported(
            prompt_tokens=1000, cached_tokens=400, cost_usd=1.0, tool_output_tokens=5, run_ended=True
        ),
        UsageReported(prompt_tokens=550, cached_tokens=50, tool_output_tokens=3),
    )
    state = reduce(before, Compacted(tokens_before=1200, kept_tokens=300))
    assert state == expected(
        START,
        {
            "last_prompt_tokens": 300,
            "cached_share_before_last_compaction": 450 / 1550,
            "compactions": 1,
            "tokens_before": 1200,
            "tokens_after": 300,
        },
        # The run in progress carries on across the pass.
        run_prompt_max=550,
        turn_tool_tokens=3,
        prompt_reported=False,
    )


def test_compaction_without_cache_data_keeps_the_last_share_and_counts_degraded() -> None:
    first = fold(
        START, UsageReported(prompt_tokens=100, cached_tokens=25), Compacted(tokens_before=9, kept_tokens=4)
    )
    state = reduce(first, Compacted(tokens_before=10, kept_tokens=3, degraded=True))
    c = state.counters
    assert c.cached_share_before_last_compaction == 0.25
    assert (c.compactions, c.tokens_before, c.tokens_after, c.degraded_chunks) == (2, 19, 7, 1)


def test_rotation_resets_the_session_but_keeps_provider_figures() -> None:
    before = fold(
        START,
        UsageReported(
            prompt_tokens=200, estimated_prompt_tokens=100, cached_tokens=20, cost_usd=2.0, run_ended=True
        ),
        UsageReported(prompt_tokens=80, tool_output_tokens=9),
        PassStarted(),
    )
    state = reduce(before, SessionRotated())
    assert state == expected(
        START,
        {
            "token_calibration": 2.0,
            "prompt_tokens_since_compaction": 200,
            "cached_tokens_since_compaction": 20,
            "passes": 1,
        },
        calibration={"m": TokenCalibration(factor=2.0, samples=1)},
    )


# --- counters ---------------------------------------------------------------------------


def test_each_counter_event_bumps_its_counter() -> None:
    state = fold(
        START,
        RequestCoalesced(),
        PassStarted(),
        PassStarted(),
        DeferredForCache(),
        CommitConflicted(),
        SummarizerCalled(),
        SummarizerCalled(),
        SummarizerCalled(),
        SummarizerFailed(),
        FellBack(),
    )
    assert state == msgspec.structs.replace(
        START,
        counters=SchedulerCounters(
            coalesced_requests=1,
            passes=2,
            deferred_for_cache=1,
            conflicts=1,
            summarizer_calls=3,
            summarizer_failures=1,
            fallbacks=1,
        ),
    )


def test_a_resummarized_chunk_is_no_longer_degraded() -> None:
    degraded = reduce(START, Compacted(tokens_before=2, kept_tokens=1, degraded=True))
    state = fold(degraded, ChunkResummarized(), ChunkResummarized())
    assert (state.counters.degraded_chunks, state.counters.resummarized_chunks) == (0, 2)


# --- questions asked before a pass ------------------------------------------------------


def test_trigger_input_passes_only_provider_reported_sizes() -> None:
    reported = fold(
        START, UsageReported(prompt_tokens=700, cost_usd=0.5, tool_output_tokens=6, run_ended=True)
    )
    assert trigger_input(reported, context_window=1000, event_count=12, manual=True) == TriggerInput(
        prompt_tokens=700,
        context_window=1000,
        event_count=12,
        turns_since_compaction=1,
        last_turn_tool_tokens=6,
        cost_since_compaction_usd=0.5,
        manual=True,
    )
    compacted = reduce(reported, Compacted(tokens_before=700, kept_tokens=200))
    assert trigger_input(compacted, context_window=1000, event_count=3, manual=False) == TriggerInput(
        prompt_tokens=None, context_window=1000, event_count=3
    )


def test_a_soft_trigger_defers_until_the_batch_of_turns_is_complete() -> None:
    config = Config(compact_batch_turns=3)
    percent = TriggerDecision(fire=True, reason="percent")
    two_turns = fold(START, UsageReported(run_ended=True), UsageReported(run_ended=True))
    assert defers_for_cache(two_turns, percent, config) is True
    assert defers_for_cache(reduce(two_turns, UsageReported(run_ended=True)), percent, config) is False
    # No completed turn yet, a hard trigger, or batching disabled: compact now.
    assert defers_for_cache(START, percent, config) is False
    assert defers_for_cache(two_turns, TriggerDecision(fire=True, reason="reserve"), config) is False
    assert defers_for_cache(two_turns, percent, Config(compact_batch_turns=0)) is False


def test_planning_uses_the_scheduler_model_calibration() -> None:
    assert planning_calibration(START) is None
    other = reduce(START, UsageReported(prompt_tokens=150, estimated_prompt_tokens=100, model="other"))
    assert planning_calibration(other) is None
    doubled = reduce(START, UsageReported(prompt_tokens=200, estimated_prompt_tokens=100))
    calibration = planning_calibration(doubled)
    assert calibration is not None
    assert apply_calibration(1000, calibration) == 2000


# --- invariants -------------------------------------------------------------------------

_sizes = st.none() | st.integers(0, 200_000)
usage = st.builds(
    UsageReported,
    prompt_tokens=_sizes,
    estimated_prompt_tokens=_sizes,
    cached_tokens=_sizes,
    cost_usd=st.none() | st.floats(0, 5, allow_nan=False),
    tool_output_tokens=st.integers(0, 50_000),
    run_ended=st.booleans(),
    model=st.sampled_from([None, "", "m", "other"]),
)
events = st.lists(
    usage
    | st.builds(
        Compacted,
        tokens_before=st.integers(0, 10**6),
        kept_tokens=st.integers(0, 10**6),
        degraded=st.booleans(),
    )
    | st.sampled_from(
        [
            RequestCoalesced(),
            PassStarted(),
            DeferredForCache(),
            CommitConflicted(),
            SummarizerCalled(),
            SummarizerFailed(),
            FellBack(),
            ChunkResummarized(),
            SessionRotated(),
        ]
    ),
    max_size=40,
)
_MONOTONE = (
    "passes",
    "compactions",
    "coalesced_requests",
    "tokens_before",
    "tokens_after",
    "summarizer_calls",
    "summarizer_failures",
    "fallbacks",
    "conflicts",
    "resummarized_chunks",
    "deferred_for_cache",
)


@given(events=events)
def test_invariants_hold_over_any_event_sequence(events: list[TriggerEvent]) -> None:
    state = START
    turns = 0
    for event in events:
        frozen = msgspec.json.encode(state)
        after = reduce(state, event)
        assert msgspec.json.encode(state) == frozen, "reduce changed its input"
        assert all(getattr(after.counters, name) >= getattr(state.counters, name) for name in _MONOTONE)
        if isinstance(event, Compacted | SessionRotated):
            turns = 0
        elif isinstance(event, UsageReported) and event.run_ended:
            turns += 1
            assert after.run_prompt_max is None
            assert after.turn_tool_tokens == 0
        state = after
        assert state.turns == turns
        assert state.counters.degraded_chunks >= 0
        assert not state.prompt_reported or state.counters.last_prompt_tokens is not None
        assert state.counters.token_calibration == state.calibration.get("m", TokenCalibration()).factor
        assert all(0.5 <= cal.factor <= 2.0 for cal in state.calibration.values())
        assert set(state.calibration) <= {"m", "other"}

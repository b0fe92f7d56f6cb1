"""The summary telemetry the trigger-state reducer folds (#19): must-keep additions, the first failure."""

from __future__ import annotations

from aiden.policy.triggers import MustKeepAdded, SummarizerFailed, TriggerState, reduce

START = TriggerState(model="m", calibration_weight=0.5)


def test_must_keep_additions_add_up() -> None:
    state = reduce(reduce(START, MustKeepAdded(2)), MustKeepAdded(3))
    assert state.counters.must_keep_added == 5


def test_the_first_failure_is_kept_and_every_one_counted() -> None:
    state = START
    for reason in (
        "",
        "SummarizerTimeout: summarizer exceeded its deadline of 120s",
        "InvalidSummaryError: x",
    ):
        state = reduce(state, SummarizerFailed(reason))
    assert (state.counters.summarizer_failures, state.counters.summarizer_first_error) == (
        3,
        "SummarizerTimeout: summarizer exceeded its deadline of 120s",
    )
    assert reduce(START, SummarizerFailed("x" * 400)).counters.summarizer_first_error == "x" * 300

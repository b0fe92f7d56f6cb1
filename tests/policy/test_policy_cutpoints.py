"""Example tests of plan_compaction: one small hand-written stream per rule of seed 000."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from aiden.config import Config
from aiden.events import SessionEvent
from aiden.policy.cutpoints import (
    CompactionPlan,
    CutMeta,
    SkipCompaction,
    classify,
    is_leading_context,
    legal_cut_points,
    plan_compaction,
)
from aiden.policy.tokens import event_tokens
from tests.policy.policy_helpers import (
    assistant,
    call,
    numbered,
    result,
    screen,
    seqs,
    system,
    user,
)


def plan(events: list[SessionEvent], tokens: int | list[int] = 10, **config: Any) -> CompactionPlan:
    counts = tokens if isinstance(tokens, list) else [tokens] * len(events)
    target = config.pop("target_tokens", None)
    out = plan_compaction(events, Config(**config), token_counts=counts, target_tokens=target)
    assert isinstance(out, CompactionPlan), out
    return out


def skip(events: list[SessionEvent], tokens: int | list[int] = 10, **config: Any) -> SkipCompaction:
    counts = tokens if isinstance(tokens, list) else [tokens] * len(events)
    target = config.pop("target_tokens", None)
    out = plan_compaction(events, Config(**config), token_counts=counts, target_tokens=target)
    assert isinstance(out, SkipCompaction), out
    return out


# --- classification ------------------------------------------------------------------


def test_classify_by_type() -> None:
    assert classify(user()) == "boundary"
    assert classify(assistant()) == "split_allowed"
    assert classify(SessionEvent(type="role_output")) == "split_allowed"
    assert classify(call("x")) == "split_allowed"
    assert classify(result("x")) == "forbidden"
    assert classify(system()) == "forbidden"
    assert classify(screen()) == "forbidden"


def test_classify_falls_back_to_role_for_unknown_types() -> None:
    def odd(role: str | None) -> SessionEvent:
        return SessionEvent(type="plugin_note", role=role)  # type: ignore[arg-type]

    assert classify(odd("user")) == "boundary"
    assert classify(odd("assistant")) == "split_allowed"
    assert classify(odd("tool")) == "forbidden"
    assert classify(odd("system")) == "forbidden"
    assert classify(odd("narrator")) == "forbidden"
    assert classify(odd(None)) == "forbidden"
    assert is_leading_context(odd("system"))
    assert not is_leading_context(odd("user"))


def test_synthetic_events_count_as_system_events() -> None:
    summary = assistant("prefix summary", synthetic=True)
    assert classify(summary) == "forbidden"
    assert is_leading_context(summary)
    assert is_leading_context(system()) and is_leading_context(screen())
    assert not is_leading_context(user()) and not is_leading_context(result("x"))


def test_legal_cut_points_respect_classes_and_tool_pairs() -> None:
    events = numbered(
        [
            user(),
            call("A"),
            call("B"),
            result("A"),
            assistant(),
            result("B"),
            user(),
            system(),
            assistant(),
        ]
    )
    # 1: first call, before both results; 2 is inside A's span, 4 inside B's.
    assert legal_cut_points(events) == [1, 6, 8]


def test_a_call_and_result_without_ids_are_never_separated() -> None:
    # A provider that sends no tool call ids: each result answers the nearest preceding call.
    events = numbered([user(), call(None), result(None), assistant(), call(None), call("B"), result(None), user()])
    # 2 would separate the first pair; the last result answers call B (5), so only 6 is inside a span
    # there, and the id-less call at 4, which nothing answers, may start the hot window.
    assert legal_cut_points(events) == [1, 3, 4, 5, 7]


# --- token path ----------------------------------------------------------------------


def test_token_path_snaps_forward_to_the_next_legal_cut() -> None:
    events = numbered(
        [
            user("root"),
            assistant(),
            user(),
            call("x"),
            result("x"),
            assistant(),
            user(),
            assistant(),
        ]
    )
    # Walking back 10 tokens each: 35 is reached on the tool_result (index 4),
    # which cannot open the hot window; the next legal cut is the assistant.
    p = plan(events, keep_recent_tokens=35)
    assert p.path == "token"
    assert seqs(p.retained) == [6, 7, 8]
    assert seqs(p.kept) == [1]  # the root input
    assert seqs(p.history) == [2]
    assert seqs(p.turn_prefix) == [3, 4, 5]
    assert p.tokens_before == 80
    assert p.kept_tokens == 40
    assert p.reaches_target and p.note == ""
    assert p.cut_meta == CutMeta(
        first_kept_event_id="seq-6",
        tokens_before=80,
        kept_tokens_estimate=40,
        is_split_turn=True,
        turn_start_event_id="seq-3",
        turn_start_seq=3,
    )


def test_token_path_cut_on_a_legal_event_stays_there() -> None:
    events = numbered([user("root"), assistant(), user(), assistant(), user(), assistant()])
    p = plan(events, keep_recent_tokens=20)
    assert seqs(p.retained) == [5, 6]
    assert seqs(p.history) == [2, 3, 4] and p.turn_prefix == ()
    assert p.cut_meta == CutMeta(
        first_kept_event_id="seq-5", tokens_before=60, kept_tokens_estimate=30
    )


def test_token_path_moves_past_parallel_tool_results() -> None:
    # The cut at the assistant (index 4) would compact call B and keep its result.
    events = numbered(
        [user(), call("A"), call("B"), result("A"), assistant(), result("B"), user(), assistant()]
    )
    p = plan(events, keep_recent_tokens=35)
    assert seqs(p.retained) == [7, 8]
    assert seqs(p.history) == [2, 3, 4, 5, 6]


def test_token_path_walks_to_the_first_event() -> None:
    # Only the whole window reaches keep_recent_tokens: the cut snaps forward
    # from index 0; index 1 would compact only the root, so it advances again.
    events = numbered([user(), assistant(), user()])
    p = plan(events, [100, 1, 1], keep_recent_tokens=50)
    assert seqs(p.kept) == [1] and seqs(p.history) == [2] and seqs(p.retained) == [3]


def test_everything_fits_skips() -> None:
    events = numbered([user(), assistant(), user(), assistant()])
    s = skip(events, keep_recent_tokens=100, hot_window_events=4)
    assert s == SkipCompaction(
        reason="fits",
        detail="40 tokens <= keep_recent_tokens 100 and 4 events <= hot_window_events 4",
    )


# --- count fallback ------------------------------------------------------------------


def test_count_fallback_snaps_at_or_before_the_target() -> None:
    events = numbered(
        [user(), assistant(), user(), assistant(), call("x"), result("x"), assistant(), user()]
    )
    # 8 events fit in keep_recent_tokens; keeping 3 aims at index 5, a
    # tool_result: the nearest legal cut at or before it is the call.
    p = plan(events, 1, keep_recent_tokens=100, hot_window_events=3)
    assert p.path == "count"
    assert seqs(p.retained) == [5, 6, 7, 8]
    assert seqs(p.kept) == [1]
    assert seqs(p.history) == [2]
    assert seqs(p.turn_prefix) == [3, 4]
    assert p.cut_meta.is_split_turn and p.cut_meta.turn_start_event_id == "seq-3"


def test_count_fallback_keeps_parallel_calls_with_their_results() -> None:
    events = numbered(
        [
            user(),
            assistant(),
            call("A"),
            call("B"),
            result("A"),
            assistant(),
            result("B"),
            user(),
            assistant(),
        ]
    )
    p = plan(events, 1, keep_recent_tokens=100, hot_window_events=3)
    assert seqs(p.retained) == [3, 4, 5, 6, 7, 8, 9]
    # The split turn starts at the root, which is kept, not summarized.
    assert seqs(p.kept) == [1] and p.history == () and seqs(p.turn_prefix) == [2]
    assert p.cut_meta.turn_start_event_id == "seq-1"


def test_count_fallback_used_when_the_token_cut_is_useless() -> None:
    # The token path lands on index 1, compacting only the pinned root, and no
    # later cut is legal; the count path finds nothing either: skip.
    events = numbered([user(), assistant(), call("x"), result("x")])
    s = skip(events, [10, 10, 10, 100], keep_recent_tokens=50)
    assert s.reason == "no_legal_cut"
    assert "token path" in s.detail


def test_count_fallback_without_a_legal_cut_before_the_target() -> None:
    events = numbered([system(), system(), system(), user(), assistant()])
    s = skip(events, 1, keep_recent_tokens=100, hot_window_events=3)
    assert s.reason == "no_legal_cut"


# --- leading context --------------------------------------------------------------------


def test_leading_system_and_screen_events_are_pulled_into_the_hot_window() -> None:
    events = numbered(
        [user(), assistant(), user(), assistant(), system(), screen(), user(), assistant()]
    )
    p = plan(events, keep_recent_tokens=20)
    assert seqs(p.retained) == [5, 6, 7, 8]
    assert seqs(p.history) == [2, 3, 4] and p.turn_prefix == ()
    assert p.cut_meta.first_kept_event_id == "seq-5"
    assert not p.cut_meta.is_split_turn
    assert p.kept_tokens == 50


def test_synthetic_summary_is_pulled_in_as_leading_context() -> None:
    events = numbered(
        [user(), assistant(), assistant("summary", synthetic=True), user(), assistant()]
    )
    p = plan(events, keep_recent_tokens=20)
    assert seqs(p.retained) == [3, 4, 5]


# --- root input pinning -----------------------------------------------------------------


def test_root_input_is_kept_not_compacted() -> None:
    events = numbered([user("the task"), assistant(), user(), assistant()])
    p = plan(events, keep_recent_tokens=20)
    assert seqs(p.kept) == [1]
    assert seqs(p.history) == [2]
    assert all(e.seq != 1 for e in p.compacted)
    assert p.kept_tokens == 30  # root + retained


def test_root_pinning_advances_to_the_next_legal_cut() -> None:
    # The token cut (index 1) would compact only the root: advance to index 2.
    events = numbered([user("the task"), assistant(), user(), assistant()])
    p = plan(events, keep_recent_tokens=30)
    assert seqs(p.kept) == [1] and seqs(p.history) == [2] and seqs(p.retained) == [3, 4]


def test_root_pinning_skips_when_nothing_else_is_compactable() -> None:
    events = numbered([user("the task"), assistant()])
    s = skip(events, 100, keep_recent_tokens=50)
    assert s == SkipCompaction(
        reason="nothing_compactable",
        detail="every legal cut leaves only the root input and pinned events to compact",
    )


def test_no_user_input_means_no_root_and_no_split_turn() -> None:
    events = numbered([system(), assistant(), assistant(), assistant()])
    p = plan(events, keep_recent_tokens=15)
    assert p.kept == ()
    assert seqs(p.history) == [1, 2] and p.turn_prefix == ()
    assert seqs(p.retained) == [3, 4]
    assert not p.cut_meta.is_split_turn and p.cut_meta.turn_start_event_id is None


# --- split turns ---------------------------------------------------------------------------


def test_split_turn_whose_start_is_the_root() -> None:
    events = numbered([user("task"), assistant(), call("x"), result("x"), assistant()])
    p = plan(events, keep_recent_tokens=15)
    assert seqs(p.kept) == [1]
    assert p.history == ()
    assert seqs(p.turn_prefix) == [2, 3, 4]
    assert seqs(p.retained) == [5]
    assert p.cut_meta.turn_start_event_id == "seq-1"


def test_split_turn_with_only_pinned_prefix_is_not_split() -> None:
    events = numbered([user("task"), assistant(), user(pinned="constraint"), assistant()])
    p = plan(events, keep_recent_tokens=10)
    assert seqs(p.kept) == [1, 3]
    assert seqs(p.history) == [2] and p.turn_prefix == ()
    assert not p.cut_meta.is_split_turn and p.cut_meta.turn_start_event_id is None


# --- sticky pins ---------------------------------------------------------------------------


def test_pinned_events_are_kept_with_their_tool_partners() -> None:
    events = numbered(
        [
            user(),
            assistant(pinned="decision"),
            call("x"),
            result("x", pinned="key output"),
            assistant(),
            user(),
            assistant(),
        ]
    )
    p = plan(events, keep_recent_tokens=20)
    assert seqs(p.kept) == [1, 2, 3, 4]
    assert seqs(p.history) == [5]
    assert seqs(p.retained) == [6, 7]
    assert p.kept_tokens == 60
    # All kept events precede the compacted range [5, 5]: none lie inside it.
    assert (p.first_seq, p.last_seq, p.kept_seqs) == (5, 5, ())


def test_pins_beyond_max_pinned_events_are_compacted_oldest_first() -> None:
    events = numbered(
        [
            user(),
            assistant(pinned="old"),
            assistant(),
            assistant(pinned="new"),
            assistant(),
            user(),
            assistant(),
        ]
    )
    p = plan(events, keep_recent_tokens=20, max_pinned_events=1)
    assert seqs(p.kept) == [1, 4]
    assert seqs(p.history) == [2, 3, 5]
    assert p.kept_seqs == (4,)
    none = plan(events, keep_recent_tokens=20, max_pinned_events=0)
    assert seqs(none.kept) == [1] and seqs(none.history) == [2, 3, 4, 5]


def test_compacted_merges_history_and_prefix_in_order() -> None:
    events = numbered(
        [user(), assistant(), user(), assistant(pinned="p"), assistant(), assistant()]
    )
    p = plan(events, keep_recent_tokens=10)
    assert seqs(p.history) == [2]
    assert seqs(p.turn_prefix) == [3, 5]
    assert seqs(p.compacted) == [2, 3, 5]
    assert (p.first_seq, p.last_seq, p.kept_seqs) == (2, 5, (4,))


# --- progress guarantee ----------------------------------------------------------------------


def test_progress_advances_the_cut_until_the_hot_window_is_below_target() -> None:
    events = numbered([user(), assistant(), user(), assistant(), user(), assistant()])
    normal = plan(events, keep_recent_tokens=35)
    assert normal.kept_tokens == 50
    p = plan(events, keep_recent_tokens=35, target_tokens=45)
    assert p.reaches_target and p.note == ""
    assert p.kept_tokens == 40
    assert seqs(p.retained) == [4, 5, 6]
    assert seqs(p.history) == [2] and seqs(p.turn_prefix) == [3]


def test_unreachable_target_uses_the_most_aggressive_cut_and_says_so() -> None:
    events = numbered([user(), assistant(), user(), assistant(), result("x"), user(), assistant()])
    p = plan(events, keep_recent_tokens=35, target_tokens=15)
    assert not p.reaches_target
    assert seqs(p.retained) == [7]
    assert p.kept_tokens == 20
    assert p.note == "smallest reachable hot window 20 tokens >= trigger 15"


def test_progress_cut_when_no_path_produced_one() -> None:
    events = numbered([user(), assistant(), user(), assistant(), user(), assistant()])
    # Fits keep_recent_tokens and hot_window_events, but the prompt is over target.
    p = plan(events, keep_recent_tokens=100, target_tokens=45)
    assert p.path == "token"
    assert seqs(p.retained) == [4, 5, 6] and p.kept_tokens == 40
    assert skip(events, keep_recent_tokens=100, target_tokens=61).reason == "fits"


def test_progress_is_not_attempted_without_a_useful_cut() -> None:
    events = numbered([user(), assistant()])
    s = skip(events, 10, keep_recent_tokens=100, target_tokens=5)
    assert s.reason == "nothing_compactable"


# --- inputs and skips ------------------------------------------------------------------------


def test_no_events() -> None:
    assert plan_compaction([], Config()) == SkipCompaction(reason="no_events")


def test_no_legal_cut_at_all() -> None:
    events = numbered([result("orphan"), system()])
    s = skip(events, 100, keep_recent_tokens=50)
    assert s == SkipCompaction(
        reason="no_legal_cut", detail="none of the 2 events may open the hot window"
    )


def test_token_counts_are_validated() -> None:
    events = numbered([user(), assistant()])
    with pytest.raises(ValueError, match="token_counts has 1 entries for 2 events"):
        plan_compaction(events, Config(), token_counts=[1])
    with pytest.raises(ValueError, match="must not be negative"):
        plan_compaction(events, Config(), token_counts=[1, -1])


def test_estimates_tokens_when_no_counts_are_given() -> None:
    events = numbered(
        [
            user("a long task " * 50),
            assistant("ok " * 400),
            user("next " * 300),
            assistant("done " * 300),
        ]
    )
    config = Config(keep_recent_tokens=200)
    assert plan_compaction(events, config) == plan_compaction(
        events, config, token_counts=event_tokens(events)
    )


def test_plan_round_trips_through_msgspec() -> None:
    events = numbered([user(), assistant(), user(), assistant()])
    p = plan(events, keep_recent_tokens=20)
    assert msgspec.json.decode(msgspec.json.encode(p), type=CompactionPlan) == p
    # cut_meta omits defaults, so older indexes stay compatible (seed 000).
    assert msgspec.json.encode(CutMeta()) == b"{}"

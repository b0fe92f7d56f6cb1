"""Rule 8 of plan_compaction: a pass compacts at most ``max_pass_events`` (the oldest); a backlog takes several."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiden.config import Config
from aiden.policy.cutpoints import CompactionPlan, plan_compaction
from tests.policy.policy_helpers import assistant, call, numbered, result, seqs, system, user

CAP = Config(hot_window_events=4, keep_recent_tokens=30_000, max_pass_events=10)


def _turns(n: int) -> list:  # type: ignore[type-arg]
    return numbered([e for i in range(n) for e in (user(f"u{i}"), assistant(f"a{i}"))])


def test_a_backlog_pass_compacts_the_oldest_events_up_to_the_cap() -> None:
    events = _turns(20)  # 40 events; the count path would compact 35 of them
    plan = plan_compaction(events, CAP)
    assert isinstance(plan, CompactionPlan)
    assert plan.backlog_left is True and plan.reaches_target is False
    # The root input (seq 1) stays; the next 10 events are the oldest compactable ones.
    assert seqs(plan.compacted) == list(range(2, 12))
    assert seqs(plan.kept) == [1]
    assert seqs(plan.retained)[0] == 12
    assert "compacting 10 of the 35 events due" in plan.note


def test_a_pass_of_large_events_is_capped_by_tokens_too() -> None:
    # 1,000 large tool outputs once took a pass past the summarizer's deadline with nothing
    # committed: the count cap alone does not bound the work, the token cap does.
    config = Config(hot_window_events=4, keep_recent_tokens=1_000, max_pass_events=1000, summary_max_tokens=100)
    assert config.max_pass_tokens() == 40_000
    events = numbered([e for i in range(60) for e in (user(f"u{i} " + "word " * 400), assistant(f"a{i}"))])
    plan = plan_compaction(events, config, token_counts=[2000 if e.role == "user" else 5 for e in events])
    assert isinstance(plan, CompactionPlan)
    assert plan.backlog_left is True
    # The root input (seq 1) stays; then whole turns while their tokens fit in 40,000.
    assert sum(2000 if e.role == "user" else 5 for e in plan.compacted) <= 40_000
    assert seqs(plan.compacted) == list(range(2, 2 + len(plan.compacted)))
    assert len(plan.compacted) >= 36
    assert "40000 tokens" in plan.note


def test_no_cap_compacts_everything_due_in_one_pass() -> None:
    events = _turns(20)
    plan = plan_compaction(events, Config(hot_window_events=4, keep_recent_tokens=30_000, max_pass_events=0))
    assert isinstance(plan, CompactionPlan)
    assert (plan.backlog_left, len(plan.compacted)) == (False, 35)


def test_a_range_within_the_cap_is_not_a_backlog() -> None:
    events = _turns(6)  # 12 events: 7 due, under the cap of 10
    plan = plan_compaction(events, CAP)
    assert isinstance(plan, CompactionPlan)
    assert (plan.backlog_left, seqs(plan.compacted)) == (False, list(range(2, 9)))


def test_no_legal_cut_within_the_cap_keeps_the_uncapped_cut() -> None:
    # Twelve parallel calls answered after all of them: no cut between a call and its result,
    # so the first useful cut compacts 24 events, past the cap; the pass is not refused.
    events = numbered(
        [user("go"), *(call(f"c{i}") for i in range(12)), *(result(f"c{i}") for i in range(12))]
        + [e for i in range(4) for e in (user(f"u{i}"), assistant(f"a{i}"))]
    )
    plan = plan_compaction(events, CAP)
    assert isinstance(plan, CompactionPlan)
    assert (plan.backlog_left, seqs(plan.compacted)[0], len(plan.compacted)) == (False, 2, 28)


def test_a_capped_cut_that_only_pulls_back_over_context_keeps_the_uncapped_cut() -> None:
    # With a cap of 1 the only cut in reach opens on the user input after a system event;
    # pulled back over that leading context it compacts nothing, so the cap cannot apply.
    events = numbered([user("root"), system("s"), user("u1"), *(assistant(f"a{i}") for i in range(8))])
    config = Config(hot_window_events=2, keep_recent_tokens=30_000, max_pass_events=1)
    plan = plan_compaction(events, config)
    assert isinstance(plan, CompactionPlan)
    assert plan.backlog_left is False


@settings(max_examples=200, deadline=None)
@given(turns=st.integers(1, 40), cap=st.integers(0, 30), hot=st.integers(1, 8))
def test_the_cap_bounds_every_pass_and_passes_partition_the_input(turns: int, cap: int, hot: int) -> None:
    events = _turns(turns)
    plan = plan_compaction(
        events, Config(hot_window_events=hot, keep_recent_tokens=30_000, max_pass_events=cap)
    )
    if not isinstance(plan, CompactionPlan):
        return
    if plan.backlog_left:
        assert 0 < len(plan.compacted) <= cap
    assert sorted(seqs([*plan.compacted, *plan.kept, *plan.retained])) == seqs(events)


def test_only_tool_results_within_the_cap_keeps_the_uncapped_cut() -> None:
    # A stream that opens on a call answered by many results: no event within the cap may
    # open the hot window (a cut never lands on a tool result).
    events = numbered(
        [call("c0"), *(result("c0", f"r{i}") for i in range(6))]
        + [e for i in range(4) for e in (user(f"u{i}"), assistant(f"a{i}"))]
    )
    config = Config(hot_window_events=2, keep_recent_tokens=30_000, max_pass_events=3)
    plan = plan_compaction(events, config)
    assert isinstance(plan, CompactionPlan)
    assert plan.backlog_left is False
    assert seqs(plan.compacted)[:7] == list(range(1, 8))

"""cut_meta names the seq of a split turn's user input, not only its id: the prompt reads that input back
verbatim while it is the current task, and a client ``event_id`` (every framework adapter sets one) does
not give the seq."""

from __future__ import annotations

from aiden.config import Config
from aiden.policy.cutpoints import CompactionPlan, plan_compaction
from tests.policy.policy_helpers import assistant, call, numbered, result, user


def test_a_split_turn_names_the_seq_of_its_input() -> None:
    events = numbered(
        [user("root"), assistant(), user("the task", event_id="langchain:run-7"), call("x"), result("x"), assistant()]
    )
    p = plan_compaction(events, Config(keep_recent_tokens=15), token_counts=[10] * 6)
    assert isinstance(p, CompactionPlan)
    assert [e.seq for e in p.turn_prefix] == [3, 4, 5]
    assert (p.cut_meta.turn_start_event_id, p.cut_meta.turn_start_seq) == ("langchain:run-7", 3)


def test_a_cut_on_a_user_input_names_none() -> None:
    events = numbered([user("root"), assistant(), user(), assistant(), user(), assistant()])
    p = plan_compaction(events, Config(keep_recent_tokens=20), token_counts=[10] * 6)
    assert isinstance(p, CompactionPlan)
    assert p.turn_prefix == () and p.cut_meta.turn_start_seq is None

"""[Policy] Whether prompts show the current turn's compacted input again: one decision for the prompt
and the compaction planner, on the same per-event estimates (review r61-R, finding 8)."""

from __future__ import annotations

import pytest

from aiden.events import SessionEvent
from aiden.policy.cutpoints import shows_compacted_input
from aiden.policy.tokens import (
    CL100K,
    MESSAGE_OVERHEAD_TOKENS,
    estimate_event_tokens,
    estimate_event_tokens_by,
    estimate_tokens,
)


@pytest.mark.parametrize(
    ("kept", "shown", "trigger", "expected"),
    [
        (100, 3899, 4000, True),  # one under the trigger
        (100, 3900, 4000, False),  # at the trigger: the trigger fires there
        (0, 5000, 4000, False),  # the input alone is over it
        (0, 0, 1, True),
    ],
)
def test_shown_only_while_the_kept_inputs_and_it_stay_under_the_trigger(
    kept: int, shown: int, trigger: int, expected: bool
) -> None:
    assert shows_compacted_input(kept, shown, trigger) is expected


def test_the_prompt_side_estimate_counts_an_event_as_the_planner_does() -> None:
    call = SessionEvent(type="tool_call", role="assistant", tool_name="open_file", tool_args='{"path": "a.py"}')
    text = SessionEvent(type="user_input", content="Fix the failing test in fields.py, please.")
    for event in (call, text):
        by = estimate_event_tokens_by(event, lambda t: estimate_tokens(t, CL100K))
        assert by == estimate_event_tokens(event, CL100K)
    assert estimate_event_tokens_by(text, len) == MESSAGE_OVERHEAD_TOKENS + len(text.content)

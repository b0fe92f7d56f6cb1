"""Invariants of govern_events and trim_replay over random sessions (hypothesis)."""

from __future__ import annotations

import msgspec
from gov_helpers import last_user_index, not_acted_on, partner_calls, sessions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiden.context.governance import govern_events, stub_seq, trim_replay
from aiden.context.prompt import PromptLayers, build_messages, validate_chat_sequence
from aiden.events import SessionEvent
from aiden.policy.cutpoints import legal_cut_points
from aiden.testing.usage import messages_tokens

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LAYERS = PromptLayers(role_identity="You are a coding agent.", tools="read_file, run, search")

KEEP_TURNS = st.integers(0, 3)
MAX_TOOL = st.sampled_from([1, 50, 500, 2000])


def render(events: object) -> list[dict[str, object]]:
    return build_messages(layers=LAYERS, hot_window=events).messages  # type: ignore[arg-type]


@SETTINGS
@given(events=sessions(), keep_turns=KEEP_TURNS, max_tool=MAX_TOOL, keep_steps=st.integers(0, 3))
def test_governed_prompt_is_valid_smaller_and_stubs_name_their_original(
    events: list[SessionEvent], keep_turns: int, max_tool: int, keep_steps: int
) -> None:
    governed = govern_events(events, keep_turns=keep_turns, max_tool_tokens=max_tool, keep_steps=keep_steps)
    assert len(governed.events) == len(events)

    before, after = render(events), render(governed.events)
    assert validate_chat_sequence(after) == []
    assert messages_tokens(after) <= messages_tokens(before)
    assert governed.tokens_after <= governed.tokens_before
    assert (governed.tokens_after < governed.tokens_before) == bool(governed.stubbed_seqs)
    # Same message structure: only texts change.
    assert [(m["role"], m.get("tool_call_id"), m.get("tool_calls")) for m in after] == [
        (m["role"], m.get("tool_call_id"), m.get("tool_calls")) for m in before
    ]

    by_seq = {e.seq: e for e in events}
    changed = [g for g, e in zip(governed.events, events, strict=True) if g != e]
    assert tuple(g.seq for g in changed) == governed.stubbed_seqs
    for g in changed:
        assert g.type == "tool_result"
        named = stub_seq(g.content)
        assert named == g.seq
        original = by_seq[named]
        assert msgspec.structs.replace(g, content=original.content) == original
        assert original.pinned is None

    # Results the agent has not acted on are never stubbed.
    for i in not_acted_on(events):
        assert governed.events[i] == events[i]
    # Results answering a pinned call are never stubbed.
    for r, q in partner_calls(events).items():
        if events[q].pinned is not None:
            assert governed.events[r] == events[r]
    if keep_steps == 0:
        current = last_user_index(events)
        assert governed.events[current:] == tuple(events[current:])


@SETTINGS
@given(events=sessions(), keep_turns=KEEP_TURNS, max_tool=MAX_TOOL, data=st.data())
def test_within_a_turn_the_governed_prompt_only_grows_at_its_end(
    events: list[SessionEvent], keep_turns: int, max_tool: int, data: st.DataObject
) -> None:
    """Turn mode keeps the provider's prefix cache valid across the model calls of one turn."""
    current = last_user_index(events)
    first_step = next(
        (i for i in range(current, len(events)) if events[i].type in ("assistant_output", "tool_call")), None
    )
    if first_step is None:
        return
    k = data.draw(st.integers(first_step + 1, len(events)))
    full = govern_events(events, keep_turns=keep_turns, max_tool_tokens=max_tool)
    part = govern_events(events[:k], keep_turns=keep_turns, max_tool_tokens=max_tool)
    assert part.events == full.events[:k]
    # A model call happens where the next model step begins (or at the end), with no result pending.
    step_start = k == len(events) or events[k].type == "assistant_output" or (
        events[k].type == "tool_call" and events[k - 1].type not in ("assistant_output", "tool_call")
    )
    pending = [q for r, q in partner_calls(events).items() if q < k <= r]
    if step_start and not pending:
        rendered = render(part.events)
        assert rendered == render(full.events)[: len(rendered)]


@SETTINGS
@given(events=sessions(), keep_steps=st.integers(1, 3))
def test_step_mode_keeps_the_newest_steps_whole(events: list[SessionEvent], keep_steps: int) -> None:
    governed = govern_events(events, keep_turns=0, max_tool_tokens=1, keep_steps=keep_steps, min_savings_tokens=1)
    current = last_user_index(events)
    step_starts = [
        i for i in range(current, len(events))
        if events[i].type in ("assistant_output", "tool_call")
        and (i == current or events[i - 1].type not in ("assistant_output", "tool_call"))
    ]
    start = step_starts[-keep_steps] if len(step_starts) >= keep_steps else current
    assert governed.events[start:] == tuple(events[start:])


def _kept_mask(events: list[SessionEvent]) -> list[bool]:
    users = [i for i, e in enumerate(events) if e.type == "user_input"]
    pairs = partner_calls(events)
    group = [pairs.get(i, i) for i in range(len(events))]
    roots = {users[0], users[-1]} if users else set()
    kept_groups = {group[i] for i, e in enumerate(events) if i in roots or e.pinned is not None}
    return [group[i] in kept_groups for i in range(len(events))]


@SETTINGS
@given(events=sessions(), bound=st.integers(0, 40))
def test_trim_replay_keeps_root_pins_and_pairs_and_opens_legally(events: list[SessionEvent], bound: int) -> None:
    out = trim_replay(events, max_messages=bound, keep=lambda e: e.pinned is not None)
    n = len(events)
    if bound == 0 or n <= bound:
        assert out == events
        return
    seqs = [e.seq for e in out]
    assert seqs == sorted(seqs) and set(seqs) <= {e.seq for e in events}
    kept_seqs = set(seqs)
    users = [e for e in events if e.type == "user_input"]
    if users:
        assert users[0].seq in kept_seqs and users[-1].seq in kept_seqs
    assert all(e.seq in kept_seqs for e in events if e.pinned is not None)
    for r, q in partner_calls(events).items():
        assert (events[r].seq in kept_seqs) == (events[q].seq in kept_seqs)
    assert validate_chat_sequence(render(out)) == []

    kept = _kept_mask(events)
    # The replayed list is the kept events before some cut c plus everything from c on.
    c = n
    while c > 0 and events[c - 1].seq in kept_seqs:
        c -= 1
    if len(out) < n:
        cuts = [
            cut for cut in legal_cut_points(events)
            if cut >= c and out == [e for i, e in enumerate(events) if i >= cut or kept[i]]
        ]
        assert cuts
        assert all(events[cut].type not in ("tool_result", "system_event") for cut in cuts)
    if len(out) > bound:
        # Only when no legal cut meets the bound.
        assert all(sum(kept[:cut]) + n - cut > bound for cut in legal_cut_points(events))


@SETTINGS
@given(events=sessions(), bound=st.integers(1, 30), keep_turns=KEEP_TURNS, max_tool=MAX_TOOL)
def test_trim_then_govern_is_valid(events: list[SessionEvent], bound: int, keep_turns: int, max_tool: int) -> None:
    """The wiring order: trim the replay, then govern it."""
    trimmed = trim_replay(events, max_messages=bound)
    governed = govern_events(trimmed, keep_turns=keep_turns, max_tool_tokens=max_tool)
    assert validate_chat_sequence(render(governed.events)) == []
    assert messages_tokens(render(governed.events)) <= messages_tokens(render(events))

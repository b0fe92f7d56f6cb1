"""Prompt assembly: native hot-window messages, always a valid chat sequence."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from aiden.context.prompt import (
    MISSING_RESULT,
    PromptLayers,
    build_messages,
    events_to_messages,
    validate_chat_sequence,
)
from aiden.events import SessionEvent


def ev(seq: int, type_: str, content: str = "", **kw: object) -> SessionEvent:
    return SessionEvent(type=type_, content=content, seq=seq, **kw)  # type: ignore[arg-type]


def test_layers_in_seed_order_and_native_messages() -> None:
    layers = PromptLayers(
        role_identity="ROLE", base_instruction="BASE", defaults="DEFAULTS", skills="SKILLS",
        runtime_context="RUNTIME", role_rules="RULES", tools="TOOLS",
    )
    hot = [
        ev(1, "user_input", "goal"),
        ev(2, "assistant_output", "looking"),
        ev(3, "tool_call", tool_name="ls", tool_call_id="a", tool_args='{"d": "."}'),
        ev(4, "tool_result", "x.py", tool_call_id="a"),
        ev(5, "screen_context", "screen: editor"),
    ]
    built = build_messages(layers=layers, hot_window=hot, session_summary="SUMMARY", long_term="PROFILE", cache_friendly=False)
    system = built.messages[0]["content"]
    order = [system.index(x) for x in ("ROLE", "BASE", "DEFAULTS", "SKILLS", "RUNTIME", "RULES", "TOOLS", "SUMMARY", "PROFILE")]
    assert order == sorted(order)
    assert built.messages[1:] == [
        {"role": "user", "content": "goal"},
        {
            "role": "assistant",
            "content": "looking",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "ls", "arguments": '{"d": "."}'}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "x.py"},
        {"role": "system", "content": "screen: editor"},
    ]
    assert not any("Conversation history" in str(m["content"]) for m in built.messages)


def test_cache_friendly_prefix_is_stable_across_runtime_context() -> None:
    a = build_messages(layers=PromptLayers(role_identity="R", runtime_context="t=1"), hot_window=[], session_summary="S")
    b = build_messages(layers=PromptLayers(role_identity="R", runtime_context="t=2"), hot_window=[], session_summary="S")
    c = build_messages(layers=PromptLayers(role_identity="R", runtime_context="t=2"), hot_window=[], session_summary="S2")
    assert a.prefix_fingerprint == b.prefix_fingerprint != c.prefix_fingerprint
    assert a.messages[0] == b.messages[0]
    assert a.messages[1] == {"role": "system", "content": "t=1"}


def test_orphans_are_repaired_not_sent() -> None:
    hot = [
        ev(5, "tool_result", "result of a compacted call", tool_call_id="gone", tool_name="grep"),
        ev(6, "user_input", "next"),
        ev(7, "tool_call", tool_name="run", tool_call_id="b"),
    ]
    msgs, repairs = events_to_messages(hot)
    assert repairs == 2
    assert validate_chat_sequence(msgs) == []
    assert msgs[0] == {"role": "system", "content": "Earlier tool result grep:\nresult of a compacted call"}
    assert msgs[-1] == {"role": "tool", "tool_call_id": "b", "content": MISSING_RESULT}


def test_split_turn_context_opens_the_retained_window() -> None:
    hot = [ev(1, "user_input", "root"), ev(9, "tool_call", tool_call_id="z", tool_name="t"), ev(10, "tool_result", "r", tool_call_id="z")]
    msgs, _ = events_to_messages(hot, split_turn_context="CTX", split_before_seq=9)
    assert [m["role"] for m in msgs] == ["user", "system", "assistant", "tool"]
    assert msgs[1]["content"] == "CTX"


@st.composite
def sessions(draw: st.DrawFn) -> list[SessionEvent]:
    out: list[SessionEvent] = []
    seq = 0
    n_turns = draw(st.integers(0, 8))
    calls = 0
    for _ in range(n_turns):
        seq += 1
        out.append(ev(seq, "user_input", "u"))
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["calls", "text", "system", "orphan"]))
            if kind == "calls":
                ids = []
                for _ in range(draw(st.integers(1, 3))):
                    calls += 1
                    seq += 1
                    ids.append(f"c{calls}")
                    out.append(ev(seq, "tool_call", tool_name="t", tool_call_id=f"c{calls}"))
                for cid in draw(st.permutations(ids)):
                    if draw(st.booleans()) or True:
                        if draw(st.integers(0, 4)) == 0:
                            continue  # result missing
                        seq += 1
                        out.append(ev(seq, "tool_result", "r", tool_call_id=cid))
            elif kind == "text":
                seq += 1
                out.append(ev(seq, "assistant_output", "a"))
            elif kind == "system":
                seq += 1
                out.append(ev(seq, draw(st.sampled_from(["system_event", "screen_context"])), "s"))
            else:
                seq += 1
                out.append(ev(seq, "tool_result", "orphan", tool_call_id=f"x{seq}"))
    # Compaction can cut anywhere legal; model "any number of compactions" as a random prefix drop.
    drop = draw(st.integers(0, len(out)))
    return out[drop:]


@settings(max_examples=300, deadline=None)
@given(sessions())
def test_build_messages_is_always_a_valid_chat_sequence(hot: list[SessionEvent]) -> None:
    built = build_messages(layers=PromptLayers(role_identity="r"), hot_window=hot, session_summary="s")
    assert validate_chat_sequence(built.messages) == []


def test_reused_tool_call_ids_are_made_unique() -> None:
    hot = [
        ev(1, "user_input", "go"),
        ev(2, "tool_call", tool_name="t", tool_call_id="x"),
        ev(3, "tool_result", "r1", tool_call_id="x"),
        ev(4, "tool_call", tool_name="t", tool_call_id="x"),
        ev(5, "tool_result", "r2", tool_call_id="x"),
    ]
    msgs, repairs = events_to_messages(hot)
    assert repairs == 0
    assert validate_chat_sequence(msgs) == []
    assert [m.get("tool_call_id") for m in msgs if m["role"] == "tool"] == ["x", "x_seq4"]
    assert [m["content"] for m in msgs if m["role"] == "tool"] == ["r1", "r2"]


def test_retracted_events_and_retractions_are_not_shown() -> None:
    from aiden.events import RETRACTS

    events = [
        SessionEvent(type="user_input", role="user", content="first", seq=1),
        SessionEvent(type="user_input", role="user", content="oops", seq=2),
        SessionEvent(type="system_event", content="[retracted 2]", meta={RETRACTS: 2}, seq=3),
        SessionEvent(type="assistant_output", role="assistant", content="answer", seq=4),
    ]
    messages, repairs = events_to_messages(events)
    assert messages == [{"role": "user", "content": "first"}, {"role": "assistant", "content": "answer"}]
    assert repairs == 0

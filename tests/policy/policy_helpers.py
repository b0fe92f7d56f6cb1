# ruff: noqa: RUF001  (Chinese samples use full-width punctuation)
"""Event builders and hypothesis strategies shared by the policy tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from hypothesis import strategies as st

from aiden.events import SessionEvent
from aiden.policy.cutpoints import CompactionPlan, classify


def numbered(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """``events`` with ``seq`` 1..n (ids ``seq-1``..), as the session writer would store them."""
    return [msgspec.structs.replace(e, seq=i + 1) for i, e in enumerate(events)]


def user(content: str = "u", **kw: Any) -> SessionEvent:
    return SessionEvent(type="user_input", role="user", content=content, **kw)


def assistant(content: str = "a", **kw: Any) -> SessionEvent:
    return SessionEvent(type="assistant_output", role="assistant", content=content, **kw)


def call(call_id: str | None, **kw: Any) -> SessionEvent:
    return SessionEvent(
        type="tool_call", role="assistant", tool_call_id=call_id, tool_name="t", **kw
    )


def result(call_id: str | None, content: str = "r", **kw: Any) -> SessionEvent:
    return SessionEvent(
        type="tool_result", role="tool", tool_call_id=call_id, content=content, **kw
    )


def system(content: str = "s", **kw: Any) -> SessionEvent:
    return SessionEvent(type="system_event", role="system", content=content, **kw)


def screen(content: str = "screen", **kw: Any) -> SessionEvent:
    return SessionEvent(type="screen_context", content=content, **kw)


def seqs(events: Sequence[SessionEvent]) -> list[int]:
    return [e.seq for e in events]


def partner_calls(events: Sequence[SessionEvent]) -> dict[int, int]:
    """Result index -> call index, computed independently of the planner.

    By ``tool_call_id`` among earlier calls (latest wins), else the nearest
    earlier call.
    """
    pairs: dict[int, int] = {}
    for r, event in enumerate(events):
        if event.type != "tool_result" or event.synthetic:
            continue
        candidates = [
            q for q in range(r) if events[q].type == "tool_call" and not events[q].synthetic
        ]
        by_id = [
            q
            for q in candidates
            if event.tool_call_id is not None and events[q].tool_call_id == event.tool_call_id
        ]
        if by_id:
            pairs[r] = by_id[-1]
        elif candidates:
            pairs[r] = candidates[-1]
    return pairs


def parts(events: Sequence[SessionEvent], plan: CompactionPlan) -> list[str]:
    """For each input event, the part of ``plan`` holding it (identity, not equality)."""
    where: dict[int, str] = {}
    for name, group in (
        ("compacted", plan.history + plan.turn_prefix),
        ("kept", plan.kept),
        ("retained", plan.retained),
    ):
        for event in group:
            assert id(event) not in where, "an event appears twice in the plan"
            where[id(event)] = name
    assert len(where) == len(events), "the plan does not partition the input"
    return [where[id(e)] for e in events]


# --- hypothesis --------------------------------------------------------------------

_TEXT = st.one_of(
    st.text(alphabet='abcdefghij klmnop,.:{}"\n0123456789', max_size=300),
    st.text(alphabet="你好世界的是在了一不我们这中国，。", max_size=120),
    st.sampled_from(["", "ok", "def f(x):\n    return x\n", "一二三 mixed 文本 text"]),
)


@st.composite
def event_streams(draw: st.DrawFn, max_turns: int = 8) -> list[SessionEvent]:
    """Random agent sessions: turns of user input, assistant output, tool call/result
    pairs (sequential, parallel, id-less, with other events in between), system
    events, screen context, synthetic and pinned events, ASCII and CJK text.
    """
    events: list[SessionEvent] = []
    call_no = 0

    def extra() -> dict[str, Any]:
        fields: dict[str, Any] = {"content": draw(_TEXT)}
        if draw(st.integers(0, 9)) == 0:
            fields["pinned"] = "load-bearing"
        return fields

    for _ in range(draw(st.integers(0, max_turns))):
        if draw(st.booleans()) or not events:
            events.append(user(**extra()))
        for _ in range(draw(st.integers(0, 5))):
            step = draw(st.integers(0, 7))
            if step == 0:
                events.append(assistant(**extra()))
            elif step == 1:
                call_no += 1
                events.append(call(f"c{call_no}", **extra()))
                events.append(result(f"c{call_no}", **extra()))
            elif step == 2:  # parallel calls, results in another order, noise in between
                ids = []
                for _ in range(draw(st.integers(2, 3))):
                    call_no += 1
                    ids.append(f"c{call_no}")
                    events.append(call(ids[-1], **extra()))
                for cid in draw(st.permutations(ids)):
                    if draw(st.booleans()):
                        events.append(
                            draw(st.sampled_from([system(), screen(), assistant("thinking")]))
                        )
                    events.append(result(cid, **extra()))
            elif step == 3:  # no ids: paired by adjacency
                events.append(call(None, **extra()))
                events.append(result(None, **extra()))
            elif step == 4:
                events.append(system(**extra()))
            elif step == 5:
                events.append(screen(**extra()))
            elif step == 6:
                events.append(SessionEvent(type="role_output", role="assistant", **extra()))
            else:
                events.append(
                    SessionEvent(type="system_event", role="system", synthetic=True, **extra())
                )
        events.append(assistant(**extra()))
    return numbered(events)


def opens_legally(plan: CompactionPlan) -> bool:
    """The hot window opens on a legal cut, possibly behind pulled-in leading context."""
    for event in plan.retained:
        if event.type == "tool_result":
            return False
        if classify(event) != "forbidden":
            return True
        if not (event.synthetic or event.type in ("system_event", "screen_context")):
            return False
    return False

"""Event builders, generated sessions and independent reference checks for the governance tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from hypothesis import strategies as st

from aiden.demo import generate_scenario, turn_events
from aiden.events import SessionEvent


def numbered(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """``events`` with ``seq`` 1..n, as the session writer stores them."""
    return [msgspec.structs.replace(e, seq=i + 1) for i, e in enumerate(events)]


def user(content: str = "u", **kw: Any) -> SessionEvent:
    return SessionEvent(type="user_input", role="user", content=content, **kw)


def assistant(content: str = "a", **kw: Any) -> SessionEvent:
    return SessionEvent(type="assistant_output", role="assistant", content=content, **kw)


def call(call_id: str | None, name: str = "read_file", args: str = '{"path": "src/app.py"}', **kw: Any) -> SessionEvent:
    return SessionEvent(type="tool_call", role="assistant", tool_call_id=call_id, tool_name=name, tool_args=args, **kw)


def result(call_id: str | None, content: str = "r", **kw: Any) -> SessionEvent:
    return SessionEvent(type="tool_result", role="tool", tool_call_id=call_id, content=content, **kw)


def system(content: str = "s", **kw: Any) -> SessionEvent:
    return SessionEvent(type="system_event", role="system", content=content, **kw)


def output(chars: int, tag: str = "") -> str:
    """A tool output of exactly ``chars`` characters (numbered log lines)."""
    lines: list[str] = []
    size = 0
    j = 0
    while size < chars:
        line = f"{tag}line {j}: processed {j * 37 % 1000} items in {j % 97}ms status=ok\n"
        lines.append(line)
        size += len(line)
        j += 1
    return "".join(lines)[:chars]


def scenario_events(seed: int, turns: int) -> list[SessionEvent]:
    """The generated coding session of :mod:`aiden.demo` as unnumbered events."""
    events: list[SessionEvent] = []
    for turn in generate_scenario(seed=seed, turns=turns).turns:
        events.append(user(turn.user))
        events.extend(turn_events(turn))
        events.append(assistant(turn.assistant))
    return events


_SIZES = st.sampled_from([0, 12, 300, 1500, 6000, 12000])


@st.composite
def sessions(draw: st.DrawFn) -> list[SessionEvent]:
    """Random numbered sessions: turns of model steps with (parallel) tool calls and results.

    Covers a leading turn fragment (the hot window opened mid-turn), id-less
    text-action results, parallel calls answered in any order, missing
    results, system events, pins, large outputs, and a last turn that may end
    before the agent acted on its newest results. Call ids are unique (the
    prompt builder pairs by id).
    """
    events: list[SessionEvent] = []
    counter = 0

    def steps(n: int) -> None:
        nonlocal counter
        for _ in range(n):
            if draw(st.booleans()):
                events.append(assistant(f"thinking {counter}"))
            width = draw(st.integers(1, 3))
            idless = width == 1 and draw(st.integers(0, 4)) == 0
            ids: list[str | None] = []
            for _ in range(width):
                counter += 1
                cid = None if idless else f"c{counter}"
                ids.append(cid)
                pin = "keep this" if draw(st.integers(0, 12)) == 0 else None
                events.append(call(cid, name=draw(st.sampled_from(["read_file", "run", "search"])), args=f'{{"n": {counter}}}', pinned=pin))
            order = draw(st.permutations(range(width)))
            for k in order:
                if draw(st.integers(0, 15)) == 0:
                    continue  # a call whose result was never recorded
                pin = "needed" if draw(st.integers(0, 12)) == 0 else None
                events.append(result(ids[k], output(draw(_SIZES), tag=f"{counter}/{k} "), pinned=pin))
            if draw(st.integers(0, 8)) == 0:
                events.append(system(f"note {counter}"))

    if draw(st.booleans()):
        steps(draw(st.integers(1, 2)))
    for t in range(draw(st.integers(0, 5))):
        events.append(user(f"task {t}", pinned="root" if draw(st.integers(0, 10)) == 0 else None))
        steps(draw(st.integers(0, 4)))
        if draw(st.booleans()):
            events.append(assistant(f"done {t}"))
    return numbered(events)


def partner_calls(events: Sequence[SessionEvent]) -> dict[int, int]:
    """Result index -> call index, computed independently: by id among earlier calls (latest wins), else the nearest earlier call."""
    pairs: dict[int, int] = {}
    for r, event in enumerate(events):
        if event.type != "tool_result":
            continue
        earlier = [q for q in range(r) if events[q].type == "tool_call"]
        by_id = [q for q in earlier if event.tool_call_id is not None and events[q].tool_call_id == event.tool_call_id]
        if by_id:
            pairs[r] = by_id[-1]
        elif earlier:
            pairs[r] = earlier[-1]
    return pairs


def last_user_index(events: Sequence[SessionEvent]) -> int:
    """Index of the last user input, 0 when there is none (the whole list is then the current turn)."""
    return max((i for i, e in enumerate(events) if e.type == "user_input"), default=0)


def not_acted_on(events: Sequence[SessionEvent]) -> set[int]:
    """Indices of tool results with no assistant output or tool call after them."""
    last = max((i for i, e in enumerate(events) if e.type in ("assistant_output", "tool_call")), default=-1)
    return {i for i, e in enumerate(events) if e.type == "tool_result" and i > last}

"""IncrementalBody renders exactly what governing and rendering the whole hot window gives (#35).

The prompt builder keeps the settled prefix of the last call and renders only
the rest; every prompt must still equal the whole-window render, through
appends, compactions that drop the window's start, retractions, reused and
missing call ids, orphan results, pins and synthetic events.
"""

from __future__ import annotations

import msgspec
from gov_helpers import assistant, call, output, result, system, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiden.context.governance import Governance, govern_events
from aiden.context.prompt import IncrementalBody, estimate_messages, events_to_messages
from aiden.events import RETRACTS, SessionEvent

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def quarter(text: str) -> int:
    return len(text) // 4


@st.composite
def histories(draw: st.DrawFn) -> list[SessionEvent]:
    """Numbered, timestamped events of agent turns, with the irregular shapes recorders produce."""
    events: list[SessionEvent] = []
    ids = draw(st.sampled_from(["unique", "reused", "none"]))
    for n in range(draw(st.integers(1, 40))):
        kind = draw(
            st.sampled_from(
                ["user", "user", "assistant", "call", "call", "result", "result", "system", "retract", "pinned",
                 "synthetic_user", "orphan", "late"]
            )
        )
        cid = {"unique": f"c{n}", "reused": f"c{n % 3}", "none": None}[ids]
        size = draw(st.sampled_from([3, 400, 3000]))
        match kind:
            case "user":
                events.append(user(f"question {n}"))
            case "synthetic_user":
                events.append(user(f"aiden's note {n}", synthetic=True))
            case "assistant":
                events.append(assistant(f"step {n}"))
            case "call":
                events.append(call(cid, args=f'{{"path": "f{n}.py"}}'))
            case "result":
                # Answers the newest call when there is one (by its id), else is an orphan.
                calls = [e for e in events if e.type == "tool_call"]
                target = calls[-1].tool_call_id if calls else f"gone{n}"
                events.append(result(target, output(size, tag=f"r{n} ")))
            case "late":
                # A result recorded turns after its call (and perhaps after an earlier result).
                calls = [e for e in events if e.type == "tool_call"]
                target = draw(st.sampled_from(calls)).tool_call_id if calls else None
                events.append(result(target, output(size, tag=f"l{n} ")))
            case "orphan":
                events.append(result(f"gone{n}", output(size, tag=f"o{n} ")))
            case "system":
                events.append(system(f"screen {n}"))
            case "retract":
                target = draw(st.integers(1, n + 1))
                events.append(system("withdrawn", meta={RETRACTS: target}))
            case "pinned":
                events.append(result(cid, output(size, tag=f"p{n} "), pinned="keep"))
    return [msgspec.structs.replace(e, seq=i + 1, timestamp=float(i + 1)) for i, e in enumerate(events)]


def whole(
    hot: list[SessionEvent], governance: Governance | None, ctx: str, before: int | None
) -> tuple[list[dict[str, object]], int, tuple[int, ...], int]:
    events, stubbed = hot, ()
    if governance is not None:
        governed = govern_events(
            hot,
            keep_turns=governance.keep_turns,
            max_tool_tokens=governance.max_tool_tokens,
            keep_steps=governance.keep_steps,
            estimate=quarter,
            oversized_tokens=governance.oversized_tokens,
        )
        events, stubbed = list(governed.events), governed.stubbed_seqs
    messages, repairs = events_to_messages(events, split_turn_context=ctx, split_before_seq=before)
    return messages, estimate_messages(messages, quarter), stubbed, repairs


GOVERNANCE = st.one_of(
    st.none(),
    st.builds(
        Governance,
        keep_turns=st.integers(0, 3),
        max_tool_tokens=st.sampled_from([1, 200, 5000]),
        keep_steps=st.integers(0, 2),
        oversized_tokens=st.sampled_from([None, 600]),
    ),
)


@SETTINGS
@given(events=histories(), governance=GOVERNANCE, drops=st.lists(st.integers(0, 6), max_size=4), data=st.data())
def test_every_call_equals_the_whole_window_rendered_again(
    events: list[SessionEvent], governance: Governance | None, drops: list[int], data: st.DataObject
) -> None:
    body = IncrementalBody(quarter)
    start = 0
    ctx, before = "", None
    for end in range(1, len(events) + 1):
        if drops and data.draw(st.booleans()):
            # A compaction: the window loses its start, the split-turn context may change.
            start = min(end - 1, start + drops.pop())
            ctx, before = (f"turn context {start}", events[start].seq) if data.draw(st.booleans()) else ("", None)
        hot = events[start:end]
        got = body.render(hot, governance, split_turn_context=ctx, split_before_seq=before)
        assert (got.messages, got.tokens, got.stubbed_seqs, got.repairs) == whole(hot, governance, ctx, before)


def test_a_long_window_renders_only_what_changed() -> None:
    """Turns of an agent loop: once settled, a turn is not governed or rendered again."""
    rendered: list[int] = []

    def counting(text: str) -> int:
        rendered.append(len(text))
        return quarter(text)

    events: list[SessionEvent] = []
    for n in range(200):
        events += [user(f"question {n}"), call(f"c{n}"), result(f"c{n}", output(2000, tag=f"{n} ")), assistant("ok")]
    events = [msgspec.structs.replace(e, seq=i + 1, timestamp=float(i + 1)) for i, e in enumerate(events)]
    governance = Governance(keep_turns=2, max_tool_tokens=5000)
    body = IncrementalBody(counting)
    body.render(events[:-4], governance)
    rendered.clear()
    got = body.render(events, governance)
    assert (got.messages, got.tokens, got.stubbed_seqs) == whole(events, governance, "", None)[:3]
    # The last call estimated the texts of the last few turns only, not the 200 of the window.
    assert len(rendered) <= 4 * 4 * 3


def test_messages_handed_out_do_not_change_the_next_prompt() -> None:
    events = [
        msgspec.structs.replace(e, seq=i + 1, timestamp=float(i + 1))
        for i, e in enumerate([user("a"), assistant("b"), user("c"), assistant("d"), user("e"), assistant("f")])
    ]
    body = IncrementalBody(quarter)
    first = body.render(events[:5], None)
    first.messages[0]["content"] = "changed by the caller"
    again = body.render(events, None)
    assert again.messages[0] == {"role": "user", "content": "a"}

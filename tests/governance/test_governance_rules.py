"""govern_events, render_stub and trim_replay on hand-built sessions (exact results)."""

from __future__ import annotations

import itertools

import msgspec
import pytest
from gov_helpers import assistant, call, numbered, output, result, system, user

from aiden.context.governance import (
    DEFAULT_MIN_SAVINGS_TOKENS,
    STUB_PREFIX,
    govern_events,
    render_stub,
    stub_seq,
    trim_replay,
)
from aiden.events import SessionEvent
from aiden.policy.tokens import MESSAGE_OVERHEAD_TOKENS


def quarter(text: str) -> int:
    """A transparent estimate for exact token arithmetic: one token per 4 characters."""
    return (len(text) + 3) // 4


def cost(event: SessionEvent) -> int:
    return MESSAGE_OVERHEAD_TOKENS + sum(quarter(t or "") for t in (event.content, event.tool_args, event.tool_name))


ROWS = "".join(f"row {i:03d}\n" for i in range(100))  # 800 characters


def test_stub_text_names_tool_arguments_size_and_seq_with_head_and_tail() -> None:
    r = result("a", ROWS, seq=42)
    c = call("a", name="read_file", args='{"path": "src/app.py", "limit": 100}', seq=41)
    stub = render_stub(r, c, tokens=200, head_chars=20, tail_chars=12)
    assert stub == (
        "[tool output trimmed, seq 42: read_file(path=\"src/app.py\", limit=100) returned 800 chars"
        " ~200 tokens. Re-run the tool, or call recall_session_chunks with seqs=[42], to see it in full.]\n"
        "row 000\nrow 001\n[...]\nrow 099\n"
    )
    assert stub_seq(stub) == 42
    assert render_stub(r, None, tokens=200, head_chars=0, tail_chars=0) == (
        "[tool output trimmed, seq 42: tool() returned 800 chars ~200 tokens. Re-run the tool,"
        " or call recall_session_chunks with seqs=[42], to see it in full.]"
    )
    raw = call(None, name="bash", args="ls -la    /tmp", seq=1)
    assert render_stub(r, raw, tokens=7, head_chars=0, tail_chars=9).startswith(
        "[tool output trimmed, seq 42: bash(ls -la /tmp) returned 800 chars ~7 tokens."
    )
    long_args = call("a", args='{"pattern": "' + "x" * 300 + '"}')
    # Each argument value is clipped to 80 characters of JSON.
    assert 'read_file(pattern="' + "x" * 76 + '...) returned' in render_stub(r, long_args, tokens=1)


def test_stub_seq_only_reads_stubs() -> None:
    assert stub_seq("plain output") is None
    assert stub_seq(f"note: {STUB_PREFIX}5: x") is None
    assert stub_seq(f"{STUB_PREFIX}17: run() returned 3 chars") == 17


def three_turns() -> list[SessionEvent]:
    return numbered([
        user("first task"),                     # 1  turn 0
        assistant("reading"),                   # 2
        call("a"),                              # 3
        result("a", output(6000, "A ")),        # 4  large (1500 > 1000) and old (turn 0 is not among the newest 2): stub
        assistant("read it"),                   # 5
        user("second task"),                    # 6  turn 1
        call("b", name="run", args='{"cmd": "pytest"}'),  # 7
        result("b", output(6000, "B ")),        # 8  large, but among the newest 2 turns: whole
        call("c"),                              # 9
        result("c", output(2000, "C ")),        # 10 small: whole
        assistant("tests pass"),                # 11
        user("third task"),                     # 12 turn 2 (current)
        call("d"),                              # 13
        result("d", output(20000, "D ")),       # 14 current turn: whole
        assistant("looked"),                    # 15
        call("e"),                              # 16
        result("e", output(9000, "E ")),        # 17 not acted on yet: whole
    ])


def test_old_and_large_results_are_stubbed_and_the_newest_turns_are_whole() -> None:
    events = three_turns()
    governed = govern_events(events, keep_turns=1, max_tool_tokens=1000, estimate=quarter)
    assert governed.stubbed_seqs == (4, 8)
    changed = [i for i, (g, e) in enumerate(zip(governed.events, events, strict=True)) if g != e]
    assert changed == [3, 7]
    for i in changed:
        g, e = governed.events[i], events[i]
        assert msgspec.structs.replace(g, content=e.content) == e
        assert stub_seq(g.content) == e.seq
    assert governed.events[7].content.startswith(
        "[tool output trimmed, seq 8: run(cmd=\"pytest\") returned 6,000 chars ~1,500 tokens."
    )
    assert governed.tokens_before == sum(cost(e) for e in events)
    assert governed.tokens_after == sum(cost(e) for e in governed.events)
    assert governed.saved_tokens == (1500 - quarter(governed.events[3].content)) + (
        1500 - quarter(governed.events[7].content)
    )

    # The newest keep_turns turns stay whole however large their results (the current turn's
    # 5,000-token one too); older results go only when larger than max_tool_tokens.
    assert govern_events(events, keep_turns=2, max_tool_tokens=1000, estimate=quarter).stubbed_seqs == (4,)
    assert govern_events(events, keep_turns=3, max_tool_tokens=1, estimate=quarter).stubbed_seqs == ()
    assert govern_events(events, keep_turns=1, max_tool_tokens=1600, estimate=quarter).stubbed_seqs == ()
    assert govern_events(events, keep_turns=0, max_tool_tokens=400, estimate=quarter).stubbed_seqs == (4, 8, 10)


def test_governing_twice_changes_nothing_more() -> None:
    once = govern_events(three_turns(), keep_turns=0, max_tool_tokens=1)
    twice = govern_events(once.events, keep_turns=0, max_tool_tokens=1)
    assert twice.events == once.events
    assert twice.stubbed_seqs == ()


def test_a_result_is_only_stubbed_after_the_agent_acted_on_it() -> None:
    before_action = numbered([
        user("one"), call("a"), result("a", output(8000)),  # the run ended before the agent answered
        user("two"),
    ])
    assert govern_events(before_action, keep_turns=0, max_tool_tokens=1).stubbed_seqs == ()
    acted = numbered([*before_action, assistant("on it")])
    assert govern_events(acted, keep_turns=0, max_tool_tokens=1).stubbed_seqs == (3,)


def test_pins_unstored_events_and_small_savings_are_left_alone() -> None:
    events = numbered([
        user("one"),
        call("a"), result("a", output(8000), pinned="the schema"),
        call("b", pinned="keep with result"), result("b", output(8000)),
        call("c"), result("c", output(8000)),
        call("d"), result("d", "short"),
        assistant("done"),
        user("two"),
    ])
    governed = govern_events(events, keep_turns=0, max_tool_tokens=1)
    assert governed.stubbed_seqs == (7,)
    unstored = [msgspec.structs.replace(e, seq=0) for e in events]
    assert govern_events(unstored, keep_turns=0, max_tool_tokens=1).stubbed_seqs == ()
    # A stub must save at least min_savings_tokens.
    saving = govern_events(events, keep_turns=0, max_tool_tokens=1, estimate=quarter).saved_tokens
    assert govern_events(
        events, keep_turns=0, max_tool_tokens=1, estimate=quarter, min_savings_tokens=saving + 1
    ).stubbed_seqs == ()
    assert DEFAULT_MIN_SAVINGS_TOKENS == 64


def test_parallel_and_idless_results_are_described_by_their_own_call() -> None:
    events = numbered([
        user("one"),
        assistant("three reads at once"),
        call("p", args='{"path": "a.py"}'), call("q", args='{"path": "b.py"}'),
        result("q", output(5000, "Q ")), result("p", output(5000, "P ")),
        call(None, name="bash", args='{"command": "ls"}'), result(None, output(5000, "L ")),
        assistant("done"),
        user("two"),
    ])
    governed = govern_events(events, keep_turns=0, max_tool_tokens=1)
    assert governed.stubbed_seqs == (5, 6, 8)
    assert governed.events[4].content.startswith(f'{STUB_PREFIX}5: read_file(path="b.py") returned 5,000 chars')
    assert governed.events[5].content.startswith(f'{STUB_PREFIX}6: read_file(path="a.py") returned 5,000 chars')
    assert governed.events[7].content.startswith(f'{STUB_PREFIX}8: bash(command="ls") returned 5,000 chars')
    assert governed.events[4].content.split("\n", 2)[1] == "Q line 0: processed 0 items in 0ms status=ok"


def agent_loop(steps: int) -> list[SessionEvent]:
    """One user input worked through ``steps`` model steps, each a call and a large result."""
    events = [user("fix the bug")]
    for s in range(steps):
        events += [call(f"s{s}"), result(f"s{s}", output(6000, f"{s} "))]
    return numbered(events)


def test_step_mode_horizon_moves_in_jumps_of_keep_steps() -> None:
    stubbed = {
        steps: govern_events(agent_loop(steps), keep_turns=2, max_tool_tokens=2000, keep_steps=2).stubbed_seqs
        for steps in range(1, 8)
    }
    # Result of step s has seq 2s + 3; the newest step's result is not acted on yet.
    assert stubbed == {
        1: (), 2: (), 3: (),
        4: (3, 5), 5: (3, 5),
        6: (3, 5, 7, 9), 7: (3, 5, 7, 9),
    }
    assert govern_events(agent_loop(7), keep_turns=2, max_tool_tokens=2000).stubbed_seqs == ()


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="keep_turns"):
        govern_events([], keep_turns=-1, max_tool_tokens=1)
    with pytest.raises(ValueError, match="max_tool_tokens"):
        govern_events([], keep_turns=0, max_tool_tokens=0)
    with pytest.raises(ValueError, match="keep_steps"):
        govern_events([], keep_turns=0, max_tool_tokens=1, keep_steps=-1)
    with pytest.raises(ValueError, match="max_messages"):
        trim_replay([], max_messages=-1)
    with pytest.raises(ValueError, match="cut_quantum"):
        trim_replay([], max_messages=1, cut_quantum=0)
    assert govern_events([], keep_turns=0, max_tool_tokens=1) == govern_events(
        [], keep_turns=0, max_tool_tokens=1
    )


def test_trim_replay_cuts_at_the_first_legal_point_that_meets_the_bound() -> None:
    events = numbered([
        user("root task"),                       # 1 root: kept
        call("a"), result("a", "x"),             # 2, 3
        assistant("ok"),                         # 4
        user("second", pinned="constraint"),     # 5 pinned: kept
        call("b"), result("b", "y"),             # 6, 7
        system("note"),                          # 8
        assistant("ok"),                         # 9
        user("current"),                         # 10 current turn's input: kept
        assistant("step"),                       # 11
        call("c"), result("c", "z"),             # 12, 13
        call("d"), result("d", "w"),             # 14, 15
    ])
    assert trim_replay(events, max_messages=0) == events
    assert trim_replay(events, max_messages=15) == events
    assert [e.seq for e in trim_replay(events, max_messages=12, cut_quantum=1)] == [1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    assert [e.seq for e in trim_replay(events, max_messages=8, cut_quantum=1)] == [1, 5, 10, 11, 12, 13, 14, 15]
    # Cannot get to 3: the kept events plus the last legal cut (seq 14) are 5.
    assert [e.seq for e in trim_replay(events, max_messages=3)] == [1, 5, 10, 14, 15]
    assert [e.seq for e in trim_replay(events, max_messages=3, keep=lambda e: False)] == [1, 10, 14, 15]
    # A pinned call keeps its result (and the reverse).
    pinned_call = [msgspec.structs.replace(e, pinned="tool") if e.seq == 6 else e for e in events]
    assert [e.seq for e in trim_replay(pinned_call, max_messages=8, cut_quantum=1)] == [1, 5, 6, 7, 10, 14, 15]
    # Nothing but results of one call after the root: the only legal cut keeps everything.
    only_results = numbered([user("u"), call("a"), result("a"), result("a"), result("a")])
    assert trim_replay(only_results, max_messages=2) == only_results


def test_trim_replay_moves_its_cut_in_jumps_so_the_replayed_prefix_stays_cacheable() -> None:
    events = [user("root task")]
    for s in range(30):
        events += [assistant(f"step {s}"), call(f"c{s}"), result(f"c{s}", "ok")]
    events = numbered(events)
    firsts = []  # seq of the first replayed event after the root, at every model call
    for k in range(2, len(events) + 1):
        window = events[:k]
        replayed = trim_replay(window, max_messages=20)
        assert len(replayed) <= 20
        firsts.append(replayed[1].seq if len(replayed) > 1 else None)
    # max_messages // 4 = 5: the cut (an index) lands on the first legal cut at or after a
    # multiple of 5; legal cuts are the assistant outputs and calls (indices 1 and 2 mod 3).
    starts = sorted({f for f in firsts if f is not None and f > 2})
    assert starts == [6, 11, 17, 21, 26, 32, 36, 41, 47, 51, 56, 62, 66, 71, 77]
    changes = sum(1 for a, b in itertools.pairwise(firsts) if a != b)
    assert changes == len(starts)
    unquantized = {trim_replay(events[:k], max_messages=20, cut_quantum=1)[1].seq for k in range(2, len(events) + 1)}
    assert len(unquantized) > 3 * len(starts)

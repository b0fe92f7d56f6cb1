"""Through the real API: every stub names a seq that memory.read_event returns verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest
from gov_helpers import scenario_events

import aiden
from aiden.context.governance import govern_events, stub_seq, trim_replay
from aiden.context.prompt import PromptLayers, build_messages, validate_chat_sequence

pytestmark = pytest.mark.anyio

CFG = aiden.Config(durability="none")


async def test_stubbed_seqs_rehydrate_to_the_stored_originals(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        stored = await memory.append_many(scenario_events(seed=3, turns=8))
        hot = await memory.hot_window()
        assert hot == stored
        # Below the results' sizes (403 to 2,428 tokens), so most of the older ones are stubbed.
        governed = govern_events(hot, keep_turns=2, max_tool_tokens=500)
        assert len(governed.stubbed_seqs) == 11
        by_seq = {e.seq: e for e in stored}
        for event in governed.events:
            seq = stub_seq(event.content)
            if seq is None:
                continue
            original = await memory.read_event(seq)
            assert original == by_seq[seq]
            assert original is not None and original.type == "tool_result"
            assert original.content != event.content
        for seq in governed.stubbed_seqs:
            assert await memory.read_event(seq) == by_seq[seq]
        built = build_messages(layers=PromptLayers(), hot_window=governed.events)
        assert validate_chat_sequence(built.messages) == []


async def test_after_a_compaction_stubs_still_rehydrate(tmp_path: Path) -> None:
    config = aiden.Config(durability="none", keep_recent_tokens=6000, hot_window_events=20)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        stored = await memory.append_many(scenario_events(seed=5, turns=12))
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted
        hot = await memory.hot_window()
        assert len(hot) < len(stored)
        replay = trim_replay(hot, max_messages=12)
        governed = govern_events(replay, keep_turns=1, max_tool_tokens=500)
        assert governed.stubbed_seqs
        by_seq = {e.seq: e for e in stored}
        for seq in governed.stubbed_seqs:
            assert await memory.read_event(seq) == by_seq[seq]


@pytest.mark.parametrize(("keep_turns", "verbatim"), [(2, ["T4"]), (3, ["T3", "T4"])])
async def test_results_of_the_newest_turns_stay_verbatim_above_the_size_threshold(
    tmp_path: Path, keep_turns: int, verbatim: list[str]
) -> None:
    config = aiden.Config(durability="none", governance_keep_turns=keep_turns)
    async with aiden.open_memory(tmp_path, context_window=128_000, config=config) as memory:
        for t in range(5):
            await memory.begin_run(f"turn {t}: read file {t}")
            await memory.append(aiden.SessionEvent(type="tool_call", tool_name="read_file", tool_call_id=f"c{t}"))
            read = await memory.append(
                aiden.SessionEvent(type="tool_result", tool_call_id=f"c{t}", content=f"T{t} " + "x = compute(y)\n" * 600)
            )
            await memory.commit_run(f"read {t}")
        await memory.begin_run("now fix line 80 of the file you just read")
        prompt = await memory.build_messages()
        # Larger than the threshold (2,000 tokens for this window): older results are stubbed.
        assert memory.estimate_text(read.content) > memory.config.governance_tool_tokens()
    tools = [m["content"] for m in prompt.messages if m["role"] == "tool"]
    assert [t[:2] for t in tools if stub_seq(t) is None] == verbatim
    assert prompt.stubbed == 5 - len(verbatim)

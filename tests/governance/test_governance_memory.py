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
        governed = govern_events(hot, keep_turns=2, max_tool_tokens=CFG.governance_tool_tokens())
        assert len(governed.stubbed_seqs) == 13
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

"""A failed synchronous compaction is not retried in the same turn, but it does not stop compaction for good."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.errors import SummarizerError
from aiden.events import EventType
from aiden.testing import FailingSummarizer, GatedSummarizer, ScriptedSummarizer

pytestmark = pytest.mark.anyio

# compress_at_percent=100: the trigger threshold is the budget, so no background pass is requested
# before a prompt breaks the budget; the first summarizer call is the synchronous compaction.
CONFIG = Config(context_window=4000, compress_at_percent=100, durability="none")
# A pass asks for the running session summary (which falls back when this fails), then the chunk's.
FAILED_PASS = [SummarizerError("provider blip")] * 2


def _said(kind: EventType, n: int) -> SessionEvent:
    role = "user" if kind == "user_input" else "assistant"
    return SessionEvent(type=kind, role=role, content=f"{kind} {n} " + "w " * 150)  # ~155 tokens


async def test_an_append_only_agent_compacts_again_once_its_summarizer_recovers(tmp_path: Path) -> None:
    # The flow of an agent without begin_run/commit_run (the adapters): append, build, append.
    # The first compaction (synchronous, for an over-budget prompt) fails; every later one works.
    summarizer = ScriptedSummarizer(FAILED_PASS)
    builds: list[aiden.PromptBuild] = []
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=summarizer) as memory:
        for turn in range(30):
            await memory.append(_said("user_input", turn))
            builds.append(await memory.build_messages())
            await memory.append(_said("assistant_output", turn))
        chunks = (await memory.chunk_index()).chunks
        hot = await memory.hot_window()
    assert len(summarizer.requests) >= 2 and summarizer.remaining == 0
    assert any(b.compacted for b in builds) and len(chunks) >= 2
    # The hot window stays bounded instead of growing by two events a turn (60 after 30 turns).
    assert len(hot) <= 30
    assert not any(b.over_budget for b in builds)


async def test_a_turn_whose_synchronous_compaction_failed_requests_a_background_pass(tmp_path: Path) -> None:
    inner = ScriptedSummarizer(FAILED_PASS)
    summarizer = GatedSummarizer(inner)
    summarizer.open()  # never held: the gate counts the calls that started
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=summarizer) as memory:
        await memory.append(_said("user_input", 0))
        # One long turn of model steps until its prompt breaks the budget and the compaction fails.
        step = 0
        while not inner.requests and step < 40:
            step += 1
            await memory.append(_said("assistant_output", step))
            failed = await memory.build_messages()
        assert inner.remaining == 0 and not failed.compacted and summarizer.calls_finished == 0
        # The same turn goes on: the compaction is not waited for again, but a background pass runs.
        await memory.append(_said("assistant_output", step + 1))
        second = await memory.build_messages()
        with anyio.fail_after(5):
            await summarizer.wait_started(3)
    assert not second.compacted and not second.over_budget


async def test_a_summarizer_still_failing_is_asked_once_more_per_failure_not_on_every_step(tmp_path: Path) -> None:
    summarizer = FailingSummarizer()
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=summarizer) as memory:
        await memory.append(_said("user_input", 0))
        step = 0
        while not summarizer.calls and step < 40:
            step += 1
            await memory.append(_said("assistant_output", step))
            await memory.build_messages()
        # The synchronous pass failed; 15 more over-budget steps of the same turn.
        for k in range(15):
            await memory.append(_said("assistant_output", step + 1 + k))
            last = await memory.build_messages()
        await memory.maintain()  # behind every request sent before it
        stats, calls = memory.stats(), summarizer.calls
    assert not last.over_budget
    # Passes requested: the synchronous one, one background pass after it, the maintain() above;
    # each pass asks for the running session summary and the chunk's, and both fail.
    assert (stats.passes + stats.coalesced_requests, calls) == (3, 6)

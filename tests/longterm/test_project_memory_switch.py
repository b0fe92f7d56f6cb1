"""Once a session needs the compaction budget, its prompts keep the compact PROJECT MEMORY block.

A fresh session's block may take what the compaction trigger leaves above ``keep_recent_tokens``
(at most ``FRESH_SESSION_BUDGET_CAP``; tests/policy/test_fresh_session_budget.py); once the session compacted or a prompt of it reached the
trigger (the memory's, also for a call to a model with a larger window), every later prompt of
that session carries the block at ``project_memory_budget``, whatever the call's system text, tools
or the calibration say, and whether the app passes ``long_term=memory.long_term_layer`` or not.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import aiden
from aiden import Config, PromptBuild, PromptLayers
from aiden.policy.triggers import trigger_threshold_tokens

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LAYERS = PromptLayers(role_identity="You are a chat assistant.")
CONFIG = Config(durability="none", context_window=8000)
TRIGGER = trigger_threshold_tokens(8000, CONFIG)  # 4000
SESSIONS, LINES = 4, 6
LARGER, COMPACT = 22, 12  # earlier-session lines in the block at fresh_session_budget / project_memory_budget
# Twenty tool schemas of about 150 tokens each: with them a prompt of this session reaches the trigger.
TOOLS = [
    {
        "type": "function",
        "function": {"name": f"tool_{i}", "description": "Looks things up in the archive. " * 20, "parameters": {}},
    }
    for i in range(20)
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a real runtime: threads and files


def _carried(built: PromptBuild) -> int:
    """How many earlier-session lines the prompt's PROJECT MEMORY block carries."""
    return len(re.findall(r"museum number (\d+) ", str(built.messages[0]["content"])))


async def _earlier_sessions(memory: aiden.Memory) -> None:
    for session in range(SESSIONS):
        await memory.begin_run("John: Hi Maria, good to see you again!", new_session=session > 0)
        await memory.commit_run("Maria: Hi John! How was your week?")
        for turn in range(LINES):
            await memory.begin_run(
                f"John: I visited the museum number {session}{turn:02d} in Lisbon with my sister last weekend."
            )
            await memory.commit_run("Maria: Lovely! Which exhibit did you like best?")
    await memory.rotate()


async def _long_session(
    memory: aiden.Memory, turns: int, build: Callable[[aiden.Memory], Awaitable[PromptBuild]]
) -> tuple[list[int], list[int]]:
    """Turns of a growing session; per turn the lines the prompt's block carries and the compactions so far."""
    carried, compactions = [], []
    for turn in range(turns):
        await memory.begin_run(f"John: tell me about room {turn}. " + "What else is there to see? " * 20)
        built = await build(memory)
        carried.append(_carried(built))
        await memory.record_usage(prompt_tokens=built.estimated_tokens, run_ended=True)
        await memory.commit_run(f"Maria: room {turn} holds " + "paintings and sculptures, " * 40)
        await memory.maintain()
        compactions.append(memory.stats().compactions)
    return carried, compactions


async def _run(root: Path, turns: int, build: Callable[[aiden.Memory], Awaitable[PromptBuild]]) -> tuple[list[int], list[int]]:
    async with aiden.open_memory(root, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        return await _long_session(memory, turns, build)


async def test_the_layer_passed_back_switches_as_the_default_does(tmp_path: Path) -> None:
    async def default(memory: aiden.Memory) -> PromptBuild:
        return await memory.build_messages(LAYERS)

    async def passed(memory: aiden.Memory) -> PromptBuild:
        return await memory.build_messages(LAYERS, long_term=memory.long_term_layer)

    want = await _run(tmp_path / "default", 12, default)
    # The larger block until the prompt with it reached the trigger (turn 10), the compact one from
    # then on, and one compaction (not one on every turn, as with the larger block kept).
    assert want == ([LARGER] * 10 + [COMPACT] * 2, [0] * 10 + [1] * 2)
    assert await _run(tmp_path / "passed", 12, passed) == want


async def test_a_call_to_a_larger_window_switches_at_the_memorys_trigger(tmp_path: Path) -> None:
    async def default(memory: aiden.Memory) -> PromptBuild:
        return await memory.build_messages(LAYERS)

    async def larger(memory: aiden.Memory) -> PromptBuild:
        built = await memory.build_messages(LAYERS, model="gpt-4o")  # a 128k window
        assert built.checked_tokens < TRIGGER or _carried(built) == COMPACT
        return built

    assert await _run(tmp_path / "larger", 12, larger) == await _run(tmp_path / "default", 12, default)


async def test_the_switch_is_one_way_whatever_a_call_carries(tmp_path: Path) -> None:
    big = PromptLayers(role_identity="You are a chat assistant.", runtime_context="Retrieved: the archive. " * 600)
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        await memory.begin_run("John: Hi Maria!")
        fresh = await memory.build_messages(LAYERS)
        # A call with per-turn retrieved text reaches the trigger: the compact block from then on,
        # also for calls with small system text, without tools, and after usage reports.
        loaded = await memory.build_messages(big)
        later = [
            await memory.build_messages(LAYERS),
            await memory.build_messages(LAYERS, tools=TOOLS),
            await memory.build_messages(LAYERS, long_term=memory.long_term_layer),
        ]
        await memory.record_usage(prompt_tokens=later[-1].estimated_tokens // 2, run_ended=True)
        await memory.commit_run("Maria: Hi John!")
        await memory.begin_run("John: What did I tell you about Lisbon?")
        later.append(await memory.build_messages(LAYERS))
        assert memory.stats().compactions == 0
    assert (_carried(fresh), _carried(loaded)) == (LARGER, COMPACT)
    assert [_carried(b) for b in later] == [COMPACT] * 4


async def test_a_new_session_gets_the_larger_block_again(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        await memory.begin_run("John: Hi Maria!")
        switched = await memory.build_messages(LAYERS, tools=TOOLS)
        await memory.commit_run("Maria: Hi John!")
        await memory.rotate()
        await memory.begin_run("John: Hi again!")
        fresh = await memory.build_messages(LAYERS)
    assert (_carried(switched), _carried(fresh)) == (COMPACT, LARGER)


async def test_a_reopened_session_that_compacted_keeps_the_compact_block(tmp_path: Path) -> None:
    async def default(memory: aiden.Memory) -> PromptBuild:
        return await memory.build_messages(LAYERS)

    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        carried, compactions = await _long_session(memory, 11, default)
    assert compactions[-1] == 1
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await memory.begin_run("John: back again")
        built = await memory.build_messages(LAYERS)
    assert (carried[-1], _carried(built)) == (COMPACT, COMPACT)

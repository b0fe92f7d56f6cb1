"""Once a session needs the compaction budget, its prompts keep the compact PROJECT MEMORY block.

A fresh session's block may take what the compaction trigger leaves above ``keep_recent_tokens``
(at most ``FRESH_SESSION_BUDGET_CAP``; tests/policy/test_fresh_session_budget.py); once the session
compacted or its log leaves no room for that block under the trigger less a margin
(``fresh_block_fits``), every later prompt of that session carries the block at
``project_memory_budget``. Decided from the log only: every process serving the session (an app that
opens the memory per request, a second worker) decides alike, whatever a call's system text, tools,
model or calibration, and whether the app passes ``long_term=memory.long_term_layer`` or not.
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
# Twenty tool schemas of about 150 tokens each: with them a prompt of a fresh session is over the trigger.
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


async def _default(memory: aiden.Memory) -> PromptBuild:
    return await memory.build_messages(LAYERS)


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
    async def passed(memory: aiden.Memory) -> PromptBuild:
        return await memory.build_messages(LAYERS, long_term=memory.long_term_layer)

    want = await _run(tmp_path / "default", 12, _default)
    # The larger block until the log with it reached the trigger less its margin (turn 4), the
    # compact one from then on, and one compaction, at the turn it has without the larger block.
    assert want == ([LARGER] * 4 + [COMPACT] * 8, [0] * 10 + [1] * 2)
    assert await _run(tmp_path / "passed", 12, passed) == want


async def test_a_call_to_a_larger_window_switches_at_the_memorys_trigger(tmp_path: Path) -> None:
    async def larger(memory: aiden.Memory) -> PromptBuild:
        built = await memory.build_messages(LAYERS, model="gpt-4o")  # a 128k window
        assert built.checked_tokens < TRIGGER or _carried(built) == COMPACT
        return built

    assert await _run(tmp_path / "larger", 12, larger) == await _run(tmp_path / "default", 12, _default)


BIG = PromptLayers(role_identity="You are a chat assistant.", runtime_context="Retrieved: the archive. " * 600)


async def test_a_call_of_its_own_does_not_switch(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        await memory.begin_run("John: Hi Maria!")
        # A call with per-turn retrieved text or many tools goes over the trigger with the larger
        # block; the session's log does not: the block stays, in every call and after usage reports.
        built = [
            await memory.build_messages(LAYERS),
            await memory.build_messages(BIG),
            await memory.build_messages(LAYERS, tools=TOOLS),
            await memory.build_messages(LAYERS, long_term=memory.long_term_layer),
        ]
        await memory.record_usage(prompt_tokens=built[1].estimated_tokens * 2, run_ended=True)
        await memory.commit_run("Maria: Hi John!")
        await memory.begin_run("John: What did I tell you about Lisbon?")
        built.append(await memory.build_messages(LAYERS))
        await memory.maintain()
        assert memory.stats().compactions == 0
    assert built[1].checked_tokens > TRIGGER
    assert [_carried(b) for b in built] == [LARGER] * 5


async def test_a_call_that_would_not_fit_its_budget_carries_the_compact_block(tmp_path: Path) -> None:
    huge = PromptLayers(role_identity="You are a chat assistant.", runtime_context="Retrieved: the archive. " * 1150)
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        await memory.begin_run("John: Hi Maria!")
        # That call only (its hot-window events are not cut for the larger block); the next call has it again.
        built = [await memory.build_messages(huge), await memory.build_messages(LAYERS)]
    assert not built[0].over_budget
    assert [_carried(b) for b in built] == [COMPACT, LARGER]


async def test_an_app_that_opens_the_memory_per_request_never_switches_back(tmp_path: Path) -> None:
    """A new ``open_memory`` per turn (or another worker) decides as the open memory does: retrieved
    text that comes and goes does not flip the block."""

    async def turn(memory: aiden.Memory, n: int) -> tuple[int, int]:
        await memory.begin_run(f"John: tell me about room {n}. " + "What else is there to see? " * 20)
        built = await memory.build_messages(BIG if n % 2 == 0 else LAYERS)
        await memory.record_usage(prompt_tokens=built.estimated_tokens, run_ended=True)
        await memory.commit_run(f"Maria: room {n} holds " + "paintings and sculptures, " * 40)
        await memory.maintain()
        return _carried(built), memory.stats().compactions

    async with aiden.open_memory(tmp_path / "one", config=CONFIG) as memory:
        await _earlier_sessions(memory)
        one = [await turn(memory, n) for n in range(12)]
    async with aiden.open_memory(tmp_path / "many", config=CONFIG) as memory:
        await _earlier_sessions(memory)
    many = []
    for n in range(12):
        async with aiden.open_memory(tmp_path / "many", config=CONFIG) as memory:
            many.append(await turn(memory, n))
    assert [c for c, _ in many] == [c for c, _ in one] == [LARGER] * 4 + [COMPACT] * 8
    assert [c for _, c in one] == [0] * 6 + [1, 1, 2, 2, 3, 3]  # at the turns with retrieved text


async def test_sessions_with_equal_start_times_each_get_the_larger_block(tmp_path: Path) -> None:
    """An importer replaying chats with day-resolution dates, or a fixed test clock: every session
    starts fresh, and a call before its first input does not switch it either."""
    carried = []
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        for session in range(3):
            before = await memory.build_messages(LAYERS, tools=TOOLS)  # a warm-up call, empty hot window
            await memory.begin_run("John: Hi Maria!", now=1_000_000.0, new_session=session > 0)
            carried.append((_carried(before), _carried(await memory.build_messages(LAYERS))))
            await memory.commit_run("Maria: Hi John!")
    assert carried == [(LARGER, LARGER)] * 3


async def test_a_new_session_gets_the_larger_block_again(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        carried, _ = await _long_session(memory, 5, _default)
        await memory.rotate()
        await memory.begin_run("John: Hi again!")
        fresh = await memory.build_messages(LAYERS)
    # The larger block again (the long session's summary now takes a line of it).
    assert (carried[-1], _carried(fresh)) == (COMPACT, LARGER - 1)


async def test_a_reopened_session_that_compacted_keeps_the_compact_block(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await _earlier_sessions(memory)
        carried, compactions = await _long_session(memory, 11, _default)
    assert compactions[-1] == 1
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await memory.begin_run("John: back again")
        built = await memory.build_messages(LAYERS)
    assert (carried[-1], _carried(built)) == (COMPACT, COMPACT)

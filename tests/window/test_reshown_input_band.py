"""[Window] The prompt shows the current turn's compacted input again exactly when the compaction
planner counts it (review r61-R, finding 8: the prompt decided with text-only estimates and the
call's own window, the planner with per-event estimates and the memory's; for an input in the band
between the two, the prompt showed it while the planner did not count it, and every prompt of the
turn was over the trigger again)."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.policy.triggers import trigger_threshold_tokens

pytestmark = pytest.mark.anyio

_ROOT = "Which repository is this?"
_CFG = Config(context_window=8000, durability="none")


def _task(memory: aiden.Memory, tokens: int) -> str:
    """A task whose text estimate with the root's is ``tokens`` (give or take the last word's)."""
    words: list[str] = []
    while memory.estimate_text(_ROOT) + memory.estimate_text(" ".join(words)) < tokens - 30:
        words.append(f"detail{len(words)}")
    while memory.estimate_text(_ROOT) + memory.estimate_text(" ".join(words)) < tokens:
        words.append("x")
    return " ".join(words)


async def _step(memory: aiden.Memory, i: int) -> None:
    output = f"step {i}: " + " ".join(f"line {i}.{j} of the listing" for j in range(60))
    await memory.append_many([
        SessionEvent(type="assistant_output", role="assistant", content=f"Looking at part {i}."),
        SessionEvent(type="tool_call", role="assistant", tool_call_id=f"c{i}", tool_name="open", tool_args="{}"),
        SessionEvent(type="tool_result", role="tool", tool_call_id=f"c{i}", tool_name="open", content=output),
    ])


async def _split_turn(memory: aiden.Memory, task: str) -> None:
    """A finished first run, then a run on ``task`` whose first step the trigger's pass cut into."""
    await memory.begin_run(_ROOT)
    await memory.commit_run("pydicom.")
    seq = (await memory.begin_run(task)).user_event.seq
    await _step(memory, 0)
    assert (await memory.maintain()).compacted
    assert seq not in [e.seq for e in await memory.hot_window()]


def _shown(built: aiden.PromptBuild, task: str) -> bool:
    return task in [m["content"] for m in built.messages if m["role"] == "user"]


async def test_a_band_input_is_neither_shown_nor_counted_so_prompts_stay_under_the_trigger(tmp_path: Path) -> None:
    trigger = trigger_threshold_tokens(8000, _CFG)
    async with aiden.open_memory(tmp_path, config=_CFG) as memory:
        # In the band: the text estimates with the root's are under the trigger, their per-event
        # estimates (each message's framing counted too) reach it.
        task = _task(memory, trigger - 4)
        assert trigger - 8 <= memory.estimate_text(_ROOT) + memory.estimate_text(task) < trigger
        await _split_turn(memory, task)
        sizes, shown, passes = [], [], []
        for i in range(1, 4):
            built = await memory.build_messages()
            sizes.append(built.checked_tokens)
            shown.append(_shown(built, task))
            passes.append((await memory.maintain()).reason)  # what the planner makes of the same window
            await _step(memory, i)
    # Old code: the prompt showed the task (4,835, 5,363 and 5,891 tokens, all over the trigger of
    # 4,000) while the planner found the hot window under it: "not_triggered" each time.
    assert shown == [False, False, False]
    assert [size < trigger for size in sizes] == [True, True, True]
    assert passes == ["not_triggered"] * 3


async def test_a_call_to_a_larger_model_shows_no_input_the_planner_did_not_count(tmp_path: Path) -> None:
    trigger = trigger_threshold_tokens(8000, _CFG)
    async with aiden.open_memory(tmp_path, config=_CFG) as memory:
        task = _task(memory, trigger + 200)  # over the memory's trigger, far under gpt-4o's
        await _split_turn(memory, task)
        default = await memory.build_messages()
        large = await memory.build_messages(model="gpt-4o")  # 128,000 tokens in litellm's map
    # Old code: the gpt-4o call decided with its own trigger (64,000) and showed the task.
    assert (_shown(default, task), _shown(large, task)) == (False, False)
    assert large.checked_tokens < trigger

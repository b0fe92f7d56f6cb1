"""[Policy] A compaction plan leaves room for the current turn's input that every prompt of the turn
shows again after a cut inside the turn (stop 61: the planner counted only the hot window, so with a
3,300-token task at an 8,000-token window every other prompt was over budget and waited for a
synchronous compaction on the call path)."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent

pytestmark = pytest.mark.anyio

_ISSUE = "ISSUE: Pixel Representation attribute should be optional when Float Pixel Data is present."
_TASK = "Here is the task.\n" + " ".join(f"background{i} detail{i}" for i in range(720)) + f"\n{_ISSUE}"


async def _step(memory: aiden.Memory, i: int) -> None:
    output = f"step {i}: " + " ".join(f"line {i}.{j} of the listing" for j in range(120))
    await memory.append_many([
        SessionEvent(type="assistant_output", role="assistant", content=f"Looking at part {i}."),
        SessionEvent(type="tool_call", role="assistant", tool_call_id=f"c{i}", tool_name="open", tool_args="{}"),
        SessionEvent(type="tool_result", role="tool", tool_call_id=f"c{i}", tool_name="open", content=output),
    ])


async def test_prompts_showing_the_compacted_task_again_fit_without_a_synchronous_pass(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(context_window=8000, durability="none")) as memory:
        await memory.begin_run("Which repository is this?")
        await memory.commit_run("pydicom.")
        task = (await memory.begin_run(_TASK)).user_event
        synchronous, shown = [], []
        for i in range(6):
            await _step(memory, i)
            await memory.maintain()  # the pass the trigger asks for, waited for here
            built = await memory.build_messages()
            synchronous.append(built.compacted)
            shown.append(_TASK in [m["content"] for m in built.messages if m["role"] == "user"])
        hot = [e.seq for e in await memory.hot_window()]
    assert task.seq not in hot  # a cut inside the turn compacted it: the prompts show it again
    # Old code: [False, False, False, False, False, True] (then every other prompt).
    assert synchronous == [False] * 6
    assert shown == [True] * 6

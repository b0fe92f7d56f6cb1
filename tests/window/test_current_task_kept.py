"""[Window] The current turn's user input stays in every prompt of the turn, verbatim, after a compaction
cut inside the turn took it (from the real-data hunt adapters-e2e60, item 3: a SWE-agent task whose issue
sat at the end of a 24k-character input left the prompt mid-run, and the split-turn summary kept its first
400 characters, a worked demonstration of another issue)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent

pytestmark = pytest.mark.anyio

_DEMO = " ".join(
    f"Demonstration step {i}: the worked example edits fields.py of another project and reruns reproduce.py."
    for i in range(170)
)
_ISSUE = "ISSUE: Pixel Representation attribute should be optional when Float Pixel Data is present."
_TASK = f"Here is a demonstration of how to accomplish this task.\n{_DEMO}\n\nNow your own task.\n{_ISSUE}"
_ROOT = "Which repository is this?"
_CONTEXT = "the start of this turn was compacted"


async def _steps(memory: aiden.Memory, first: int, count: int) -> None:
    for i in range(first, first + count):
        output = f"step {i}: " + " ".join(f"line {i}.{j} of the file listing" for j in range(300))
        await memory.append_many([
            SessionEvent(type="assistant_output", role="assistant", content=f"Looking at part {i}."),
            SessionEvent(type="tool_call", role="assistant", tool_call_id=f"c{i}", tool_name="open", tool_args="{}"),
            SessionEvent(type="tool_result", role="tool", tool_call_id=f"c{i}", tool_name="open", content=output),
        ])


def _user_texts(built: aiden.PromptBuild) -> list[str]:
    return [m["content"] for m in built.messages if m["role"] == "user"]


async def _split_turn(memory: aiden.Memory, task: str) -> SessionEvent:
    """A finished first run, then a run on ``task`` whose first steps a compaction cut into."""
    await memory.begin_run(_ROOT)
    await memory.commit_run("pydicom.")
    stored = (await memory.begin_run(task)).user_event
    await _steps(memory, 0, 6)
    assert (await memory.maintain(manual=True)).compacted
    assert stored.seq not in [e.seq for e in await memory.hot_window()]  # compacted, recallable
    return stored


async def test_the_current_task_stays_whole_in_the_prompt_after_a_cut_inside_its_turn(tmp_path: Path) -> None:
    cfg = Config(context_window=16000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await _split_turn(memory, _TASK)
        built = await memory.build_messages()
    assert _user_texts(built) == [_ROOT, _TASK]
    assert _CONTEXT in json.dumps(built.messages) and not built.over_budget
    # A reopened memory reads it back from the chunk.
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        again = await memory.build_messages()
    assert _user_texts(again) == [_ROOT, _TASK]


async def test_it_stays_through_a_second_compaction_of_the_same_turn(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(context_window=16000, durability="none")) as memory:
        await _split_turn(memory, _TASK)
        await _steps(memory, 6, 6)
        assert (await memory.maintain(manual=True)).compacted
        # The second pass saw only the kept root before its cut: its chunk names the root as the turn's start.
        chunks = (await memory.chunk_index()).chunks
        assert len(chunks) == 2 and (chunks[-1].cut_meta or {}).get("turn_start_event_id") == "seq-1"
        built = await memory.build_messages()
    assert _user_texts(built) == [_ROOT, _TASK]


async def test_a_new_input_is_the_current_task_then(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(context_window=16000, durability="none")) as memory:
        await _split_turn(memory, _TASK)
        await memory.commit_run("Done: PixelRepresentation is optional now.")
        await memory.begin_run("Now run the whole test suite.")
        built = await memory.build_messages()
    assert _user_texts(built) == [_ROOT, "Now run the whole test suite."]


async def test_an_input_too_large_to_stay_under_the_trigger_stays_summarized(tmp_path: Path) -> None:
    # At 8,000 tokens the trigger is at 4,000: this input (~7,400 tokens) alone is past it, so a
    # prompt holding it could never be compacted under the trigger; the turn context stands in.
    big = f"{_DEMO}\n{_TASK}"
    async with aiden.open_memory(tmp_path, config=Config(context_window=8000, durability="none")) as memory:
        await _split_turn(memory, big)
        built = await memory.build_messages()
    assert _user_texts(built) == [_ROOT]
    assert _CONTEXT in json.dumps(built.messages) and not built.over_budget

"""A synchronous compaction that found nothing to compact yet does not stop the next calls of the turn from
compacting (it was taken for a failed summarizer: every later prompt of the turn stayed over budget), and
a current input shown again that does not fit beside the system layers gives way to its turn context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import PromptLayers, SessionEvent

pytestmark = pytest.mark.anyio

# Background passes only when asked: the prompt path's own compactions are what is tested.
QUIET = aiden.Config(compress_at_percent=99.0, durability="none")
SYSTEM = PromptLayers(base_instruction=" ".join(f"rule{n} applies always." for n in range(600)))


async def test_a_pass_with_nothing_to_compact_yet_does_not_block_the_turns_later_compactions(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET, context_window=8000) as memory:
        await memory.begin_run("What is this repository?")
        await memory.commit_run("A DICOM library.")
        await memory.maintain(manual=True)
        task = " ".join(f"step{n} of the task: read module{n} and report." for n in range(400))
        await memory.begin_run(task)
        await memory.maintain(manual=True)  # the earlier turn: only the root input and the task are left
        first = await memory.build_messages(SYSTEM)
        assert (first.compacted, first.over_budget) == (False, True), first.over_budget_reason  # nothing to compact yet
        for n in range(4):
            await memory.append_many([
                SessionEvent(type="tool_call", tool_call_id=f"c{n}", tool_name="read", tool_args=json.dumps({"n": n})),
                SessionEvent(type="tool_result", tool_call_id=f"c{n}", tool_name="read", content="line " * 300),
            ])
        later = await memory.build_messages(SYSTEM)
    assert (later.compacted, later.over_budget) == (True, False)

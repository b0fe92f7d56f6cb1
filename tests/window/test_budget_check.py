"""[Window] The budget check counts tool schemas and holds the prompt to its calibrated size (#35)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent

pytestmark = pytest.mark.anyio

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{n}",
            "description": "Reads part of the workspace and reports what it found there in detail. " * 6,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for n in range(12)
]


def _turn(n: int) -> SessionEvent:
    return SessionEvent(type="user_input" if n % 2 == 0 else "assistant_output", content=f"step {n} " * 40)


async def test_tool_schemas_and_the_learned_undercount_count_in_the_budget(tmp_path: Path) -> None:
    cfg = Config(context_window=8000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.append_many([_turn(n) for n in range(50)])
        bare = await memory.build_messages()
        with_tools = await memory.build_messages(tools=TOOLS)
        # The provider reports 15% more than aiden estimated, three times.
        for _ in range(3):
            built = await memory.build_messages(tools=TOOLS)
            await memory.record_usage(prompt_tokens=round(built.estimated_tokens * 1.15))
        calibrated = await memory.build_messages(tools=TOOLS)
    assert bare.tool_tokens == 0 and bare.checked_tokens == bare.estimated_tokens
    schemas = memory.estimate_text(json.dumps(TOOLS, separators=(",", ":")))
    assert with_tools.tool_tokens == schemas + 12
    assert with_tools.estimated_tokens <= with_tools.budget_tokens == 7000
    assert calibrated.checked_tokens >= round(calibrated.estimated_tokens * 1.15)
    assert calibrated.checked_tokens <= 7000 and not calibrated.over_budget
    # Without the calibration this prompt's own estimate would have passed while the provider's count did not.
    assert bare.estimated_tokens + with_tools.tool_tokens > calibrated.estimated_tokens


def test_without_usage_the_trigger_uses_the_estimate_of_the_prompts_built() -> None:
    from aiden.policy.triggers import (
        Compacted,
        TriggerState,
        UsageReported,
        reduce,
        should_compress,
        trigger_input,
    )

    state = TriggerState(model="m", calibration_weight=0.2)
    # Two prompts built in one run, no provider figure: the run's largest estimate is the prompt size.
    for estimate, ended in ((3000, False), (4200, True)):
        state = reduce(state, UsageReported(estimated_prompt_tokens=estimate, run_ended=ended))
    inp = trigger_input(state, context_window=8000, event_count=12, manual=False, hot_tokens=900)
    assert (inp.prompt_tokens, inp.estimated_prompt_tokens) == (None, 4200)
    assert should_compress(inp, Config()).reason == "percent"
    # An explicit event count keeps the count path; after a compaction only the hot window is known.
    assert should_compress(inp, Config(count_compress_after_events=60)).fire is False
    after = reduce(state, Compacted(tokens_before=4000, kept_tokens=1500))
    inp = trigger_input(after, context_window=8000, event_count=500, manual=False, hot_tokens=1600)
    assert (inp.estimated_prompt_tokens, should_compress(inp, Config()).fire) == (1600, False)
    assert trigger_input(after, context_window=8000, event_count=500, manual=False).estimated_prompt_tokens is None
    assert should_compress(
        trigger_input(after, context_window=8000, event_count=500, manual=False), Config()
    ).reason == "event_count"

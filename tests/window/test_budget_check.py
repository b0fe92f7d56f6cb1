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

"""The agent tools of an open memory: the core's recall tool, then each extension's tool set, by name.

(With experience memory off, ``recall_experience`` is no tool: ``tests/experience/test_experience_runtime.py``.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden


@pytest.mark.anyio
async def test_the_tools_run_by_name_recall_first_then_each_extensions(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path) as memory:
        names = [tool["function"]["name"] for tool in memory.tools]
        unknown = json.loads(await memory.handle_tool_call("rm_rf", {}))
        bad = json.loads(await memory.handle_tool_call("save_memory", "{not json"))
        saved = json.loads(
            await memory.handle_tool_call(
                "save_memory", {"type": "fact", "title": "deploys", "content": "deploys go out on Tuesdays"}
            )
        )
        recalled = json.loads(await memory.handle_tool_call("recall_session_chunks", {"query": "Tuesdays"}))
        experience = json.loads(await memory.handle_tool_call("recall_experience", {"query": "deploys"}))
    assert names == ["recall_session_chunks", "save_memory", "forget_memory", "recall_experience"]
    assert unknown == {"error": "unknown tool 'rm_rf'"}
    assert bad == {"error": "save_memory: JSON is malformed: object keys must be strings (byte 1)"}
    assert saved["saved"] == {"id": saved["saved"]["id"], "type": "fact", "title": "deploys", "expires_at": None}
    assert recalled == {"results": []}
    assert experience["results"] == []

"""The agent tools of an open memory: the core's recall tool, then each extension's tool set, by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import Config


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("experience", "names"),
    [
        (True, ["recall_session_chunks", "save_memory", "forget_memory", "recall_experience"]),
        (False, ["recall_session_chunks", "save_memory", "forget_memory"]),
    ],
)
async def test_the_tools_are_recall_then_each_extensions_in_order(
    tmp_path: Path, experience: bool, names: list[str]
) -> None:
    async with aiden.open_memory(tmp_path, config=Config(experience=experience)) as memory:
        assert [tool["function"]["name"] for tool in memory.tools] == names
        # A tool of an extension that is off is no tool.
        answer = json.loads(await memory.handle_tool_call("recall_experience", {"query": "x"}))
    assert ("error" in answer) is not experience


@pytest.mark.anyio
async def test_an_unknown_tool_and_a_bad_call_answer_errors_and_a_good_call_runs(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path) as memory:
        assert json.loads(await memory.handle_tool_call("rm_rf", {})) == {"error": "unknown tool 'rm_rf'"}
        bad = json.loads(await memory.handle_tool_call("save_memory", "{not json"))
        saved = json.loads(
            await memory.handle_tool_call(
                "save_memory", {"type": "fact", "title": "deploys", "content": "deploys go out on Tuesdays"}
            )
        )
        listed = json.loads(await memory.handle_tool_call("recall_session_chunks", {"query": "Tuesdays"}))
    assert bad["error"].startswith("save_memory: ")
    assert saved["saved"]["title"] == "deploys"
    assert "error" not in listed

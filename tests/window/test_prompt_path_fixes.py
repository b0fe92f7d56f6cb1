"""[Window] Fixes from the prompt-path hunt: non-ASCII tool calls, a smaller model's window,
context after the current input, and Config's refusal of unknown keywords."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.context.prompt import estimate_messages, estimate_tools
from aiden.errors import ConfigError
from aiden.events import RETRACTS
from aiden.policy.tokens import estimate_tokens

pytestmark = pytest.mark.anyio

CJK = "这是一个测试文件的内容并且包含中文字符。" * 50  # ~1,000 characters


def test_non_ascii_tool_calls_and_schemas_count_as_the_text_sent() -> None:
    args = json.dumps({"path": "f.txt", "content": CJK}, ensure_ascii=False)
    call = {"id": "c0", "type": "function", "function": {"name": "write_file", "arguments": args}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    # Not the \\uXXXX escapes of a second JSON encoding (which counted ~3.5x).
    assert estimate_tokens(args) < estimate_messages([message]) <= estimate_tokens(args) + 30
    tool = {"type": "function", "function": {"name": "write_file", "description": CJK, "parameters": {}}}
    assert estimate_tokens(CJK) < estimate_tools([tool]) <= estimate_tokens(CJK) + 40


async def test_a_turn_of_non_ascii_tool_arguments_well_under_budget_is_not_compacted(tmp_path: Path) -> None:
    cfg = Config(context_window=8000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.begin_run("把这三个文件写好")
        for i in range(3):
            args = json.dumps({"path": f"f{i}.txt", "content": CJK}, ensure_ascii=False)
            await memory.append(SessionEvent(type="tool_call", tool_name="write_file", tool_call_id=f"c{i}", tool_args=args))
            await memory.append(SessionEvent(type="tool_result", tool_call_id=f"c{i}", content="ok"))
        hot = await memory.hot_window()
        built = await memory.build_messages()
    as_events = sum(4 + estimate_tokens(e.content) + estimate_tokens(e.tool_args or "") for e in hot)
    assert as_events < 3500 and built.budget_tokens == 7000
    assert not built.compacted and built.stubbed == 0 and len(built.messages) == 7
    assert built.estimated_tokens <= as_events * 1.1


async def test_a_call_to_a_smaller_model_clamps_the_explicit_sizes_that_do_not_fit_it(tmp_path: Path) -> None:
    # Sizes that fit the memory's 128k window, not gpt-4's 8,192 tokens (litellm's map).
    cfg = Config(
        context_window=128000,
        reserve_tokens=10000,
        keep_recent_tokens=20000,
        summary_max_tokens=9000,
        durability="none",
    )
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.begin_run("summarize the logs")
        for i in range(20):
            await memory.append(SessionEvent(type="assistant_output", content=f"part {i}: " + "log line " * 100))
        large = await memory.build_messages()
        small = await memory.build_messages(model="gpt-4")
        assert memory.config == cfg
    assert large.budget_tokens == 118000 and not large.over_budget
    # The reserve is clamped to half the small window, as Config.reserve clamps it.
    assert small.budget_tokens == 8192 - 4096
    assert small.estimated_tokens <= 4096 < large.estimated_tokens and not small.over_budget


def _screen(i: int) -> SessionEvent:
    return SessionEvent(type="screen_context", content=f"screen {i}: " + "pixel " * 200)  # ~200 tokens


async def test_context_after_the_current_input_is_dropped_oldest_first_to_fit(tmp_path: Path) -> None:
    cfg = Config(context_window=4000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.begin_run("watch my screen and tell me when the build finishes")
        await memory.append_many([_screen(i) for i in range(30)])
        await memory.append(SessionEvent(type="system_event", content="build status: " + "running " * 200))
        await memory.append_many([_screen(i) for i in range(30, 40)])
        built = await memory.build_messages()
    assert built.estimated_tokens <= built.budget_tokens == 3500 and not built.over_budget
    texts = [str(m["content"]) for m in built.messages]
    assert texts[0] == "watch my screen and tell me when the build finishes"
    shown = [int(t.split(":")[0].removeprefix("screen ")) for t in texts if t.startswith("screen ")]
    # The newest ones, in order, up to the newest: only the oldest were dropped.
    # Only the oldest were dropped (the newest ones, in order, up to the newest); the system context
    # between screens 29 and 30 stays, as it is newer than every screen dropped.
    assert shown == list(range(25, 40))
    assert sum(t.startswith("build status") for t in texts) == 1


async def test_dropping_context_keeps_a_retraction_in_force(tmp_path: Path) -> None:
    cfg = Config(context_window=4000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        start = await memory.begin_run("SECRET-TYPO watch my screen")
        await memory.append(SessionEvent(type="system_event", meta={RETRACTS: start.user_event.seq}))
        await memory.append_many([_screen(i) for i in range(40)])
        built = await memory.build_messages()
    assert not built.over_budget and built.estimated_tokens <= 3500
    assert not any("SECRET-TYPO" in str(m["content"]) for m in built.messages)
    assert "screen 39:" in str(built.messages[-1]["content"])


def test_config_refuses_an_unknown_or_positional_argument_with_config_error() -> None:
    with pytest.raises(ConfigError, match="Config: Unexpected keyword argument 'context_windw'"):
        Config(context_windw=8000)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="Config: Extra positional arguments"):
        Config(8000)  # type: ignore[call-arg]

"""AidenSession runs against the real OpenAI Agents SDK: each run begins and ends in aiden (episodes, new sessions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")

import aiden  # noqa: E402
from aiden.adapters.openai_agents import AidenSession  # noqa: E402
from aiden.testing import FakeLLMServer  # noqa: E402

pytestmark = pytest.mark.anyio
# Any idle time between two runs starts a new session.
GAP = aiden.Config(durability="none", session_continue_gap_s=0, session_new_gap_s=0)
QUESTIONS = ("run the billing tests", "now the auth tests")


def _call(call_id: str, target: str) -> dict[str, Any]:
    arguments = json.dumps({"target": target})
    return {"content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "run_tests", "arguments": arguments}}]}


def stored_episodes(root: Path) -> list[dict[str, Any]]:
    """The committed episodes (``memory/episodes/<yyyy>/<id>/episode.json``), oldest first."""
    found = [json.loads(p.read_text()) for p in (root / "memory" / "episodes").glob("*/*/episode.json")]
    return sorted(found, key=lambda e: e["finished_at"])


async def _run(agent: Any, given: Any, session: AidenSession, streamed: bool) -> Any:
    from agents import RunConfig, Runner

    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    if not streamed:
        return await Runner.run(agent, given, session=session, run_config=config, hooks=session.usage_hooks())
    result = Runner.run_streamed(agent, given, session=session, run_config=config, hooks=session.usage_hooks())
    async for _ in result.stream_events():
        pass
    return result


def _agent(base_url: str, tools: list[Any]) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=base_url, api_key="x"))
    return Agent(name="a", instructions="You run tests.", tools=tools, model=model)


@pytest.mark.parametrize("streamed", [False, True])
async def test_each_run_is_an_aiden_run_and_one_after_an_idle_gap_starts_a_new_session(
    tmp_path: Path, streamed: bool
) -> None:
    from agents import function_tool

    active: list[bool] = []
    script = [_call("c1", "billing"), "Billing: 3 passed.", _call("c2", "auth"), "Auth: 2 passed."]
    async with aiden.open_memory(tmp_path, config=GAP) as memory:

        @function_tool
        def run_tests(target: str) -> str:
            """Run the tests of a target."""
            active.append(memory.run_active)
            return f"{target}: passed"

        with FakeLLMServer(responder=lambda body: script.pop(0)) as server:
            agent = _agent(server.base_url, [run_tests])
            session = AidenSession(memory)
            outputs = []
            for question in QUESTIONS:
                outputs.append((await _run(agent, question, session, streamed)).final_output)
                active.append(memory.run_active)
        hot = [(e.type, e.content or e.tool_name) for e in await memory.hot_window()]
        history = await session.full_history()
    assert outputs == ["Billing: 3 passed.", "Auth: 2 passed."]
    # Inside each tool the run is active; once Runner.run returns it has ended.
    assert active == [True, False, True, False]
    # The second run came after an idle gap: it began a new session.
    assert hot == [
        ("user_input", "now the auth tests"),
        ("tool_call", "run_tests"),
        ("tool_result", "auth: passed"),
        ("assistant_output", "Auth: 2 passed."),
    ]
    # The run's final message is logged once, as the SDK wrote it.
    assert [(i.get("type"), i.get("role")) for i in history] == [
        (None, "user"),
        ("function_call", None),
        ("function_call_output", None),
        ("message", "assistant"),
    ]
    episodes = stored_episodes(tmp_path)
    assert [e["goal"] for e in episodes] == list(QUESTIONS)
    assert [[(x["type"], x["content"]) for x in e["events"][:3]] for e in episodes] == [
        [("tool_call", '{"target": "billing"}'), ("tool_result", "billing: passed"), ("assistant_output", "Billing: 3 passed.")],
        [("tool_call", '{"target": "auth"}'), ("tool_result", "auth: passed"), ("assistant_output", "Auth: 2 passed.")],
    ]


async def test_a_paused_run_resumed_by_a_later_process_is_reopened_and_ended(tmp_path: Path) -> None:
    from agents import RunState, function_tool

    applied: list[bool] = []
    script = [_call("c1", "billing"), "Fixed and passing."]

    @function_tool(needs_approval=True)
    def run_tests(target: str) -> str:
        """Run the tests of a target (a person approves it first)."""
        applied.append(True)
        return f"{target}: passed"

    config = aiden.Config(durability="none")
    with FakeLLMServer(responder=lambda body: script.pop(0)) as server:
        agent = _agent(server.base_url, [run_tests])
        async with aiden.open_memory(tmp_path, config=config) as memory:
            paused = await _run(agent, QUESTIONS[0], AidenSession(memory), streamed=False)
            assert [i.tool_name for i in paused.interruptions] == ["run_tests"]
            saved = paused.to_state().to_string()
        async with aiden.open_memory(tmp_path, config=config) as memory:  # a later process
            state = await RunState.from_string(agent, saved)
            for interruption in state.get_interruptions():
                state.approve(interruption)
            result = await _run(agent, state, AidenSession(memory), streamed=False)
            still_active = memory.run_active
            hot = [(e.type, e.content or e.tool_name) for e in await memory.hot_window()]
    assert (result.final_output, applied, still_active) == ("Fixed and passing.", [True], False)
    assert hot == [
        ("user_input", QUESTIONS[0]),
        ("tool_call", "run_tests"),
        ("tool_result", "billing: passed"),
        ("assistant_output", "Fixed and passing."),
    ]
    # The first process left its run open ("memory closed during the run"); the resumed run ends with its answer.
    first, resumed = stored_episodes(tmp_path)
    assert (first["goal"], first["events"][-1]["type"]) == (QUESTIONS[0], "tool_call")
    assert (resumed["goal"], resumed["note"], resumed["events"][-1]["content"]) == (
        QUESTIONS[0],
        "",
        "Fixed and passing.",
    )


async def test_without_the_hooks_each_run_begins_and_stays_open_until_the_next(tmp_path: Path) -> None:
    from agents import Runner

    with FakeLLMServer(responder=lambda body: "ok") as server:
        agent = _agent(server.base_url, [])
        async with aiden.open_memory(tmp_path, config=GAP) as memory:
            session = AidenSession(memory)
            active = []
            for question in QUESTIONS:
                await Runner.run(agent, question, session=session)
                active.append(memory.run_active)
            hot = [(e.type, e.content) for e in await memory.hot_window()]
    assert active == [True, True]
    assert hot == [("user_input", "now the auth tests"), ("assistant_output", "ok")]
    # The first run never ended: the second one's begin_run closed its episode.
    assert [(e["goal"], e["note"]) for e in stored_episodes(tmp_path)] == [
        ("run the billing tests", "superseded by a new run"),
        ("now the auth tests", "memory closed during the run"),
    ]


async def test_a_run_a_tool_ends_is_committed_with_the_tools_output(tmp_path: Path) -> None:
    from agents import function_tool

    @function_tool
    def run_tests(target: str) -> str:
        """Run the tests of a target."""
        return f"{target}: passed"

    with FakeLLMServer(responder=lambda body: _call("c1", "billing")) as server:
        agent = _agent(server.base_url, [run_tests]).clone(tool_use_behavior="stop_on_first_tool")
        async with aiden.open_memory(tmp_path, config=GAP) as memory:
            result = await _run(agent, QUESTIONS[0], AidenSession(memory), streamed=False)
            active = memory.run_active
            hot = [(e.type, e.content or e.tool_name) for e in await memory.hot_window()]
    assert (result.final_output, active) == ("billing: passed", False)
    assert hot == [
        ("user_input", "run the billing tests"),
        ("tool_call", "run_tests"),
        ("tool_result", "billing: passed"),
        ("assistant_output", "billing: passed"),
    ]
    assert [(e["goal"], e["note"]) for e in stored_episodes(tmp_path)] == [("run the billing tests", "")]


async def test_a_batch_with_one_bad_item_stores_none_and_begins_no_run(tmp_path: Path) -> None:
    # add_items is all or none: the run's user message was stored (and its run left active) before a
    # too-large tool output of the same batch was refused (a review finding).
    config = aiden.Config(durability="none", max_event_bytes=10_000)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        items: list[Any] = [
            {"role": "user", "content": "run the billing tests"},
            {"type": "function_call", "call_id": "c1", "name": "run_tests", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "x" * 50_000},
        ]
        with pytest.raises(aiden.EventTooLargeError):
            await AidenSession(memory).add_items(items)
        assert (await memory.hot_window(), memory.run_active) == ([], False)

"""``recall_tool`` through the OpenAI Agents SDK: the model reads back a detail compaction took away.

The long session's first turns are compacted; in the next turn the model (a local fake
server) calls ``recall_session_chunks`` for a line of the first file it read, then calls
it again with arguments that are not JSON, then answers. The SDK runs aiden's tool, the
next request carries its output, and every request stays within the budget.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")

import aiden  # noqa: E402
from aiden.adapters.openai_agents import AidenSession, recall_tool  # noqa: E402
from aiden.context.governance import STUB_PREFIX  # noqa: E402
from aiden.recall.tool import RECALL_TOOL  # noqa: E402
from aiden.testing import FakeLLMServer  # noqa: E402
from tests.adapters import long_session  # noqa: E402

pytestmark = pytest.mark.anyio
COMPACTED_TURNS = 3
FACT = long_session.tool_output(1).splitlines()[7]  # the first file read, compacted by the recall turn
QUERY = json.dumps({"query": "line 7 of file1.py", "k": 1})
MALFORMED = '{"query": "line 7 of'  # cut off: not JSON


def _call(call_id: str, arguments: str) -> dict[str, Any]:
    return {
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "recall_session_chunks", "arguments": arguments},
            }
        ],
    }


def _tool_output(body: dict[str, Any], call_id: str) -> str:
    (content,) = [
        m["content"] for m in body["messages"] if m["role"] == "tool" and m["tool_call_id"] == call_id
    ]
    return str(content)


def test_the_tool_is_aidens_schema_unchanged() -> None:
    memory: Any = None  # never reached: only the tool's definition is read
    tool = recall_tool(memory)
    function = RECALL_TOOL["function"]
    assert (tool.name, tool.description, tool.strict_json_schema) == (
        "recall_session_chunks",
        function["description"],
        False,
    )
    assert tool.params_json_schema == function["parameters"]
    assert tool.params_json_schema is not function["parameters"]


async def test_the_model_recalls_a_compacted_fact_and_reads_a_malformed_calls_error(tmp_path: Path) -> None:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def read_file(n: int) -> str:
        """Read one of the project's files."""
        return long_session.tool_output(n)

    script = long_session.Script()
    scripted = script.chat_responder()
    recall_turn: list[dict[str, Any] | str] = []

    def respond(body: dict[str, Any]) -> dict[str, Any] | str:
        return recall_turn.pop(0) if recall_turn else scripted(body)

    builds: list[aiden.PromptBuild] = []
    with FakeLLMServer(responder=respond) as server:
        async with aiden.open_memory(
            tmp_path, config=long_session.CONFIG, context_window=long_session.WINDOW
        ) as memory:
            session = AidenSession(memory)

            async def recorded(data: Any) -> Any:
                sent = await session.call_model_input_filter(data)
                assert session.last_prompt is not None
                builds.append(session.last_prompt)
                return sent

            agent = Agent(
                name="a",
                instructions=long_session.INSTRUCTIONS,
                tools=[read_file, recall_tool(memory)],
                model=OpenAIChatCompletionsModel(
                    model="fake", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="x")
                ),
            )
            config = RunConfig(call_model_input_filter=recorded)
            for turn in range(COMPACTED_TURNS):
                await Runner.run(
                    agent, script.ask(turn), session=session, run_config=config, hooks=session.usage_hooks()
                )
                await memory.maintain()
            compacted_to = (await memory.chunk_index()).last_seq
            recall_turn.extend([_call("recall_1", QUERY), _call("recall_2", MALFORMED), "line 7 is 123646"])
            before = len(server.requests)
            result = await Runner.run(
                agent,
                "what was line 7 of file1.py?",
                session=session,
                run_config=config,
                hooks=session.usage_hooks(),
            )
            expected_error = await memory.handle_recall_tool(MALFORMED)
            budget = memory.config.prompt_budget()
            sent = [long_session.prompt_tokens(r.body["messages"], memory) for r in server.requests]
            hot = await memory.hot_window()
    asked, recalled, erred = (r.body for r in server.requests[before:])
    assert (result.final_output, len(server.requests) - before) == ("line 7 is 123646", 3)
    assert FACT == "line 7 of file1.py: value=123646 status ok"
    # The fact (seq 3, the first read's output) was compacted: the model could not see it.
    assert compacted_to >= 3
    assert all(FACT not in json.dumps(m) for m in asked["messages"])
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in asked["tools"]}
    assert sorted(tools) == ["read_file", "recall_session_chunks"]
    assert tools["recall_session_chunks"] == RECALL_TOOL["function"]["parameters"]
    # The next request carries aiden's answer, whole (no stub), with the fact.
    answer = _tool_output(recalled, "recall_1")
    assert not answer.startswith(STUB_PREFIX)
    hits = json.loads(answer)["results"]
    assert [(h["seq"], h["type"]) for h in hits] == [(3, "tool_result")]  # the type implies role "tool"
    assert FACT in hits[0]["text"]
    # The malformed call got aiden's error as its output, and the run went on to the answer.
    assert _tool_output(erred, "recall_2") == expected_error
    assert json.loads(expected_error)["error"].startswith("arguments are not valid JSON: ")
    assert [(e.type, e.tool_call_id, e.content) for e in hot][-5:] == [
        ("tool_call", "recall_1", ""),
        ("tool_result", "recall_1", answer),
        ("tool_call", "recall_2", ""),
        ("tool_result", "recall_2", expected_error),
        ("assistant_output", None, "line 7 is 123646"),
    ]
    # The window promise held on every request, the recall turn's included.
    assert max(sent) <= budget == 3500
    # The messages as sent; the tool schemas sent beside them count in the estimate too.
    assert sent == [b.estimated_tokens - b.tool_tokens for b in builds]
    assert all(b.tool_tokens > 0 and b.checked_tokens >= b.estimated_tokens for b in builds)
    assert [b.over_budget for b in builds] == [False] * len(builds)

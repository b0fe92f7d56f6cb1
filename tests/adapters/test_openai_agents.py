"""AidenSession against the real OpenAI Agents SDK: protocol, exact round trips, retraction, rotation, compaction."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest

agents = pytest.importorskip("agents")

import aiden  # noqa: E402
from aiden.adapters.openai_agents import AidenSession, event_from_item, item_from_event  # noqa: E402
from aiden.context.governance import STUB_PREFIX  # noqa: E402
from aiden.testing import FakeLLMServer  # noqa: E402
from tests.adapters import long_session  # noqa: E402
from tests.helpers import SMALL_MANUAL, all_events  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio
FAST = aiden.Config(durability="none")

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "why is billing flaky?"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "see the log"},
            {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
        ],
    },
    {"role": "developer", "content": "be brief"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "check the timezone"}]},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "run",
        "arguments": '{"cmd": "pytest"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "1 failed: tz"},
    {"type": "custom_tool_call", "call_id": "call_2", "name": "patch", "input": "*** Begin Patch"},
    {
        "type": "custom_tool_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "applied"}],
    },
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "tz"},
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Fixed: UTC everywhere.", "annotations": []}],
    },
    {"type": "item_reference", "id": "msg_0"},
]
# (type, role, content, tool_call_id, tool_name, tool_args) of each item's event.
EXPECTED = [
    ("user_input", "user", "why is billing flaky?", None, None, None),
    ("user_input", "user", "see the log\n[image]", None, None, None),
    ("system_event", "developer", "be brief", None, None, None),
    ("assistant_output", "assistant", "check the timezone", None, None, None),
    ("tool_call", "assistant", "", "call_1", "run", '{"cmd": "pytest"}'),
    ("tool_result", "tool", "1 failed: tz", "call_1", None, None),
    ("tool_call", "assistant", "", "call_2", "patch", "*** Begin Patch"),
    ("tool_result", "tool", "applied", "call_2", None, None),
    (
        "tool_call",
        "assistant",
        "",
        "ws_1",
        "web_search_call",
        '{"action": {"query": "tz", "type": "search"}}',
    ),
    ("assistant_output", "assistant", "Fixed: UTC everywhere.", None, None, None),
    ("system_event", None, "", None, None, None),
]


def _shape(event: aiden.SessionEvent) -> tuple[Any, ...]:
    return (event.type, event.role, event.content, event.tool_call_id, event.tool_name, event.tool_args)


def turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {n}: what about module{n}.py and its config file?"},
        {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": f"answer {n}: module{n}.py reads settings.",
                    "annotations": [],
                }
            ],
        },
    ]


async def test_satisfies_the_sdk_session_protocol(tmp_path: Path) -> None:
    from agents.memory import Session

    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        session = AidenSession(memory, session_id="s1")
        assert isinstance(session, Session)
        assert session.session_id == "s1"
        assert session.session_settings is None
        assert await session.get_items() == []
        assert await session.pop_item() is None


def test_the_session_methods_type_hints_evaluate_at_run_time() -> None:
    # What autodoc, pydantic's validate_call or a runtime type checker read.
    for method in ("get_items", "add_items", "pop_item", "call_model_input_filter"):
        assert "return" in typing.get_type_hints(getattr(AidenSession, method)), method
    assert typing.get_type_hints(AidenSession.__init__)


async def test_each_item_kind_round_trips_exactly(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        session = AidenSession(memory, session_id="s1")
        await session.add_items([dict(i) for i in ITEMS])
        assert await session.get_items() == ITEMS
        hot = await memory.hot_window()
        assert [_shape(e) for e in hot] == EXPECTED
        assert [e.meta["agents_session"] for e in hot] == ["s1"] * len(ITEMS)
        # A string text is stored once: in the event, not again in meta.
        assert hot[0].meta["agents_item"] == {"role": "user"}
        assert hot[4].meta["agents_slots"] == {"tool_args": "arguments"}
    async with aiden.open_memory(tmp_path, config=FAST) as memory:  # from disk, after reopening
        view = await AidenSession(memory, session_id="s1").get_items()
        # The session continues: its own summary (written at close) is no earlier session's knowledge.
        assert memory.long_term_layer == ""
        assert view == ITEMS


def test_events_without_an_item_map_to_equivalent_items() -> None:
    events = [
        aiden.SessionEvent(type="user_input", content="hi"),
        aiden.SessionEvent(type="tool_call", tool_call_id="c1", tool_name="run", tool_args="{}"),
        aiden.SessionEvent(type="tool_result", tool_call_id="c1", content="ok"),
        aiden.SessionEvent(type="tool_result", content="loose"),
        aiden.SessionEvent(type="assistant_output", content="done"),
        aiden.SessionEvent(type="system_event", content="note"),
    ]
    assert [item_from_event(e) for e in events] == [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "run", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"role": "system", "content": "Tool result:\nloose"},
        {"role": "assistant", "content": "done"},
        {"role": "system", "content": "note"},
    ]
    with pytest.raises(aiden.InvalidEventError):
        event_from_item(["not", "an", "item"])
    with pytest.raises(aiden.InvalidEventError):
        event_from_item({"role": "user", "content": float("nan")})


async def test_add_items_is_all_or_nothing(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        session = AidenSession(memory)
        with pytest.raises(aiden.InvalidEventError):
            await session.add_items([{"role": "user", "content": "ok"}, {"role": "user", "content": {1, 2}}])  # type: ignore[list-item]
        assert await memory.hot_window() == []
        await session.add_items([])
        assert await memory.hot_window() == []


async def test_limit_gives_the_latest_items(tmp_path: Path) -> None:
    from agents.memory import SessionSettings

    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        session = AidenSession(memory)
        await session.add_items([dict(i) for i in ITEMS])
        assert await session.get_items(limit=3) == ITEMS[-3:]
        assert await session.get_items(limit=1) == ITEMS[-1:]
        assert await session.get_items(limit=100) == ITEMS
        assert await session.get_items(limit=len(ITEMS) + 1) == ITEMS  # fewer items than the limit
        assert await session.get_items(limit=0) == []
        assert await session.get_items(limit=-1) == ITEMS
        limited = AidenSession(memory, session_settings=SessionSettings(limit=2))
        assert await limited.get_items() == ITEMS[-2:]
        assert await limited.get_items(limit=4) == ITEMS[-4:]


async def test_pop_item_appends_a_retraction_and_hides_the_item(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        session = AidenSession(memory)
        items = [*turn(1), {"role": "user", "content": "oops, wrong question"}]
        await session.add_items([dict(i) for i in items])
        assert await session.pop_item() == items[2]
        hot = await memory.hot_window()
        assert [e.seq for e in hot] == [1, 2, 3, 4]  # append-only: the popped event is still there
        assert (hot[3].type, hot[3].meta["retracts"]) == ("system_event", 3)
        assert hot[2].content == "oops, wrong question"
        assert await session.get_items() == items[:2]
        assert await session.full_history() == items[:2]
        assert await session.pop_item() == items[1]
        assert await session.pop_item() == items[0]
        assert await session.pop_item() is None
        assert await session.get_items() == []
        assert len(await memory.hot_window()) == 6
        # Neither the popped events nor the retractions reach the prompt.
        prompt = await memory.build_messages()
        shown = json.dumps(prompt.messages)
        assert "oops, wrong question" not in shown
        assert "retracted" not in shown


async def test_clear_session_rotates_and_keeps_the_archive(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        session = AidenSession(memory)
        await session.add_items(turn(1))
        await session.clear_session()
        assert memory.long_term_layer.startswith("PROJECT MEMORY")  # what the archived session left
        project_memory = {"role": "system", "content": memory.long_term_layer}
        assert await session.get_items() == [project_memory]
        assert await memory.hot_window() == []
        await session.add_items(turn(2))
        assert await session.get_items() == [project_memory, *turn(2)]
    archives = list((tmp_path / "memory" / "session_archive").iterdir())
    assert len(archives) == 1
    archived = (archives[0] / "events.jsonl").read_text()
    assert "question 1: what about module1.py" in archived
    assert "answer 1: module1.py reads settings." in archived


async def test_get_items_after_compaction_is_summary_then_hot_window(tmp_path: Path) -> None:
    items = [i for n in range(1, 9) for i in turn(n)]
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        session = AidenSession(memory)
        await session.add_items([dict(i) for i in items])
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted
        hot = await memory.hot_window()
        chunked, _ = all_events(tmp_path)
        assert len(chunked) + len(hot) == len(items)
        assert 0 < len(hot) < len(items)
        view = await session.get_items()
        summary = (await memory.summary_md()).strip()
        assert summary.startswith("# Session History")
        # The summary layer of aiden's own prompt (fitted to its share of the window), as one system item.
        system = (await memory.build_messages()).messages[0]
        assert system["role"] == "system" and str(system["content"]).startswith("# Session History")
        assert view[0] == {"role": "system", "content": system["content"]}
        shown = [items[e.seq - 1] for e in hot]  # the hot window keeps the pinned root input
        assert shown[0] == items[0]
        assert shown[1:] == items[-(len(hot) - 1) :]
        assert view[1:] == shown
        assert await session.get_items(limit=len(hot)) == shown
        assert await session.get_items(limit=len(hot) + 1) == view
        assert await session.full_history() == items
        # Popping past the hot window reaches into the compacted chunks (still append-only).
        compacted = sorted(e.seq for e in chunked)
        for seq in [e.seq for e in hot][:0:-1] + compacted[::-1][:2]:
            assert await session.pop_item() == items[seq - 1]
        assert await session.get_items() == [view[0], items[0]]
        assert await session.full_history() == [items[0], *(items[q - 1] for q in compacted[:-2])]
        assert len(await memory.hot_window()) == len(hot) + len(hot) + 1
        assert len(all_events(tmp_path)[0]) == len(chunked)


async def test_runner_sends_the_summary_item_after_compaction(tmp_path: Path) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    items = [i for n in range(1, 9) for i in turn(n)]
    with FakeLLMServer(responder=lambda body: "noted") as server:
        agent = Agent(
            name="a",
            instructions="be brief",
            model=OpenAIChatCompletionsModel(
                model="fake", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="x")
            ),
        )
        async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
            session = AidenSession(memory)
            await session.add_items([dict(i) for i in items])
            assert (await memory.maintain(manual=True)).compacted
            view = await session.get_items()
            result = await Runner.run(agent, "and module9.py?", session=session)
            assert result.final_output == "noted"
            after = await session.get_items()
        sent = server.requests[0].body["messages"]
    assert sent[0] == {"role": "system", "content": "be brief"}
    assert sent[1] == {"role": "system", "content": view[0]["content"]}
    assert str(sent[1]["content"]).startswith("# Session History")
    assert [m["role"] for m in sent[2:]] == [str(i["role"]) for i in view[1:]] + ["user"]
    assert sent[-1] == {"role": "user", "content": "and module9.py?"}
    assert after[: len(view)] == view
    assert after[len(view)] == {"role": "user", "content": "and module9.py?"}
    assert after[len(view) + 1]["role"] == "assistant"
    assert len(after) == len(view) + 2


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "example_openai_agents_session", ROOT / "examples" / "openai_agents_session.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_example_runs_two_turns_against_a_local_server(tmp_path: Path) -> None:
    example = _load_example()
    with FakeLLMServer(responder=example.fake_responder) as server:
        answers = await example.main(tmp_path, base_url=server.base_url)
        requests = server.requests
    fact = "the billing test is flaky because of a timezone bug"
    assert answers == [f"Found it: {fact}", f"Earlier I said: Found it: {fact}"]
    assert len(requests) == 3
    second_turn = requests[2].body["messages"]
    assert [m["role"] for m in second_turn] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second_turn[1]["content"] == "Why is the billing test flaky?"
    assert second_turn[3] == {"role": "tool", "tool_call_id": "call_1", "content": fact}
    assert server.handler_errors == []
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        hot = await memory.hot_window()
        assert [e.type for e in hot] == [
            "user_input",
            "tool_call",
            "tool_result",
            "assistant_output",
            "user_input",
            "assistant_output",
        ]
        assert {e.meta["agents_session"] for e in hot} == {"example"}


def test_importing_aiden_does_not_import_agents() -> None:
    code = (
        "import sys, aiden, aiden.adapters, aiden.adapters.openai_agents; "
        "print(json.dumps('agents' in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert json.loads(out.stdout) is False


async def test_every_prompt_of_a_long_tool_heavy_session_fits_the_window(tmp_path: Path) -> None:
    """The window promise through the SDK: every request the Runner sends is aiden's prompt, within budget."""
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from agents.run_config import CallModelData, ModelInputData
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def read_file(n: int) -> str:
        """Read one of the project's files."""
        return long_session.tool_output(n)

    builds: list[aiden.PromptBuild] = []
    sdk_inputs: list[int] = []
    script = long_session.Script()
    with FakeLLMServer(responder=script.chat_responder()) as server:
        agent = Agent(
            name="a",
            instructions=long_session.INSTRUCTIONS,
            tools=[read_file],
            model=OpenAIChatCompletionsModel(
                model="fake", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="x")
            ),
        )
        async with aiden.open_memory(
            tmp_path, config=long_session.CONFIG, context_window=long_session.WINDOW
        ) as memory:
            session = AidenSession(memory)

            async def recorded(data: CallModelData[Any]) -> ModelInputData:
                sdk_inputs.append(len(data.model_data.input))
                sent = await session.call_model_input_filter(data)
                assert session.last_prompt is not None
                builds.append(session.last_prompt)
                return sent

            config = RunConfig(call_model_input_filter=recorded)
            for turn in range(long_session.TURNS):
                result = await Runner.run(
                    agent, script.ask(turn), session=session, run_config=config, hooks=session.usage_hooks()
                )
                assert result.final_output == long_session.Script.ANSWER
                await memory.maintain()  # the pass the turn's end asked for has run: compactions are counted
            budget = memory.config.prompt_budget()
            sent = [long_session.prompt_tokens(r.body["messages"], memory) for r in server.requests]
            stats = memory.stats()
            items = len(await session.full_history())
    calls = long_session.TURNS * (long_session.CALLS_PER_TURN + 1)
    assert (long_session.WINDOW, budget, len(sent), len(builds)) == (4000, 3500, calls, calls)
    assert items == long_session.TURNS * (2 + 2 * long_session.CALLS_PER_TURN)  # every item logged once
    assert max(sdk_inputs) > 4 * long_session.CALLS_PER_TURN  # the SDK's own input kept growing
    assert max(sent) <= budget
    assert stats.compactions >= 3
    # The messages as sent; the tool schemas sent beside them count in the estimate too.
    assert sent == [b.estimated_tokens - b.tool_tokens for b in builds]
    assert all(b.tool_tokens > 0 and b.checked_tokens >= b.estimated_tokens for b in builds)
    assert [b.over_budget for b in builds] == [False] * calls
    assert {b.budget_tokens for b in builds} == {budget}
    # Every mechanism of the promise took part: tool results stubbed, summary layer fitted.
    assert any(b.stubbed for b in builds)
    assert any(b.summary_trimmed for b in builds)


async def test_get_items_is_aidens_prompt_within_the_budget(tmp_path: Path) -> None:
    """Without the filter the SDK sends get_items as the history: it is build_messages' budgeted prompt."""
    # No background pass may compact the window between the reads below (which compare one
    # window): without reported usage the trigger would read the hot window's own estimate
    # (above the window after the fifth result) and compact behind the test's back, so it
    # counts events instead, far more than this session has.
    config = msgspec.structs.replace(long_session.CONFIG, count_compress_after_events=1000)
    async with aiden.open_memory(tmp_path, config=config, context_window=long_session.WINDOW) as memory:
        session = AidenSession(memory)
        for n in range(1, 7):  # one user turn with six large results: more than the whole window
            await session.add_items(
                [
                    {"role": "user", "content": long_session.question(n)}
                    if n == 1
                    else {"type": "message", "role": "assistant", "content": f"reading file{n}"},
                    {
                        "type": "function_call",
                        "call_id": f"c{n}",
                        "name": "read_file",
                        "arguments": json.dumps({"n": n}),
                    },
                    {
                        "type": "function_call_output",
                        "call_id": f"c{n}",
                        "output": long_session.tool_output(n),
                    },
                ]
            )
        built = await memory.build_messages()
        view = await session.get_items()
        hot = await memory.hot_window()
        compactions = memory.stats().compactions
    assert built.stubbed > 0 and not built.over_budget and compactions == 0
    assert sum(memory.estimate_text(e.content) for e in hot) > memory.config.prompt_budget()
    outputs = [i for i in view if i.get("type") == "function_call_output"]
    stubs = [i for i in outputs if str(i["output"]).startswith(STUB_PREFIX)]
    assert len(stubs) == built.stubbed
    # A stubbed output keeps its item (type, call_id); the stub is aiden's, naming the seq to recall.
    assert [set(i) for i in stubs] == [{"type", "call_id", "output"}] * len(stubs)
    chat = [m for m in built.messages if m["role"] == "tool"]
    assert [i["output"] for i in outputs] == [m["content"] for m in chat]
    assert [i["call_id"] for i in outputs] == [m["tool_call_id"] for m in chat]


def _agent(base_url: str, **kwargs: Any) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    return Agent(
        name="a",
        instructions="be brief",
        model=OpenAIChatCompletionsModel(
            model="fake", openai_client=AsyncOpenAI(base_url=base_url, api_key="x")
        ),
        **kwargs,
    )


async def test_usage_hooks_report_each_call_and_the_end_of_the_run(tmp_path: Path) -> None:
    from agents import Runner

    reply = {"content": "ok", "usage": {"prompt_tokens": 777, "cached_tokens": 111}}
    with FakeLLMServer(script=[reply, reply]) as server:
        async with aiden.open_memory(tmp_path, config=FAST) as memory:
            session = AidenSession(memory)
            await Runner.run(_agent(server.base_url), "hi", session=session)
            unreported = memory.stats()
            await Runner.run(_agent(server.base_url), "again", session=session, hooks=session.usage_hooks())
            reported = memory.stats()
    assert (unreported.last_prompt_tokens, unreported.cached_share_since_last_compaction) == (None, None)
    assert (reported.last_prompt_tokens, reported.cached_share_since_last_compaction) == (777, 111 / 777)


QUESTION = turn(1)[0]["content"]


async def test_a_streamed_run_is_sent_whole_and_logged_once(tmp_path: Path) -> None:
    """A streamed run saves its input after the first call's filter: the filter logs it, add_items not again."""
    from agents import RunConfig, Runner

    async def streamed(session: AidenSession, text: str, base_url: str) -> None:
        config = RunConfig(call_model_input_filter=session.call_model_input_filter)
        result = Runner.run_streamed(_agent(base_url), text, session=session, run_config=config)
        async for _ in result.stream_events():
            pass
        assert result.final_output == "ok"

    with FakeLLMServer(responder=lambda body: "ok") as server:
        async with aiden.open_memory(tmp_path, config=FAST) as memory:
            session = AidenSession(memory)
            await streamed(session, QUESTION, server.base_url)
            first = [(e.type, e.content) for e in await memory.hot_window()]
            await session.clear_session()  # the archived session leaves long-term memory: get_items shows it
            project_memory = memory.long_term_layer
            assert project_memory.startswith("PROJECT MEMORY")
            assert (await session.get_items())[0] == {"role": "system", "content": project_memory}
            await streamed(session, "again", server.base_url)
            second = [(e.type, e.content) for e in await memory.hot_window()]
        sent = [r.body["messages"] for r in server.requests]
    assert first == [("user_input", QUESTION), ("assistant_output", "ok")]
    assert second == [("user_input", "again"), ("assistant_output", "ok")]
    assert sent == [
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": QUESTION}],
        [
            {"role": "system", "content": f"be brief\n\n{project_memory}"},
            {"role": "user", "content": "again"},
        ],
    ]


async def test_the_filter_refuses_input_that_does_not_continue_its_session(tmp_path: Path) -> None:
    from agents import RunConfig, Runner

    with FakeLLMServer(responder=lambda body: "ok") as server:
        async with aiden.open_memory(tmp_path, config=FAST) as memory:
            session = AidenSession(memory)
            config = RunConfig(call_model_input_filter=session.call_model_input_filter)
            await Runner.run(_agent(server.base_url), "hi", session=session, run_config=config)
            with pytest.raises(aiden.AidenError, match=r"pass session=<this AidenSession> to Runner\.run"):
                await Runner.run(_agent(server.base_url), "bye", run_config=config)  # no session=
            hot = await memory.hot_window()
    assert len(server.requests) == 1
    assert [(e.type, e.content) for e in hot] == [("user_input", "hi"), ("assistant_output", "ok")]


async def test_the_prompt_keeps_each_items_shape(tmp_path: Path) -> None:
    """Items go out as stored; aiden's changes are its own: stubs, a reused call id renamed, a result it supplied."""
    from aiden.context.prompt import MISSING_RESULT

    big = "\n".join(f"row {i}: {'x' * 40}" for i in range(200))
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "id": "fc_1", "call_id": "dup", "name": "run", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "dup", "output": "first"},
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "dup",
            "name": "run",
            "arguments": '{"again": true}',
        },
        {"type": "function_call_output", "call_id": "dup", "output": "second"},
        {"type": "function_call", "call_id": "lost", "name": "run", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "cc", "name": "dump", "input": "all"},
        {"type": "custom_tool_call_output", "call_id": "cc", "output": [{"type": "input_text", "text": big}]},
    ]
    async with aiden.open_memory(tmp_path, config=FAST, context_window=4000) as memory:
        session = AidenSession(memory)
        await session.add_items([dict(i) for i in items])
        view = await session.get_items()
        built = await memory.build_messages()
    stub = built.messages[-1]["content"]
    # The custom tool's output is larger than its share of the budget: stubbed although it is new.
    assert stub.startswith(f"{STUB_PREFIX}9: dump(") and built.stubbed == 1
    assert view == [
        *items[:4],
        {**items[4], "call_id": "dup_seq5"},  # the chat API needs unique call ids
        {**items[5], "call_id": "dup_seq5"},
        items[6],  # two calls in a row: one assistant turn, then their outputs
        items[7],
        {"type": "function_call_output", "call_id": "lost", "output": MISSING_RESULT},
        {**items[8], "output": stub},
    ]


async def test_a_prompt_that_cannot_fit_is_sent_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Never a silent overflow: what aiden may not drop (the user's input) alone breaks the budget."""
    from agents import RunConfig, Runner

    huge = " ".join(f"word{i}" for i in range(6000))
    with FakeLLMServer(responder=lambda body: "ok") as server:
        async with aiden.open_memory(tmp_path, config=FAST, context_window=4000) as memory:
            session = AidenSession(memory)
            config = RunConfig(call_model_input_filter=session.call_model_input_filter)
            with caplog.at_level(logging.WARNING, logger="aiden.adapters"):
                await Runner.run(_agent(server.base_url), huge, session=session, run_config=config)
            sent = long_session.prompt_tokens(server.requests[0].body["messages"], memory)
    assert session.last_prompt is not None and session.last_prompt.over_budget
    assert sent == session.last_prompt.estimated_tokens > session.last_prompt.budget_tokens == 3500
    warnings = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "aiden.adapters"]
    assert warnings == [
        (
            "WARNING",
            "AidenSession.call_model_input_filter: the prompt sent is over aiden's budget: "
            + session.last_prompt.over_budget_reason,
        )
    ]


PNG = "data:image/png;base64," + "iVBORw0KGgo" + "A" * 400  # long enough for the log to drop its data


def _zoom() -> Any:
    from agents import function_tool

    @function_tool
    def zoom() -> str:
        """Zoom in."""
        return "zoomed"

    return zoom


async def test_an_inline_image_reaches_every_call_of_its_run_and_later_runs_get_text(tmp_path: Path) -> None:
    from agents import RunConfig, Runner

    question = [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": PNG, "detail": "auto"},
    ]
    zoom = {"id": "z1", "type": "function", "function": {"name": "zoom", "arguments": "{}"}}
    zoom_call = {"content": None, "tool_calls": [zoom]}
    with FakeLLMServer(script=[zoom_call, "a cat", "grey"]) as server:
        async with aiden.open_memory(tmp_path, config=FAST) as memory:
            session = AidenSession(memory)
            config = RunConfig(call_model_input_filter=session.call_model_input_filter)
            agent = _agent(server.base_url, tools=[_zoom()])
            await Runner.run(agent, [{"role": "user", "content": question}], session=session, run_config=config)
            await Runner.run(agent, "what colour?", session=session, run_config=config)
            history = await session.full_history()
        sent = [[m["content"] for m in r.body["messages"] if m["role"] == "user"] for r in server.requests]
    image = {"type": "image_url", "image_url": {"url": PNG, "detail": "auto"}}
    as_sent = [{"type": "text", "text": "what is this?"}, image]
    as_logged = [{"type": "text", "text": "what is this?"}, {"type": "text", "text": "[image]"}]
    # The run given the image sends it on each of its calls; the log keeps a text part in its place.
    assert sent == [[as_sent], [as_sent], [as_logged, "what colour?"]]
    assert history[0]["content"] == [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_text", "text": "[image]"},
    ]


async def test_a_run_whose_input_text_holds_an_inline_image_is_sent_it(tmp_path: Path) -> None:
    from agents import RunConfig, Runner

    with FakeLLMServer(responder=lambda body: "ok") as server:
        async with aiden.open_memory(tmp_path, config=FAST) as memory:
            session = AidenSession(memory)
            config = RunConfig(call_model_input_filter=session.call_model_input_filter)
            await Runner.run(_agent(server.base_url), f"what is {PNG}", session=session, run_config=config)
            hot = await memory.hot_window()
        sent = [m for m in server.requests[0].body["messages"] if m["role"] == "user"]
    assert sent == [{"role": "user", "content": f"what is {PNG}"}]
    assert [(e.type, e.content) for e in hot] == [
        ("user_input", f"what is [image data omitted: {len(PNG)} bytes]"),
        ("assistant_output", "ok"),
    ]

"""The LangChain v1 middleware over a real ``create_agent`` run with a scripted fake chat model."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field

import aiden
from aiden.adapters.langchain import EVENT_ID_PREFIX, aiden_middleware, middleware_class, usage_numbers
from aiden.cli import main
from aiden.context.prompt import estimate_messages
from tests.adapters import long_session
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
USAGE = {
    "input_tokens": 120,
    "output_tokens": 7,
    "total_tokens": 127,
    "input_token_details": {"cache_read": 40},
}


class ScriptedChat(BaseChatModel):
    """Answers from ``script`` in order and records the messages of every call."""

    script: list[AIMessage]
    received: list[list[BaseMessage]] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.tool_names = [t.name if hasattr(t, "name") else t["function"]["name"] for t in tools]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.received.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


tool_runs: list[str] = []


@tool
def run_tests(target: str) -> str:
    """Run the test suite of a target."""
    tool_runs.append(target)
    return f"{target}: 3 passed"


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def turn(calls: list[dict[str, Any]], answer: str, usage: Any = USAGE) -> list[AIMessage]:
    return [
        AIMessage(content="", tool_calls=calls, usage_metadata=usage),
        AIMessage(content=answer, usage_metadata=usage),
    ]


def kinds(events: list[aiden.SessionEvent]) -> list[tuple[str, str, str | None]]:
    return [(e.type, e.content, e.tool_call_id) for e in events]


async def test_middleware_logs_the_run_and_sends_aidens_prompt(tmp_path: Path) -> None:
    tool_runs.clear()
    model = ScriptedChat(
        script=turn(
            [
                call("run_tests", {"target": "billing"}, "c1"),
                call("recall_session_chunks", {"query": "billing"}, "c2"),
            ],
            "Billing is green.",
        )
    )
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        middleware = aiden_middleware(memory)
        assert isinstance(middleware, middleware_class())
        agent = create_agent(
            model, tools=[run_tests], system_prompt="You are terse.", middleware=[middleware]
        )
        state = await agent.ainvoke({"messages": [HumanMessage("is billing green?")]})
        hot = await memory.hot_window()
        assert (await memory.maintain()).compacted is False  # a round trip through the scheduler's inbox
        stats = memory.stats()
        assert memory.run_active is False
    assert model.tool_names == ["recall_session_chunks", "run_tests"]  # middleware tools first
    assert tool_runs == ["billing"]  # the recall tool never reached the tool node's handler
    assert kinds(hot) == [
        ("user_input", "is billing green?", None),
        ("tool_call", "", "c1"),
        ("tool_call", "", "c2"),
        ("tool_result", "billing: 3 passed", "c1"),
        ("tool_result", hot[4].content, "c2"),
        ("assistant_output", "Billing is green.", None),
    ]
    assert [(e.tool_name, e.tool_args) for e in hot[1:3]] == [
        ("run_tests", '{"target": "billing"}'),
        ("recall_session_chunks", '{"query": "billing"}'),
    ]
    assert json.loads(hot[4].content) == json.loads(await _recall_answer(tmp_path / "other", "billing"))
    ids = [m.id for m in state["messages"]]
    assert [e.event_id for e in hot] == [
        f"{EVENT_ID_PREFIX}{ids[0]}",
        f"{EVENT_ID_PREFIX}{ids[1]}",
        f"{EVENT_ID_PREFIX}{ids[1]}:1",
        f"{EVENT_ID_PREFIX}{ids[2]}",
        f"{EVENT_ID_PREFIX}{ids[3]}",
        f"{EVENT_ID_PREFIX}{ids[4]}",
    ]
    # The model got aiden's prompt: its system message holds the agent's system prompt as a layer.
    first, second = model.received
    assert [type(m) for m in first] == [SystemMessage, HumanMessage]
    assert first[0].content.startswith("You are terse.")
    assert [type(m) for m in second] == [SystemMessage, HumanMessage, AIMessage, ToolMessage, ToolMessage]
    assert [c["id"] for c in second[2].tool_calls] == ["c1", "c2"]
    assert [(m.tool_call_id, m.content) for m in second[3:]] == [
        ("c1", "billing: 3 passed"),
        ("c2", hot[4].content),
    ]
    # Usage: LangChain's usage_metadata reaches record_usage (input includes the cache reads).
    assert stats.last_prompt_tokens == 120
    assert stats.cached_share_since_last_compaction == 80 / 240


async def _recall_answer(root: Path, query: str) -> str:
    async with aiden.open_memory(root, config=aiden.Config(durability="none")) as memory:
        return await memory.handle_recall_tool({"query": query})


async def test_second_turn_prompt_holds_the_summary_after_compaction(tmp_path: Path) -> None:
    model = ScriptedChat(
        script=[
            # No usage reported: USAGE's fixed 120 tokens are fewer than the tool schemas the middleware
            # counts, a calibration no provider would teach, and the planner's cut would follow it.
            *turn([call("run_tests", {"target": "billing"}, "c1")], "Billing passes.", None),
            *turn([call("run_tests", {"target": "invoices"}, "c2")], "Invoices pass.", None),
            AIMessage(content="Both pass."),
            *turn([call("recall_session_chunks", {"query": "billing passed"}, "c3")], "It passed.", None),
        ]
    )
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        agent = create_agent(model, tools=[run_tests], middleware=[aiden_middleware(memory)])
        await agent.ainvoke({"messages": [HumanMessage("check billing " + "x" * 400)]})
        await agent.ainvoke({"messages": [HumanMessage("check invoices " + "y" * 400)]})
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted is True
        summary = await memory.summary_md()
        # Only the new message is passed: aiden holds the history.
        await agent.ainvoke({"messages": [HumanMessage("and both?")]})
        hot = await memory.hot_window()
        # The recall tool answers from the compacted events, through aiden.
        await agent.ainvoke({"messages": [HumanMessage("what did billing give?")]})
        recalled = model.received[-1][-1]
        final = await memory.hot_window()
    assert isinstance(recalled, ToolMessage) and recalled.tool_call_id == "c3"
    hits = json.loads(recalled.content)["results"]
    assert [(h["seq"], h["type"], h["text"]) for h in hits] == [
        (4, "assistant_output", "Billing passes."),
        (3, "tool_result", "billing: 3 passed\nrun_tests"),
        (2, "tool_call", 'run_tests\n{"target": "billing"}'),
    ]
    assert kinds(final)[-4:] == [
        ("user_input", "what did billing give?", None),
        ("tool_call", "", "c3"),
        ("tool_result", recalled.content, "c3"),
        ("assistant_output", "It passed.", None),
    ]
    last = model.received[-3]
    texts = [m.text for m in last[1:]]
    # The first turn's tool call, result and answer are compacted: the summary layer stands for them
    # (the session's root input stays verbatim).
    assert "## Recent Chunks" in summary and "run_tests(target=billing)" in summary
    assert summary.strip() in last[0].text
    assert [type(m) for m in last] == [
        SystemMessage,
        HumanMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
        HumanMessage,
    ]
    assert texts == [
        "check billing " + "x" * 400,
        "check invoices " + "y" * 400,
        "",
        "invoices: 3 passed",
        "Invoices pass.",
        "and both?",
    ]
    assert kinds(hot)[-2:] == [("user_input", "and both?", None), ("assistant_output", "Both pass.", None)]


async def test_messages_are_logged_once_across_invocations_with_history(tmp_path: Path) -> None:
    model = ScriptedChat(script=[AIMessage(content="one"), AIMessage(content="two")])
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        agent = create_agent(model, middleware=[aiden_middleware(memory)])
        state = await agent.ainvoke({"messages": [HumanMessage("first")]})
        await agent.ainvoke({"messages": [*state["messages"], HumanMessage("second")]})
        hot = await memory.hot_window()
    assert kinds(hot) == [
        ("user_input", "first", None),
        ("assistant_output", "one", None),
        ("user_input", "second", None),
        ("assistant_output", "two", None),
    ]


def test_usage_numbers_and_lazy_import() -> None:
    assert usage_numbers(USAGE) == (120, 7, 40)
    assert usage_numbers({"input_tokens": 5, "output_tokens": 1}) == (5, 1, None)
    assert usage_numbers(None) == (None, None, None)
    import subprocess

    code = "import aiden, aiden.adapters.langchain, sys; print('langchain' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


async def test_example_runs_against_the_local_server(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "example_langchain_middleware", ROOT / "examples" / "langchain_middleware.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example
    spec.loader.exec_module(example)
    result = await example.main(tmp_path)
    asked = "is billing green? " + "(details) " * 40
    assert result["answers"] == ["billing: 3 passed", "Still green."]
    assert result["tools"] == ["recall_session_chunks", "run_tests"]
    assert result["hot_window"] == [
        ("user_input", asked),
        ("assistant_output", "billing: 3 passed"),
        ("user_input", "and now?"),
        ("assistant_output", "Still green."),
    ]
    # The second turn's request is aiden's prompt: the compacted tool call and result are in the
    # summary layer (after the agent's system prompt), not replayed as messages.
    prompt = result["last_prompt"]
    assert [m["role"] for m in prompt] == ["system", "user", "user", "assistant", "user"]
    assert prompt[0]["content"].startswith(
        "You are a terse CI assistant.\n\n# Session History (compressed chunks)"
    )
    assert prompt[0]["content"].endswith("Commands:\n  - run_tests(target=billing)")
    assert [m["content"] for m in prompt[1:]] == [
        asked,
        "Turn context (the start of this turn was compacted):\nCommands:\n- run_tests(target=billing)",
        "billing: 3 passed",
        "and now?",
    ]


async def test_sync_invoke_is_refused_before_anything_is_logged(tmp_path: Path) -> None:
    model = ScriptedChat(script=[AIMessage(content="never")])
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        agent = create_agent(model, middleware=[aiden_middleware(memory)])
        with pytest.raises(NotImplementedError, match="Synchronous implementation of wrap_model_call"):
            agent.invoke({"messages": [HumanMessage("hi")]})
        assert await memory.hot_window() == []
    assert model.received == []


class SessionChat(BaseChatModel):
    """Plays :class:`tests.adapters.long_session.Script`; records each call as LangChain would send it."""

    script: Any
    sent: list[list[dict[str, Any]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "long-session"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.sent.append(convert_to_openai_messages(messages))
        # Usage as a provider reports it: aiden's token trigger and calibration run on it.
        usage = {"input_tokens": estimate_messages(self.sent[-1]), "output_tokens": 12, "total_tokens": 0}
        n = self.script.step()
        if n is None:
            message = AIMessage(content=long_session.Script.ANSWER, usage_metadata=usage)
        else:
            message = AIMessage(
                content="", usage_metadata=usage, tool_calls=[call("read_file", {"n": n}, f"c{n}")]
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


@tool
def read_file(n: int) -> str:
    """Read one of the project's files."""
    return long_session.tool_output(n)


async def test_every_call_of_a_long_tool_heavy_session_fits_the_window(tmp_path: Path) -> None:
    """The window promise through the middleware: every model call gets aiden's prompt, within budget."""
    model = SessionChat(script=long_session.Script())
    async with aiden.open_memory(
        tmp_path, config=long_session.CONFIG, context_window=long_session.WINDOW
    ) as memory:
        middleware = aiden_middleware(memory)
        builds: list[aiden.PromptBuild] = []
        model_call = middleware.awrap_model_call

        async def recorded(request: Any, handler: Any) -> Any:
            async def handle(request: Any) -> Any:
                builds.append(
                    getattr(middleware, "last_prompt", None)
                )  # the prompt aiden built for this call
                return await handler(request)

            return await model_call(request, handle)

        middleware.awrap_model_call = recorded
        agent = create_agent(
            model, tools=[read_file], system_prompt=long_session.INSTRUCTIONS, middleware=[middleware]
        )
        for turn in range(long_session.TURNS):
            state = await agent.ainvoke({"messages": [HumanMessage(model.script.ask(turn))]})
            assert state["messages"][-1].content == long_session.Script.ANSWER
            await memory.maintain()  # the pass the turn's end asked for has run: compactions are counted
        budget = memory.config.prompt_budget()
        sent = [long_session.prompt_tokens(m, memory) for m in model.sent]
        stats = memory.stats()
    calls = long_session.TURNS * (long_session.CALLS_PER_TURN + 1)
    assert (budget, len(sent)) == (3500, calls)
    assert max(sent) <= budget
    assert stats.compactions >= 3
    # The messages as sent are aiden's estimate exactly (a later system message sent as a user one
    # costs the same); the tool schemas sent beside them count in the estimate too.
    assert sent == [b.estimated_tokens - b.tool_tokens for b in builds]
    assert all(b.tool_tokens > 0 and b.checked_tokens >= b.estimated_tokens for b in builds)
    assert [b.over_budget for b in builds] == [False] * calls
    assert model.sent[0][0] == {"role": "system", "content": long_session.INSTRUCTIONS}
    assert any(b.stubbed for b in builds)
    assert any(b.summary_trimmed for b in builds)


THINKING = {"type": "thinking", "thinking": "I should run the tests", "signature": "sig"}
REASONING = {"type": "reasoning", "reasoning": "I should run the tests"}
RUNNING = {"type": "text", "text": "Running."}
GREEN = {"type": "text", "text": "Billing is green."}
V1_CALL = {"type": "tool_call", "id": "c1", "name": "run_tests", "args": {"target": "billing"}}


@pytest.mark.parametrize(
    ("calling", "final"),
    [
        ([THINKING, RUNNING], [THINKING, GREEN]),  # Anthropic extended thinking, Gemini
        ([REASONING, RUNNING], [REASONING, GREEN]),  # ChatOpenAI on the Responses API
        ([RUNNING, V1_CALL], [GREEN]),  # output_version="v1": the call is a content block too
    ],
    ids=["thinking", "reasoning", "v1-tool-call"],
)
async def test_answers_with_thinking_reasoning_or_tool_call_blocks_are_logged_as_text(
    tmp_path: Path, calling: list[dict[str, Any]], final: list[dict[str, Any]]
) -> None:
    model = ScriptedChat(
        script=[
            AIMessage(content=calling, tool_calls=[call("run_tests", {"target": "billing"}, "c1")]),
            AIMessage(content=final),
        ]
    )
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        agent = create_agent(model, tools=[run_tests], middleware=[aiden_middleware(memory)])
        await agent.ainvoke({"messages": [HumanMessage("is billing green?")]})
        hot = await memory.hot_window()
        assert memory.run_active is False
    assert kinds(hot) == [
        ("user_input", "is billing green?", None),
        ("assistant_output", "Running.", None),
        ("tool_call", "", "c1"),
        ("tool_result", "billing: 3 passed", "c1"),
        ("assistant_output", "Billing is green.", None),
    ]
    assert (hot[2].tool_name, hot[2].tool_args) == ("run_tests", '{"target": "billing"}')


async def test_a_message_whose_append_failed_is_logged_when_sent_again(tmp_path: Path) -> None:
    model = ScriptedChat(script=[AIMessage(content="Hi.")])
    question = HumanMessage("x" * 3000, id="q1")
    config = aiden.Config(durability="none", max_event_bytes=2000)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        agent = create_agent(model, middleware=[aiden_middleware(memory)])
        with pytest.raises(aiden.EventTooLargeError):
            await agent.ainvoke({"messages": [question]})
        question.content = "hello"  # the caller fixes the message and sends it again
        await agent.ainvoke({"messages": [question]})
        hot = await memory.hot_window()
    assert [(e.type, e.content, e.event_id) for e in hot] == [
        ("user_input", "hello", f"{EVENT_ID_PREFIX}q1"),
        ("assistant_output", "Hi.", hot[1].event_id),
    ]


async def test_every_call_of_the_run_gets_the_users_message_with_its_image(tmp_path: Path) -> None:
    content: list[str | dict[str, Any]] = [
        {"type": "text", "text": "what is in this picture?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]
    model = ScriptedChat(script=turn([call("run_tests", {"target": "cat"}, "c1")], "A cat."))
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        middleware = aiden_middleware(memory)
        agent = create_agent(model, tools=[run_tests], middleware=[middleware])
        await agent.ainvoke({"messages": [HumanMessage(content)]})
        hot = await memory.hot_window()
    first, second = model.received
    assert [(type(m), m.content) for m in first] == [(HumanMessage, content)]
    assert [type(m) for m in second] == [HumanMessage, AIMessage, ToolMessage]
    assert second[0].content == content
    # The log and aiden's prompt keep the text only.
    assert kinds(hot)[0] == ("user_input", "what is in this picture?", None)
    assert middleware.last_prompt.messages[0] == {"role": "user", "content": "what is in this picture?"}


class City(BaseModel):
    name: str
    country: str


@tool(return_direct=True)
def lookup(query: str) -> str:
    """Look the answer up."""
    return "Paris"


async def test_runs_ended_by_structured_output_or_a_return_direct_tool_are_committed(tmp_path: Path) -> None:
    model = ScriptedChat(
        script=[
            AIMessage(content="", tool_calls=[call("City", {"name": "Paris", "country": "France"}, "o1")]),
            AIMessage(content="", tool_calls=[call("lookup", {"query": "capital"}, "o2")]),
        ]
    )
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        structured = create_agent(
            model, response_format=ToolStrategy(City), middleware=[aiden_middleware(memory)]
        )
        state = await structured.ainvoke({"messages": [HumanMessage("capital of France?")]})
        assert state["structured_response"] == City(name="Paris", country="France")
        assert memory.run_active is False
        direct = create_agent(model, tools=[lookup], middleware=[aiden_middleware(memory)])
        await direct.ainvoke({"messages": [HumanMessage("look it up")]})
        assert memory.run_active is False
        hot = await memory.hot_window()
    returned = "Returning structured response: name='Paris' country='France'"
    assert kinds(hot) == [
        ("user_input", "capital of France?", None),
        ("tool_call", "", "o1"),
        ("tool_result", returned, "o1"),
        ("assistant_output", '{"name":"Paris","country":"France"}', None),
        ("user_input", "look it up", None),
        ("tool_call", "", "o2"),
        ("tool_result", "Paris", "o2"),
        ("assistant_output", "Paris", None),
    ]


async def test_a_checkpointed_thread_is_not_logged_again_after_a_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each turn is a new process (a new memory and middleware) on the same LangGraph thread."""
    saver = InMemorySaver()
    thread = {"configurable": {"thread_id": "t1"}}
    # Any idle time starts a new session: the second question does, a replayed first one must not.
    config = aiden.Config(durability="none", session_new_gap_s=0.0, session_continue_gap_s=0.0)
    for n, question in enumerate(["first question", "second question"]):
        model = ScriptedChat(script=[AIMessage(content=f"answer {n}")])
        async with aiden.open_memory(tmp_path, config=config) as memory:
            agent = create_agent(model, middleware=[aiden_middleware(memory)], checkpointer=saver)
            await agent.ainvoke({"messages": [HumanMessage(question)]}, thread)
            hot = await memory.hot_window()
    assert kinds(hot) == [
        ("user_input", "second question", None),
        ("assistant_output", "answer 1", None),
    ]
    # One rotation (the second question's); the first turn is in that archive once.
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stats"]["archived_sessions"] == 1


class Crash(BaseException):
    """The process dies (not an error the agent handles)."""


async def test_a_thread_resumed_after_a_crash_in_a_tool_reopens_and_ends_its_run(tmp_path: Path) -> None:
    """The process dies in the run's second tool call; a new one resumes the checkpointed thread (ainvoke(None))."""
    crash_at = ["auth"]

    @tool
    def check(target: str) -> str:
        """Run the checks of a target."""
        if target in crash_at:
            crash_at.clear()
            raise Crash
        return f"{target}: ok"

    model = ScriptedChat(
        script=[
            AIMessage(content="", tool_calls=[call("check", {"target": "billing"}, "c1")]),
            AIMessage(content="", tool_calls=[call("check", {"target": "auth"}, "c2")]),
            AIMessage(content="Both ok."),
        ]
    )
    saver = InMemorySaver()
    thread = {"configurable": {"thread_id": "t1"}}
    config = aiden.Config(durability="none")
    async with aiden.open_memory(tmp_path, config=config) as memory:
        agent = create_agent(model, tools=[check], middleware=[aiden_middleware(memory)], checkpointer=saver)
        with pytest.raises(Crash):
            await agent.ainvoke({"messages": [HumanMessage("check billing and auth")]}, thread)
    async with aiden.open_memory(tmp_path, config=config) as memory:  # the restarted process
        agent = create_agent(model, tools=[check], middleware=[aiden_middleware(memory)], checkpointer=saver)
        state = await agent.ainvoke(None, thread)
        active = memory.run_active
        hot = await memory.hot_window()
    assert (state["messages"][-1].content, active) == ("Both ok.", False)
    assert kinds(hot) == [
        ("user_input", "check billing and auth", None),
        ("tool_call", "", "c1"),
        ("tool_result", "billing: ok", "c1"),
        ("tool_call", "", "c2"),
        ("tool_result", "auth: ok", "c2"),
        ("assistant_output", "Both ok.", None),
    ]
    # The crashed process left its run open; the resumed one is its own episode of the same goal, ended.
    found = [json.loads(p.read_text()) for p in (tmp_path / "memory" / "episodes").glob("*/*/episode.json")]
    crashed, resumed = sorted(found, key=lambda e: e["finished_at"])
    assert (crashed["goal"], crashed["note"]) == ("check billing and auth", "memory closed during the run")
    assert (resumed["goal"], resumed["note"]) == ("check billing and auth", "")
    assert [(e["type"], e["content"]) for e in resumed["events"]] == [
        ("tool_result", "auth: ok"),
        ("assistant_output", "Both ok."),
    ]


def answered_in_order(messages: list[BaseMessage]) -> bool:
    """Every AI message's tool calls are answered by the ToolMessages right after it, and no others."""
    expected: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            if not expected or message.tool_call_id != expected.pop(0):
                return False
        elif expected:
            return False
        if isinstance(message, AIMessage):
            expected = [c["id"] for c in message.tool_calls]
    return not expected


async def test_only_the_first_system_message_is_sent_after_a_split_turn(tmp_path: Path) -> None:
    """Providers without mid-conversation system messages (ChatAnthropic for most Claude models) take every call."""
    paths = ["a.py", "b.py", "c.py", "d.py"]
    model = ScriptedChat(
        script=[
            *[AIMessage(content="", tool_calls=[call("read_source", {"path": p}, f"c{n}")]) for n, p in enumerate(paths)],
            AIMessage(content="all read"),
            AIMessage(content="second answer"),
        ]
    )
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:

        @tool
        async def read_source(path: str) -> str:
            """Read a source file."""
            if path == "c.py":  # a compaction lands mid-run, as a background one would
                assert (await memory.maintain(manual=True)).compacted is True
            if path == "d.py":
                await memory.append(aiden.SessionEvent(type="screen_context", content="editor shows d.py"))
            return f"contents of {path}: " + "x = 1\n" * 30

        agent = create_agent(
            model, tools=[read_source], system_prompt="You are terse.", middleware=[aiden_middleware(memory)]
        )
        await agent.ainvoke({"messages": [HumanMessage("read the four files")]})
        await agent.ainvoke({"messages": [HumanMessage("and now?")]})
    assert len(model.received) == 6
    for received in model.received:
        assert isinstance(received[0], SystemMessage)
        assert not any(isinstance(m, SystemMessage) for m in received[1:])
        assert answered_in_order(received)
    # The call after d.py: the split turn's context and the screen event as human messages.
    after = model.received[4]
    assert [type(m) for m in after] == [
        SystemMessage, HumanMessage, HumanMessage, AIMessage, ToolMessage, AIMessage, ToolMessage, HumanMessage
    ]
    assert after[2].text.startswith("Turn context (the start of this turn was compacted):\n")
    assert [c["id"] for m in after[3:6:2] for c in m.tool_calls] == ["c2", "c3"]
    assert after[7].text == "editor shows d.py"


async def test_a_structured_answer_called_beside_another_tool_is_the_runs_answer(tmp_path: Path) -> None:
    model = ScriptedChat(
        script=[
            AIMessage(
                content="",
                tool_calls=[
                    call("City", {"name": "Paris", "country": "France"}, "o1"),
                    call("run_tests", {"target": "geo"}, "f1"),
                ],
            )
        ]
    )
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        agent = create_agent(
            model, tools=[run_tests], response_format=ToolStrategy(City), middleware=[aiden_middleware(memory)]
        )
        state = await agent.ainvoke({"messages": [HumanMessage("capital of France?")]})
        assert memory.run_active is False
        hot = await memory.hot_window()
    assert state["messages"][-1].text == "geo: 3 passed"  # the agent ended on the other tool's result
    assert kinds(hot)[-3:] == [
        ("tool_result", "Returning structured response: name='Paris' country='France'", "o1"),
        ("tool_result", "geo: 3 passed", "f1"),
        ("assistant_output", '{"name":"Paris","country":"France"}', None),
    ]


@tool
def search_docs(query: str) -> list[dict[str, Any]]:
    """Search the docs (Anthropic search_result blocks, for citations)."""
    found = {"type": "text", "text": "x is 1"}
    return [
        {"type": "text", "text": "Found:"},
        {"type": "search_result", "source": "https://x", "content": [found]},
        {"type": "json", "json": {"x": 1}},  # data: logged as itself
    ]


async def test_a_tool_result_with_provider_blocks_is_logged_as_text_and_markers(tmp_path: Path) -> None:
    model = ScriptedChat(script=turn([call("search_docs", {"query": "x"}, "c1")], "x is 1."))
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        agent = create_agent(model, tools=[search_docs], middleware=[aiden_middleware(memory)])
        await agent.ainvoke({"messages": [HumanMessage("what is x?")]})
        assert memory.run_active is False
        hot = await memory.hot_window()
    assert kinds(hot) == [
        ("user_input", "what is x?", None),
        ("tool_call", "", "c1"),
        ("tool_result", 'Found:\n[search_result]\n{"x": 1}', "c1"),
        ("assistant_output", "x is 1.", None),
    ]
    assert hot[2].tool_name == "search_docs"

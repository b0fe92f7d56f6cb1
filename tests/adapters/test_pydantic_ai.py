"""aiden_history / recall_tool against real pydantic-ai: exact log, aiden's prompt, compaction, recall."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest

pytest.importorskip("pydantic_ai")

from pydantic import BaseModel
from pydantic_ai import Agent, ImageUrl, ModelRetry
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

import aiden
from aiden.adapters.pydantic_ai import aiden_history, prompt_to_messages, recall_tool
from aiden.context.governance import STUB_PREFIX
from aiden.context.prompt import PromptLayers
from aiden.testing import FakeLLMServer
from tests.adapters import long_session
from tests.helpers import SMALL_MANUAL

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio
FAST = aiden.Config(durability="none")


class Scripted:
    """A FunctionModel function answering from a script and recording what the model received."""

    def __init__(self, script: list[ModelResponse]) -> None:
        self.script = list(script)
        self.received: list[list[Any]] = []
        self.history: Any = None

    def __call__(self, messages: list[Any], info: AgentInfo) -> ModelResponse:
        self.received.append(list(messages))
        response = self.script.pop(0)
        if self.history is not None and self.history.last_prompt is not None:
            # Counted as a provider counts: the prompt with its tool schemas (FunctionModel's own
            # estimate leaves the schemas out, which would teach aiden's calibration a wrong factor).
            response.usage = RequestUsage(input_tokens=self.history.last_prompt.estimated_tokens, output_tokens=8)
        return response


def call(name: str, args: dict[str, Any], call_id: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, json.dumps(args), tool_call_id=call_id)])


def answer(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def run_tests(target: str) -> str:
    """Run the tests of a target."""
    return f"{target}: 3 passed"


def make_agent(memory: aiden.Memory, model: Scripted) -> Agent[None, str]:
    model.history = aiden_history(memory)
    return Agent(
        FunctionModel(model),
        system_prompt="be brief",
        tools=[run_tests, recall_tool(memory)],
        capabilities=[model.history],
    )


def kinds(events: list[aiden.SessionEvent]) -> list[tuple[Any, ...]]:
    return [(e.type, e.role, e.content, e.tool_call_id, e.tool_name, e.tool_args) for e in events]


def flat(messages: list[Any]) -> list[tuple[str, Any]]:
    """(part class, text) of every part the model received."""
    out: list[tuple[str, Any]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                out.append(("ToolCallPart", (part.tool_name, part.args_as_json_str(), part.tool_call_id)))
            elif isinstance(part, ToolReturnPart):
                out.append(("ToolReturnPart", (part.model_response_str(), part.tool_call_id)))
            else:
                out.append((type(part).__name__, part.content))
    return out


async def test_a_run_is_logged_exactly_and_the_model_gets_aidens_prompt(tmp_path: Path) -> None:
    model = Scripted([call("run_tests", {"target": "billing"}, "c1"), answer("Billing passes.")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        result = await make_agent(memory, model).run("check billing")
        hot = await memory.hot_window()
        prompt = (await memory.build_messages(PromptLayers(role_identity="be brief"))).messages
    assert result.output == "Billing passes."
    assert kinds(hot) == [
        ("user_input", "user", "check billing", None, None, None),
        ("tool_call", "assistant", "", "c1", "run_tests", '{"target":"billing"}'),
        ("tool_result", "tool", "billing: 3 passed", "c1", "run_tests", None),
        ("assistant_output", "assistant", "Billing passes.", None, None, None),
    ]
    system = prompt[0]["content"]
    assert prompt[0]["role"] == "system" and "be brief" in system
    assert flat(model.received[0]) == [("SystemPromptPart", system), ("UserPromptPart", "check billing")]
    assert flat(model.received[1]) == [
        ("SystemPromptPart", system),
        ("UserPromptPart", "check billing"),
        ("ToolCallPart", ("run_tests", '{"target":"billing"}', "c1")),
        ("ToolReturnPart", ("billing: 3 passed", "c1")),
    ]
    # The agent's own system prompt part is not sent again beside aiden's system layer.
    assert sum(isinstance(p, SystemPromptPart) for m in model.received[1] for p in m.parts) == 1


async def test_second_run_without_history_sees_the_first_and_nothing_is_logged_twice(tmp_path: Path) -> None:
    model = Scripted(
        [
            call("run_tests", {"target": "billing"}, "c1"),
            answer("Billing passes."),
            answer("It passed."),
            answer("Still passes."),
        ]
    )
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        agent = make_agent(memory, model)
        first = await agent.run("check billing")
        await agent.run("and now?")  # aiden holds the history
        await agent.run("once more", message_history=first.all_messages())  # already-logged parts
        hot = await memory.hot_window()
    assert [(e.type, e.content) for e in hot] == [
        ("user_input", "check billing"),
        ("tool_call", ""),
        ("tool_result", "billing: 3 passed"),
        ("assistant_output", "Billing passes."),
        ("user_input", "and now?"),
        ("assistant_output", "It passed."),
        ("user_input", "once more"),
        ("assistant_output", "Still passes."),
    ]
    assert [t for t in flat(model.received[2])][1:] == [
        ("UserPromptPart", "check billing"),
        ("ToolCallPart", ("run_tests", '{"target":"billing"}', "c1")),
        ("ToolReturnPart", ("billing: 3 passed", "c1")),
        ("TextPart", "Billing passes."),
        ("UserPromptPart", "and now?"),
    ]
    assert flat(model.received[3])[-3:] == [
        ("UserPromptPart", "and now?"),
        ("TextPart", "It passed."),
        ("UserPromptPart", "once more"),
    ]


async def test_retries_are_logged_a_tool_retry_as_its_result_a_validation_retry_as_a_system_event(
    tmp_path: Path,
) -> None:
    model = Scripted([call("run_tests", {}, "c1"), answer("short"), answer("a longer answer")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        agent = make_agent(memory, model)

        @agent.output_validator
        def in_more_words(text: str) -> str:
            if len(text) < 6:
                raise ModelRetry("answer in more words")
            return text

        result = await agent.run("check")
        hot = await memory.hot_window()
    assert result.output == "a longer answer"
    assert kinds(hot) == [
        ("user_input", "user", "check", None, None, None),
        ("tool_call", "assistant", "", "c1", "run_tests", "{}"),
        (
            "tool_result",
            "tool",
            '{"error":[{"type":"missing","loc":["target"],"msg":"Field required","input":{}}]}',
            "c1",
            "run_tests",
            None,
        ),
        ("assistant_output", "assistant", "short", None, None, None),
        (
            "system_event",
            None,
            "Your previous response failed the application's validation (this is automated feedback, "
            "not a message from the user):\n<pyai:retry_feedback>\nanswer in more words\n</pyai:retry_feedback>",
            None,
            None,
            None,
        ),
        ("assistant_output", "assistant", "a longer answer", None, None, None),
    ]


class City(BaseModel):
    name: str
    country: str


@pytest.mark.parametrize("continued", [False, True])
async def test_a_structured_output_run_ends_with_the_output_tools_arguments(tmp_path: Path, continued: bool) -> None:
    model = Scripted(
        [
            call("final_result", {"name": "Paris", "country": "France"}, "o1"),
            call("final_result", {"name": "Lyon", "country": "France"}, "o2"),
        ]
    )
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        model.history = aiden_history(memory)
        agent = Agent(FunctionModel(model), output_type=City, capabilities=[model.history])
        first = await agent.run("capital of France?")
        active_after_first = memory.run_active
        # Continued as pydantic-ai documents it, too: the first run's messages as the history (they
        # end with pydantic-ai's return for the output tool, whose call was the first run's answer).
        history = first.all_messages() if continued else None
        second = await agent.run("and its second city?", message_history=history)
        active_after_second = memory.run_active
        hot = await memory.hot_window()
    assert (first.output, second.output) == (City(name="Paris", country="France"), City(name="Lyon", country="France"))
    assert (active_after_first, active_after_second) == (False, False)
    assert kinds(hot) == [
        ("user_input", "user", "capital of France?", None, None, None),
        ("assistant_output", "assistant", '{"name":"Paris","country":"France"}', None, None, None),
        ("user_input", "user", "and its second city?", None, None, None),
        ("assistant_output", "assistant", '{"name":"Lyon","country":"France"}', None, None, None),
    ]
    # The first answer is an answer in the second run's prompt, not a call left without a result.
    assert flat(model.received[1]) == [
        ("UserPromptPart", "capital of France?"),
        ("TextPart", '{"name":"Paris","country":"France"}'),
        ("UserPromptPart", "and its second city?"),
    ]


def lookup(q: str) -> str:
    """Look something up."""
    return "found"


@pytest.mark.parametrize("end_strategy", ["early", "exhaustive"])
async def test_an_output_tool_called_beside_a_function_tool_ends_the_run_with_the_output(
    tmp_path: Path, end_strategy: Any
) -> None:
    both = ModelResponse(
        parts=[
            ToolCallPart("final_result", '{"name":"Paris","country":"France"}', tool_call_id="o1"),
            ToolCallPart("lookup", '{"q":"x"}', tool_call_id="f1"),
        ]
    )
    model = Scripted([both, answer("Lyon.")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        history = aiden_history(memory)
        agent = Agent(
            FunctionModel(model), output_type=City, tools=[lookup], capabilities=[history], end_strategy=end_strategy
        )
        result = await agent.run("capital of France?")
        active = memory.run_active
        await Agent(FunctionModel(model), capabilities=[history]).run("second city?")
        hot = await memory.hot_window()
    looked_up = "found" if end_strategy == "exhaustive" else "Tool not executed - a final result was already processed."
    assert (result.output, active) == (City(name="Paris", country="France"), False)
    assert kinds(hot) == [
        ("user_input", "user", "capital of France?", None, None, None),
        ("tool_call", "assistant", "", "o1", "final_result", '{"name":"Paris","country":"France"}'),
        ("tool_call", "assistant", "", "f1", "lookup", '{"q":"x"}'),
        ("tool_result", "tool", "Final result processed.", "o1", "final_result", None),
        ("tool_result", "tool", looked_up, "f1", "lookup", None),
        ("assistant_output", "assistant", '{"name":"Paris","country":"France"}', None, None, None),
        ("user_input", "user", "second city?", None, None, None),
        ("assistant_output", "assistant", "Lyon.", None, None, None),
    ]
    # Both calls are answered in the next run's prompt.
    assert flat(model.received[1]) == [
        ("UserPromptPart", "capital of France?"),
        ("ToolCallPart", ("final_result", '{"name":"Paris","country":"France"}', "o1")),
        ("ToolCallPart", ("lookup", '{"q":"x"}', "f1")),
        ("ToolReturnPart", ("Final result processed.", "o1")),
        ("ToolReturnPart", (looked_up, "f1")),
        ("TextPart", '{"name":"Paris","country":"France"}'),
        ("UserPromptPart", "second city?"),
    ]


async def test_an_output_tool_call_refused_by_validation_is_a_call_and_the_run_ends_with_the_valid_one(
    tmp_path: Path,
) -> None:
    model = Scripted(
        [
            call("final_result", {"name": "Paris"}, "o1"),
            call("final_result", {"name": "Paris", "country": "France"}, "o2"),
            answer("Lyon."),
        ]
    )
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        history = aiden_history(memory)
        result = await Agent(FunctionModel(model), output_type=City, capabilities=[history]).run("capital of France?")
        active = memory.run_active
        await Agent(FunctionModel(model), capabilities=[history]).run("second city?")
        hot = await memory.hot_window()
    refused = (
        '{"error":[{"type":"missing","loc":["country"],"msg":"Field required","input":{"name":"Paris"}}]}'
    )
    assert (result.output, active) == (City(name="Paris", country="France"), False)
    assert kinds(hot) == [
        ("user_input", "user", "capital of France?", None, None, None),
        ("tool_call", "assistant", "", "o1", "final_result", '{"name":"Paris"}'),
        ("tool_result", "tool", refused, "o1", "final_result", None),
        ("assistant_output", "assistant", '{"name":"Paris","country":"France"}', None, None, None),
        ("user_input", "user", "second city?", None, None, None),
        ("assistant_output", "assistant", "Lyon.", None, None, None),
    ]
    assert flat(model.received[2]) == [
        ("UserPromptPart", "capital of France?"),
        ("ToolCallPart", ("final_result", '{"name":"Paris"}', "o1")),
        ("ToolReturnPart", (refused, "o1")),
        ("TextPart", '{"name":"Paris","country":"France"}'),
        ("UserPromptPart", "second city?"),
    ]


@pytest.mark.parametrize("restart", [False, True])
async def test_a_run_resumed_from_stored_history_logs_nothing_twice(tmp_path: Path, restart: bool) -> None:
    """Deferred-tool approval (pydantic-ai's human in the loop), the history stored as JSON between requests."""
    from pydantic_ai import DeferredToolRequests, DeferredToolResults
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    model = Scripted([call("delete", {"path":"x"}, "d1"), answer("Deleted.")])

    def make(memory: aiden.Memory) -> Agent[None, str | DeferredToolRequests]:
        agent = Agent(
            FunctionModel(model), output_type=[str, DeferredToolRequests], capabilities=[aiden_history(memory)]
        )

        @agent.tool_plain(requires_approval=True)
        def delete(path: str) -> str:
            """Delete a file."""
            return f"deleted {path}"

        return agent

    async def resume(agent: Agent[None, str | DeferredToolRequests], stored: bytes) -> Any:
        history = ModelMessagesTypeAdapter.validate_json(stored)
        return await agent.run(message_history=history, deferred_tool_results=DeferredToolResults(approvals={"d1": True}))

    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        agent = make(memory)
        stored = ModelMessagesTypeAdapter.dump_json((await agent.run("delete x")).all_messages())
        if not restart:
            resumed = await resume(agent, stored)
            hot = await memory.hot_window()
    if restart:
        async with aiden.open_memory(tmp_path, config=FAST) as memory:
            resumed = await resume(make(memory), stored)
            hot = await memory.hot_window()
    assert resumed.output == "Deleted."
    assert kinds(hot) == [
        ("user_input", "user", "delete x", None, None, None),
        ("tool_call", "assistant", "", "d1", "delete", '{"path":"x"}'),
        ("tool_result", "tool", "deleted x", "d1", "delete", None),
        ("assistant_output", "assistant", "Deleted.", None, None, None),
    ]
    # The resumed request holds the call once, answered, under its own id.
    assert [t for t in flat(model.received[1]) if t[0] != "SystemPromptPart"] == [
        ("UserPromptPart", "delete x"),
        ("ToolCallPart", ("delete", '{"path":"x"}', "d1")),
        ("ToolReturnPart", ("deleted x", "d1")),
    ]


async def test_an_image_prompt_is_sent_on_every_request_of_its_run(tmp_path: Path) -> None:
    image = ImageUrl("https://example.com/cat.png")
    model = Scripted([call("run_tests", {"target": "zoom"}, "c1"), answer("a cat"), answer("grey")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        agent = make_agent(memory, model)
        await agent.run(["what animal is this?", image])
        await agent.run("what colour?")
        hot = await memory.hot_window()
    assert hot[0].content == "what animal is this?\n[image]"
    assert flat(model.received[0])[1:] == [("UserPromptPart", ["what animal is this?", image])]
    assert flat(model.received[1])[1:] == [
        ("UserPromptPart", ["what animal is this?", image]),
        ("ToolCallPart", ("run_tests", '{"target":"zoom"}', "c1")),
        ("ToolReturnPart", ("zoom: 3 passed", "c1")),
    ]
    # A later run is sent the log's text of it.
    assert flat(model.received[2])[1] == ("UserPromptPart", "what animal is this?\n[image]")


async def test_after_compaction_the_model_sees_the_summary_and_recall_is_answered_by_aiden(
    tmp_path: Path,
) -> None:
    model = Scripted(
        [
            call("run_tests", {"target": "billing"}, "c1"),
            answer("Billing passes."),
            call("run_tests", {"target": "invoices"}, "c2"),
            answer("Invoices pass."),
            answer("Both pass."),
            call("recall_session_chunks", {"query": "billing passed"}, "c3"),
            answer("It passed."),
        ]
    )
    # The hot window keeps the second turn only: the first (its call, result and answer) is compacted.
    config = msgspec.structs.replace(SMALL_MANUAL, keep_recent_tokens=45)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        agent = make_agent(memory, model)
        await agent.run("check billing " + "x" * 400)
        await agent.run("check invoices " + "y" * 400)
        assert (await memory.maintain(manual=True)).compacted is True
        summary = await memory.summary_md()
        await agent.run("and both?")
        await agent.run("what did billing give?")
        final = await memory.hot_window()
    assert "## Recent Chunks" in summary and "run_tests(target=billing)" in summary
    seen = flat(model.received[4])
    assert seen[0][0] == "SystemPromptPart" and summary.strip() in seen[0][1]
    texts = [t for _, t in seen]
    assert "Billing passes." not in texts  # the compacted turn is replaced by the summary layer
    assert ("ToolCallPart", ("run_tests", '{"target":"billing"}', "c1")) not in seen
    assert seen[-1] == ("UserPromptPart", "and both?")
    recalled = model.received[6][-1].parts[-1]
    assert isinstance(recalled, ToolReturnPart) and recalled.tool_call_id == "c3"
    hits = json.loads(recalled.model_response_str())["results"]
    assert [(h["seq"], h["type"], h["text"]) for h in hits] == [
        (4, "assistant_output", "Billing passes."),
        (3, "tool_result", "billing: 3 passed\nrun_tests"),
        (2, "tool_call", 'run_tests\n{"target":"billing"}'),
    ]
    assert [(e.type, e.content, e.tool_call_id) for e in final][-4:] == [
        ("user_input", "what did billing give?", None),
        ("tool_call", "", "c3"),
        ("tool_result", recalled.model_response_str(), "c3"),
        ("assistant_output", "It passed.", None),
    ]


def test_prompt_to_messages_maps_each_role() -> None:
    built = prompt_to_messages(
        [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "looking",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "run", "arguments": '{"a": 1}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ]
    )
    assert [type(m) for m in built] == [ModelRequest, ModelResponse, ModelRequest, ModelResponse]
    assert flat(built) == [
        ("SystemPromptPart", "sys"),
        ("UserPromptPart", "hi"),
        ("TextPart", "looking"),
        ("ToolCallPart", ("run", '{"a":1}', "c1")),
        ("ToolReturnPart", ("ok", "c1")),
        ("TextPart", "done"),
    ]
    tool_return = built[2].parts[0]
    assert isinstance(tool_return, ToolReturnPart) and tool_return.tool_name == "run"
    assert isinstance(built[0].parts[1], UserPromptPart)


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "example_pydantic_ai_history", ROOT / "examples" / "pydantic_ai_history.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_example_runs_two_runs_against_a_function_model(tmp_path: Path) -> None:
    example = _load_example()
    answers = await example.main(tmp_path)
    fact = "the billing test is flaky because of a timezone bug"
    assert answers == [f"Found it: {fact}", f"Earlier I said: Found it: {fact}"]
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        hot = await memory.hot_window()
    assert [(e.type, e.content) for e in hot] == [
        ("user_input", "Why is the billing test flaky?"),
        ("tool_call", ""),
        ("tool_result", fact),
        ("assistant_output", f"Found it: {fact}"),
        ("user_input", "What did you find earlier?"),
        ("assistant_output", f"Earlier I said: Found it: {fact}"),
    ]
    assert (hot[1].tool_call_id, hot[1].tool_name, hot[1].tool_args) == (
        "call_1",
        "lookup",
        '{"topic":"billing"}',
    )


async def test_example_runs_two_runs_against_a_local_server(tmp_path: Path) -> None:
    example = _load_example()
    with FakeLLMServer(responder=example.fake_responder) as server:
        answers = await example.main(tmp_path, example.openai_model(server.base_url))
        requests = server.requests
    fact = "the billing test is flaky because of a timezone bug"
    assert answers == [f"Found it: {fact}", f"Earlier I said: Found it: {fact}"]
    assert server.handler_errors == []
    assert len(requests) == 3
    # The second run passed no message_history: the first run's turn comes from aiden.
    second = requests[2].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second[1]["content"] == "Why is the billing test flaky?"
    assert (second[3]["tool_call_id"], second[3]["content"]) == ("call_1", fact)
    assert {t["function"]["name"] for t in requests[0].body["tools"]} == {"lookup", "recall_session_chunks"}
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        hot = await memory.hot_window()
    assert [(e.type, e.content) for e in hot] == [
        ("user_input", "Why is the billing test flaky?"), ("tool_call", ""), ("tool_result", fact),
        ("assistant_output", f"Found it: {fact}"),
        ("user_input", "What did you find earlier?"), ("assistant_output", f"Earlier I said: Found it: {fact}"),
    ]  # fmt: skip


def test_importing_the_adapter_does_not_import_pydantic_ai() -> None:
    code = (
        "import sys, json, aiden, aiden.adapters, aiden.adapters.pydantic_ai; "
        "print(json.dumps('pydantic_ai' in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) is False


async def test_every_request_of_a_long_tool_heavy_session_fits_the_window(tmp_path: Path) -> None:
    """The window promise through pydantic-ai: every request its OpenAI model sends is aiden's prompt, in budget.

    Instructions (pydantic-ai sends them itself) count: aiden's system layer carries them.
    The current request's tool returns are sent as aiden shows them: one larger than its
    share of the budget as aiden's stub.
    """
    from pydantic_ai import RunContext
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def read_file(n: int) -> str:
        """Read one of the project's files."""
        return long_session.tool_output(n)

    script = long_session.Script()
    respond = script.chat_responder()
    builds: list[aiden.PromptBuild] = []
    histories: list[Any] = []

    def responder(body: dict[str, Any]) -> dict[str, Any] | str:
        builds.append(getattr(histories[0], "last_prompt", None))  # the prompt aiden built for this request
        return respond(body)

    with FakeLLMServer(responder=responder) as server:
        model = OpenAIChatModel("fake", provider=OpenAIProvider(base_url=server.base_url, api_key="x"))
        async with aiden.open_memory(
            tmp_path, config=long_session.CONFIG, context_window=long_session.WINDOW
        ) as memory:
            history = aiden_history(memory)
            histories.append(history)
            agent = Agent(
                model,
                system_prompt="be brief",
                instructions=long_session.INSTRUCTIONS,
                tools=[read_file],
                capabilities=[history],
            )

            @agent.instructions
            def files_read(ctx: RunContext[None]) -> str:
                return f"Files read so far: {script.files}."

            for turn in range(long_session.TURNS):
                result = await agent.run(script.ask(turn))
                assert result.output == long_session.Script.ANSWER
                await memory.maintain()  # the pass the turn's end asked for has run: compactions are counted
            budget = memory.config.prompt_budget()
            sent = [long_session.prompt_tokens(r.body["messages"], memory) for r in server.requests]
            stats = memory.stats()
    calls = long_session.TURNS * (long_session.CALLS_PER_TURN + 1)
    assert (budget, len(sent)) == (3500, calls)
    assert max(sent) <= budget
    assert stats.compactions >= 3
    assert [b.over_budget for b in builds] == [False] * calls
    # What was sent is what aiden built and estimated; the tool schemas the request carried count too.
    assert sent == [b.estimated_tokens - b.tool_tokens for b in builds]
    assert all(b.tool_tokens > 0 for b in builds)
    assert max(s + b.tool_tokens for s, b in zip(sent, builds, strict=True)) <= budget
    assert all([t["function"]["name"] for t in r.body["tools"]] == ["read_file"] for r in server.requests)
    # The instructions were sent once, inside aiden's system layer: the dynamic ones apart, as runtime context.
    last_system = builds[-1].messages[:2]
    assert [m["role"] for m in last_system] == ["system", "system"]
    assert last_system[0]["content"].startswith(f"be brief\n\n{long_session.INSTRUCTIONS}\n\n")
    assert last_system[1]["content"] == f"Files read so far: {script.files}."
    bodies = [json.dumps(r.body["messages"]) for r in server.requests]
    assert [b.count(long_session.INSTRUCTIONS) for b in bodies] == [1] * calls
    # Every mechanism of the promise took part: results stubbed (the largest even when new), summary fitted.
    newest = [r.body["messages"][-1] for r in server.requests if r.body["messages"][-1]["role"] == "tool"]
    assert any(str(m["content"]).startswith(STUB_PREFIX) for m in newest)
    assert any(b.stubbed for b in builds)
    assert any(b.summary_trimmed for b in builds)

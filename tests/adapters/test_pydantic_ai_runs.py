"""aiden_history against real pydantic-ai: failed runs end as failures; the agent's whole system prompt, every run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunContext,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import UsageLimits

import aiden
from aiden.adapters.pydantic_ai import aiden_history
from tests.adapters.test_pydantic_ai import FAST, City, Scripted, answer, call, flat, kinds, run_tests

pytestmark = pytest.mark.anyio
REFUSED = "UnexpectedModelBehavior: Exceeded maximum output retries (1)"
FEEDBACK = (
    "Your previous response failed the application's validation (this is automated feedback, "
    "not a message from the user):\n<pyai:retry_feedback>\nanswer in more words\n</pyai:retry_feedback>"
)


def stored_episode(root: Path) -> dict[str, Any]:
    """The one committed episode (``memory/episodes/<yyyy>/<id>/episode.json``)."""
    (path,) = (root / "memory" / "episodes").glob("*/*/episode.json")
    return json.loads(path.read_text())  # type: ignore[no-any-return]


async def test_a_text_answer_refused_until_the_retries_ran_out_is_logged_and_ends_the_run_as_a_failure(
    tmp_path: Path,
) -> None:
    model = Scripted([answer("no"), answer("nope"), answer("A longer answer.")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        history = aiden_history(memory)
        agent = Agent(FunctionModel(model), capabilities=[history], retries=1)

        @agent.output_validator
        def in_more_words(text: str) -> str:
            if len(text) < 6:
                raise ModelRetry("answer in more words")
            return text

        with pytest.raises(UnexpectedModelBehavior, match="Exceeded maximum output retries"):
            await agent.run("check")
        active = memory.run_active
        await Agent(FunctionModel(model), capabilities=[history]).run("again")
        hot = await memory.hot_window()
    assert active is False
    assert kinds(hot) == [
        ("user_input", "user", "check", None, None, None),
        ("assistant_output", "assistant", "no", None, None, None),
        ("system_event", None, FEEDBACK, None, None, None),
        ("assistant_output", "assistant", "nope", None, None, None),
        ("user_input", "user", "again", None, None, None),
        ("assistant_output", "assistant", "A longer answer.", None, None, None),
    ]
    # The next run sees the refused answer as the failed run's last word.
    assert flat(model.received[2])[-2:] == [("TextPart", "nope"), ("UserPromptPart", "again")]


async def test_a_structured_answer_refused_until_the_retries_ran_out_is_logged_as_a_call_and_the_run_fails(
    tmp_path: Path,
) -> None:
    model = Scripted(
        [call("final_result", {"name": "Paris"}, "o1"), call("final_result", {"name": "Lyon"}, "o2"), answer("Ok.")]
    )
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        history = aiden_history(memory)
        with pytest.raises(UnexpectedModelBehavior, match="Exceeded maximum output retries"):
            await Agent(FunctionModel(model), output_type=City, capabilities=[history], retries=1).run("capital?")
        active = memory.run_active
        await Agent(FunctionModel(model), capabilities=[history]).run("again")
        hot = await memory.hot_window()
    refused = '{"error":[{"type":"missing","loc":["country"],"msg":"Field required","input":{"name":"Paris"}}]}'
    assert active is False
    assert kinds(hot) == [
        ("user_input", "user", "capital?", None, None, None),
        ("tool_call", "assistant", "", "o1", "final_result", '{"name":"Paris"}'),
        ("tool_result", "tool", refused, "o1", "final_result", None),
        ("tool_call", "assistant", "", "o2", "final_result", '{"name":"Lyon"}'),
        ("assistant_output", "assistant", f"[the run failed: {REFUSED}]", None, None, None),
        ("user_input", "user", "again", None, None, None),
        ("assistant_output", "assistant", "Ok.", None, None, None),
    ]
    # The refused last call has a placeholder result in the next run's prompt: a valid chat sequence.
    assert flat(model.received[2])[-4:] == [
        ("ToolCallPart", ("final_result", '{"name":"Lyon"}', "o2")),
        ("ToolReturnPart", ("[no result was recorded for this tool call]", "o2")),
        ("TextPart", f"[the run failed: {REFUSED}]"),
        ("UserPromptPart", "again"),
    ]


def broken(path: str) -> str:
    """Read a file."""
    raise OSError(f"cannot read {path}")


async def test_a_run_a_tool_breaks_ends_as_a_failure_and_its_episode_says_why(tmp_path: Path) -> None:
    model = Scripted([ModelResponse(parts=[TextPart("Reading it."), ToolCallPart("broken", '{"path":"a"}', "c1")])])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        with pytest.raises(OSError, match="cannot read a"):
            await Agent(FunctionModel(model), tools=[broken], capabilities=[aiden_history(memory)]).run("read a")
        active, episode_open = memory.run_active, memory.episode_id is not None
        hot = await memory.hot_window()
    assert (active, episode_open) == (False, False)
    assert kinds(hot) == [
        ("user_input", "user", "read a", None, None, None),
        ("assistant_output", "assistant", "Reading it.", None, None, None),
        ("tool_call", "assistant", "", "c1", "broken", '{"path":"a"}'),
        ("assistant_output", "assistant", "[the run failed: OSError: cannot read a]", None, None, None),
    ]
    episode = stored_episode(tmp_path)
    assert (episode["goal"], episode["outcome"], episode["note"]) == ("read a", "failure", "OSError: cannot read a")


async def test_a_run_stopped_by_a_usage_limit_logs_the_tool_results_it_could_not_send(tmp_path: Path) -> None:
    model = Scripted([call("run_tests", {"target": "billing"}, "c1")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        agent = Agent(FunctionModel(model), tools=[run_tests], capabilities=[aiden_history(memory)])
        with pytest.raises(UsageLimitExceeded):
            await agent.run("check billing", usage_limits=UsageLimits(request_limit=1))
        active = memory.run_active
        hot = await memory.hot_window()
    assert kinds(hot)[:3] == [
        ("user_input", "user", "check billing", None, None, None),
        ("tool_call", "assistant", "", "c1", "run_tests", '{"target":"billing"}'),
        ("tool_result", "tool", "billing: 3 passed", "c1", "run_tests", None),
    ]
    (failed,) = [e.content for e in hot if e.type == "assistant_output"]
    assert active is False and failed.startswith("[the run failed: UsageLimitExceeded: The next request would exceed")


def deleting_agent(memory: aiden.Memory, model: Scripted, *prompts: str) -> Agent[None, str | DeferredToolRequests]:
    model.history = aiden_history(memory)
    agent = Agent(
        FunctionModel(model),
        system_prompt=prompts,
        output_type=[str, DeferredToolRequests],
        capabilities=[model.history],
    )

    @agent.tool_plain(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    return agent


def system_messages(model: Scripted) -> list[list[str]]:
    """The system prompt part(s) of each request the model received."""
    return [[text for kind, text in flat(received) if kind == "SystemPromptPart"] for received in model.received]


async def test_a_run_resumed_from_stored_history_after_a_restart_has_the_agents_system_prompt(tmp_path: Path) -> None:
    """pydantic-ai sends its system prompt only to a run without message_history; aiden's system message has it."""
    model = Scripted([call("delete", {"path": "x"}, "d1"), answer("Deleted.")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        started = await deleting_agent(memory, model, "be brief").run("delete x")
    stored = ModelMessagesTypeAdapter.dump_json(started.all_messages())
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        resumed = await deleting_agent(memory, model, "be brief").run(
            message_history=ModelMessagesTypeAdapter.validate_json(stored),
            deferred_tool_results=DeferredToolResults(approvals={"d1": True}),
        )
    assert resumed.output == "Deleted."
    first, again = system_messages(model)
    assert first == ["be brief"]
    assert again == ["be brief"]  # the same session: no PROJECT MEMORY of its own summary


async def test_every_part_of_the_agents_system_prompt_is_in_aidens_system_message(tmp_path: Path) -> None:
    model = Scripted([answer("Done.")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        model.history = aiden_history(memory)
        agent = Agent(
            FunctionModel(model),
            deps_type=str,
            system_prompt=["be brief", "use metric units"],
            capabilities=[model.history],
        )

        @agent.system_prompt
        def user_name(ctx: RunContext[str]) -> str:
            return f"the user is {ctx.deps}"

        await agent.run("go", deps="Ada")
    assert system_messages(model) == [["be brief\n\nuse metric units\n\nthe user is Ada"]]


async def test_an_answer_refused_in_a_run_resumed_after_a_restart_is_logged(tmp_path: Path) -> None:
    """No aiden run is active after the restart: the refused answer is logged as it came."""
    model = Scripted([call("delete", {"path": "x"}, "d1"), answer("no"), answer("nope")])

    def make(memory: aiden.Memory) -> Agent[None, str | DeferredToolRequests]:
        agent = deleting_agent(memory, model)

        @agent.output_validator
        def in_more_words(output: str | DeferredToolRequests) -> str | DeferredToolRequests:
            if isinstance(output, str) and len(output) < 6:
                raise ModelRetry("answer in more words")
            return output

        return agent

    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        stored = ModelMessagesTypeAdapter.dump_json((await make(memory).run("delete x")).all_messages())
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        with pytest.raises(UnexpectedModelBehavior, match="Exceeded maximum output retries"):
            await make(memory).run(
                message_history=ModelMessagesTypeAdapter.validate_json(stored),
                deferred_tool_results=DeferredToolResults(approvals={"d1": True}),
            )
        hot = await memory.hot_window()
    assert kinds(hot)[2:] == [
        ("tool_result", "tool", "deleted x", "d1", "delete", None),
        ("assistant_output", "assistant", "no", None, None, None),
        ("system_event", None, FEEDBACK, None, None, None),
        ("assistant_output", "assistant", "nope", None, None, None),
    ]


class FailingWrites(aiden.Storage):
    """Every write fails once armed (the disk gone while a run fails)."""

    armed = False

    def write(self, fd: int, data: bytes) -> None:
        if self.armed:
            raise aiden.StorageError("simulated: the disk is gone")
        super().write(fd, data)


async def test_a_run_error_stays_the_callers_error_when_the_memory_cannot_record_it(tmp_path: Path) -> None:
    storage = FailingWrites()

    def breaks_the_disk(path: str) -> str:
        """Read a file."""
        storage.armed = True
        raise OSError(f"cannot read {path}")

    model = Scripted([ModelResponse(parts=[ToolCallPart("breaks_the_disk", '{"path":"a"}', "c1")])])
    async with aiden.open_memory(tmp_path, config=FAST, storage=storage) as memory:
        agent = Agent(FunctionModel(model), tools=[breaks_the_disk], capabilities=[aiden_history(memory)])
        with pytest.raises(OSError, match="cannot read a"):
            await agent.run("read a")


async def test_a_system_prompt_given_in_the_message_history_is_aidens_role_identity(tmp_path: Path) -> None:
    # pydantic-ai sends the history's system prompt, not the agent's: so does aiden (a review finding).
    model = Scripted([answer("Arr.")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        model.history = aiden_history(memory)
        agent = Agent(FunctionModel(model), capabilities=[model.history])
        await agent.run("hello", message_history=[ModelRequest(parts=[SystemPromptPart("You are a pirate.")])])
    assert system_messages(model) == [["You are a pirate."]]


async def test_a_dynamic_system_prompt_runs_once_per_run(tmp_path: Path) -> None:
    model = Scripted([answer("Done.")])
    calls: list[str] = []
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        model.history = aiden_history(memory)
        agent = Agent(FunctionModel(model), deps_type=str, capabilities=[model.history])

        @agent.system_prompt
        def user_name(ctx: RunContext[str]) -> str:
            calls.append(ctx.deps)
            return f"the user is {ctx.deps}"

        await agent.run("go", deps="Ada")
    assert (calls, system_messages(model)) == (["Ada"], [["the user is Ada"]])


async def test_a_run_with_history_sends_the_system_prompt_of_its_own_dependencies(tmp_path: Path) -> None:
    # The history holds aiden's prompt of the earlier run (no dynamic part pydantic-ai evaluates again):
    # the agent's own system prompt is asked for this run's deps (a review finding: "Ada" was sent to Bob).
    model = Scripted([answer("Hi Ada."), answer("Hi Bob.")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        model.history = aiden_history(memory)
        agent = Agent(FunctionModel(model), deps_type=str, capabilities=[model.history])

        @agent.system_prompt(dynamic=True)
        def user_name(ctx: RunContext[str]) -> str:
            return f"the user is {ctx.deps}"

        first = await agent.run("hello", deps="Ada")
        await agent.run("hello again", deps="Bob", message_history=first.all_messages())
    assert system_messages(model) == [["the user is Ada"], ["the user is Bob"]]

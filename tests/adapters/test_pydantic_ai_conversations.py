"""One pydantic-ai capability serves one conversation: another conversation_id is refused, never given its history."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

import aiden
from aiden.adapters.pydantic_ai import aiden_history
from tests.adapters.test_pydantic_ai import Scripted, answer, call, flat, make_agent

pytestmark = pytest.mark.anyio
FAST = aiden.Config(durability="none")


async def test_a_second_conversation_is_refused_before_its_model_reads_the_first(tmp_path: Path) -> None:
    model = Scripted([answer("noted"), answer("hi bob")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        agent = Agent(FunctionModel(model), capabilities=[aiden_history(memory)])
        await agent.run("my card PIN is 4417 (alice)", conversation_id="alice")
        with pytest.raises(aiden.AidenError, match="AidenHistory serves conversation 'alice', not 'bob'"):
            await agent.run("hello, I am bob", conversation_id="bob", message_history=[])
        hot = await memory.hot_window()
        assert memory.run_active is False
    assert len(model.received) == 1  # bob's model was never called
    assert [(e.type, e.content) for e in hot] == [
        ("user_input", "my card PIN is 4417 (alice)"),
        ("assistant_output", "noted"),
    ]


async def test_one_conversation_across_runs_and_runs_without_a_conversation_id_work(tmp_path: Path) -> None:
    # A run given no conversation_id gets a new one from pydantic-ai, as does a run continuing the
    # history of such a run: none of them is a conversation of its own.
    questions = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh"]
    answers = ["one", "two", "three", "four", "five", "six", "seven"]
    model = Scripted([answer(text) for text in answers])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        agent = Agent(FunctionModel(model), capabilities=[aiden_history(memory)])
        first = await agent.run("first")
        second = await agent.run("second")
        await agent.run("third", message_history=first.all_messages())
        await agent.run("fourth", message_history=second.all_messages())
        await agent.run("fifth", conversation_id="alice")
        await agent.run("sixth")
        await agent.run("seventh", conversation_id="alice")
        hot = await memory.hot_window()
    turns = [text for pair in zip(questions, answers, strict=True) for text in pair]
    # Every run's model got the whole conversation so far, ending in its question.
    assert [[text for _, text in flat(call)] for call in model.received] == [
        turns[: 2 * n + 1] for n in range(7)
    ]
    assert [e.content for e in hot] == turns
    assert [e.type for e in hot] == ["user_input", "assistant_output"] * 7


async def test_the_conversation_holds_after_a_restart_and_for_a_capability_per_request(tmp_path: Path) -> None:
    # The conversation is read from the stored events: a new capability (a process restart, or one
    # built per request over a shared memory) refuses bob too, and alice's conversation continues.
    model = Scripted([call("run_tests", {"target": "billing"}, "c1"), answer("noted"), answer("welcome back")])
    refused = "AidenHistory serves conversation 'alice', not 'bob'"
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        await make_agent(memory, model).run("my card PIN is 4417 (alice)", conversation_id="alice")
        alices = await memory.hot_window()
        with pytest.raises(aiden.AidenError, match=refused):
            await make_agent(memory, model).run("hello, I am bob", conversation_id="bob")
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        with pytest.raises(aiden.AidenError, match=refused):
            await make_agent(memory, model).run("hello, I am bob", conversation_id="bob")
        assert await memory.hot_window() == alices
        assert memory.run_active is False
        await make_agent(memory, model).run("what was my PIN?", conversation_id="alice")
        hot = await memory.hot_window()
    assert len(model.received) == 3  # alice's two requests, then her next run's; bob's model was never called
    assert [text for _, text in flat(model.received[2])] == [
        "be brief",
        "my card PIN is 4417 (alice)",
        ("run_tests", '{"target":"billing"}', "c1"),
        ("billing: 3 passed", "c1"),
        "noted",
        "what was my PIN?",
    ]
    assert [(e.type, e.meta.get("adapter_conversation")) for e in hot] == [
        ("user_input", "alice"),
        ("tool_call", "alice"),
        ("tool_result", "alice"),
        ("assistant_output", None),  # commit_run's answer: the run's input carries the label
        ("user_input", "alice"),
        ("assistant_output", None),
    ]


async def test_runs_given_no_conversation_id_label_nothing_and_a_rotation_frees_the_memory(tmp_path: Path) -> None:
    # A run given none gets an id derived from its run_id: labelling with it would lock the memory
    # to an id no later run has. Events without a label are taken by the first conversation given.
    model = Scripted([answer(text) for text in ("one", "two", "hi bob", "hi dave")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        first = await make_agent(memory, model).run("first")
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        await make_agent(memory, model).run("second", message_history=first.all_messages())
        await make_agent(memory, model).run("hello, I am bob", conversation_id="bob")
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        with pytest.raises(aiden.AidenError, match="AidenHistory serves conversation 'bob', not 'carol'"):
            await make_agent(memory, model).run("hello, I am carol", conversation_id="carol")
        hot = await memory.hot_window()
        await memory.rotate()  # a new session: no conversation's yet
        await make_agent(memory, model).run("hello, I am dave", conversation_id="dave")
        rotated = await memory.hot_window()
    assert [text for _, text in flat(model.received[2])] == [
        "be brief", "first", "one", "second", "two", "hello, I am bob"
    ]
    assert len(model.received) == 4
    assert flat(model.received[3])[-1] == ("UserPromptPart", "hello, I am dave")  # after the root's project memory
    assert [(e.content, e.meta.get("adapter_conversation")) for e in hot] == [
        ("first", None),
        ("one", None),
        ("second", None),
        ("two", None),
        ("hello, I am bob", "bob"),
        ("hi bob", None),
    ]
    assert [(e.content, e.meta.get("adapter_conversation")) for e in rotated] == [
        ("hello, I am dave", "dave"),
        ("hi dave", None),
    ]

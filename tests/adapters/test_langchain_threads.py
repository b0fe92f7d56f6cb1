"""One LangChain middleware serves one LangGraph thread: another thread_id is refused, never given its conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import aiden
from aiden.adapters.langchain import aiden_middleware
from tests.adapters.test_langchain import ScriptedChat, call, kinds, run_tests, turn

pytestmark = pytest.mark.anyio
FAST = aiden.Config(durability="none")
REFUSED = "AidenMiddleware serves LangGraph thread 'alice', not 'bob'"


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


@pytest.mark.parametrize("checkpointed", [True, False])
async def test_a_second_thread_is_refused_before_its_model_reads_the_first(
    tmp_path: Path, checkpointed: bool
) -> None:
    # One compiled agent, a thread per user (LangGraph's multi-tenant shape), with or without a
    # checkpointer (aiden needs none): bob's model would get alice's conversation.
    model = ScriptedChat(script=[AIMessage(content="noted"), AIMessage(content="hi bob")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        saver = InMemorySaver() if checkpointed else None
        agent = create_agent(model, middleware=[aiden_middleware(memory)], checkpointer=saver)
        await agent.ainvoke({"messages": [HumanMessage("my card PIN is 4417 (alice)")]}, thread("alice"))
        with pytest.raises(aiden.AidenError, match=REFUSED):
            await agent.ainvoke({"messages": [HumanMessage("hello, I am bob")]}, thread("bob"))
        hot = await memory.hot_window()
        assert memory.run_active is False
    assert len(model.received) == 1  # bob's model was never called
    assert kinds(hot) == [
        ("user_input", "my card PIN is 4417 (alice)", None),
        ("assistant_output", "noted", None),
    ]


async def test_one_thread_across_invocations_and_runs_without_a_thread_work(tmp_path: Path) -> None:
    model = ScriptedChat(script=[AIMessage(content=text) for text in ("one", "two", "three", "four")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        middleware = aiden_middleware(memory)
        checkpointed = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
        plain = create_agent(model, middleware=[middleware])
        await checkpointed.ainvoke({"messages": [HumanMessage("first")]}, thread("alice"))
        await checkpointed.ainvoke({"messages": [HumanMessage("second")]}, thread("alice"))
        await plain.ainvoke({"messages": [HumanMessage("third")]})  # no thread_id: not checked
        await plain.ainvoke({"messages": [HumanMessage("fourth")]}, thread("alice"))
        hot = await memory.hot_window()
    assert [[m.content for m in call] for call in model.received] == [
        ["first"],
        ["first", "one", "second"],
        ["first", "one", "second", "two", "third"],
        ["first", "one", "second", "two", "third", "three", "fourth"],
    ]
    assert [(e.type, e.content) for e in hot] == [
        ("user_input", "first"),
        ("assistant_output", "one"),
        ("user_input", "second"),
        ("assistant_output", "two"),
        ("user_input", "third"),
        ("assistant_output", "three"),
        ("user_input", "fourth"),
        ("assistant_output", "four"),
    ]


async def test_the_thread_holds_after_a_restart_and_for_a_middleware_per_request(tmp_path: Path) -> None:
    # The thread is read from the stored events: a new middleware (a process restart, or one built
    # per request over a shared memory) refuses bob too, and alice's own thread still continues.
    model = ScriptedChat(
        script=[*turn([call("run_tests", {"target": "billing"}, "c1")], "noted"), AIMessage(content="welcome back")]
    )
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        agent = create_agent(model, tools=[run_tests], middleware=[aiden_middleware(memory)])
        await agent.ainvoke({"messages": [HumanMessage("my card PIN is 4417 (alice)")]}, thread("alice"))
        alices = await memory.hot_window()
        bobs = create_agent(model, tools=[run_tests], middleware=[aiden_middleware(memory)])
        with pytest.raises(aiden.AidenError, match=REFUSED):
            await bobs.ainvoke({"messages": [HumanMessage("hello, I am bob")]}, thread("bob"))
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        bobs = create_agent(model, tools=[run_tests], middleware=[aiden_middleware(memory)])
        with pytest.raises(aiden.AidenError, match=REFUSED):
            await bobs.ainvoke({"messages": [HumanMessage("hello, I am bob")]}, thread("bob"))
        assert await memory.hot_window() == alices
        alice = create_agent(model, tools=[run_tests], middleware=[aiden_middleware(memory)])
        await alice.ainvoke({"messages": [HumanMessage("what was my PIN?")]}, thread("alice"))
        hot = await memory.hot_window()
    assert len(model.received) == 3  # alice's two calls, then her next run's; bob's model was never called
    assert [m.content for m in model.received[2]] == [
        "my card PIN is 4417 (alice)", "", "billing: 3 passed", "noted", "what was my PIN?"
    ]
    assert [(e.type, e.meta.get("adapter_conversation")) for e in hot] == [
        ("user_input", "alice"),
        ("tool_call", "alice"),
        ("tool_result", "alice"),
        ("assistant_output", None),  # commit_run's answer: the run's input carries the label
        ("user_input", "alice"),
        ("assistant_output", None),
    ]


async def test_unlabelled_events_are_taken_by_the_first_thread_and_a_rotation_frees_the_memory(
    tmp_path: Path,
) -> None:
    model = ScriptedChat(script=[AIMessage(content=text) for text in ("hi bob", "hi dave")])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        await memory.begin_run("written through the plain API")  # an older store's conversation: no label
        await memory.commit_run("plain answer")
        await create_agent(model, middleware=[aiden_middleware(memory)]).ainvoke(
            {"messages": [HumanMessage("hello, I am bob")]}, thread("bob")
        )
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        carols = create_agent(model, middleware=[aiden_middleware(memory)])
        with pytest.raises(aiden.AidenError, match="AidenMiddleware serves LangGraph thread 'bob', not 'carol'"):
            await carols.ainvoke({"messages": [HumanMessage("hello, I am carol")]}, thread("carol"))
        await memory.rotate()  # a new session: no thread's yet
        await create_agent(model, middleware=[aiden_middleware(memory)]).ainvoke(
            {"messages": [HumanMessage("hello, I am dave")]}, thread("dave")
        )
        hot = await memory.hot_window()
    assert [m.content for m in model.received[0]] == [
        "written through the plain API", "plain answer", "hello, I am bob"
    ]
    assert len(model.received) == 2
    assert model.received[1][-1].content == "hello, I am dave"  # after the root's project memory
    assert [(e.type, e.content, e.meta.get("adapter_conversation")) for e in hot] == [
        ("user_input", "hello, I am dave", "dave"),
        ("assistant_output", "hi dave", None),
    ]

"""A LangGraph thread's claim on a memory outlives compaction of every event that carries its label."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

import aiden
from aiden.adapters.langchain import aiden_middleware
from tests.adapters.test_langchain import ScriptedChat

pytestmark = pytest.mark.anyio
FAST = aiden.Config(durability="none")
WINDOW = 2000
# One answer is over the hot window a compaction keeps (a quarter of the window): it is all that stays
# of the conversation after the kept root input.
LONG = " ".join(f"detail{n}" for n in range(250))


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def ask(memory: aiden.Memory, model: ScriptedChat, text: str, name: str | None) -> Any:
    """One run in thread ``name`` (None: no thread_id) by an agent built for this request."""
    agent = create_agent(model, middleware=[aiden_middleware(memory)])
    return agent.ainvoke({"messages": [HumanMessage(text)]}, None if name is None else thread(name))


async def test_a_thread_whose_labelled_events_were_all_compacted_still_refuses_another(tmp_path: Path) -> None:
    # The session's root input (kept in the hot window by every compaction) came from a call
    # without a thread_id, so it carries no label; alice's labelled events are all compacted.
    model = ScriptedChat(script=[AIMessage(content=f"answer {n}: {LONG}") for n in range(3)] + [
        AIMessage(content="welcome back"), AIMessage(content="hi bob")
    ])
    async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:
        await ask(memory, model, "hello", None)
        await ask(memory, model, "my card PIN is 4417 (alice)", "alice")
        await ask(memory, model, "and my account is 2231", "alice")
        await memory.maintain(manual=True)
        compacted = [(e.type, e.meta.get("adapter_conversation")) for e in await memory.hot_window()]
    assert compacted == [("user_input", None), ("assistant_output", None)]
    async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:  # a restart
        with pytest.raises(aiden.AidenError, match="AidenMiddleware serves LangGraph thread 'alice', not 'bob'"):
            await ask(memory, model, "hello, I am bob", "bob")
        assert len(model.received) == 3  # bob's model was never called (it would read alice's summary)
        await ask(memory, model, "what was my PIN?", "alice")
        await memory.rotate()  # a new conversation: any thread may take it
        await ask(memory, model, "hello, I am bob", "bob")
        hot = await memory.hot_window()
    assert model.received[4][-1].content == "hello, I am bob"  # after the root's project memory
    assert [(e.type, e.content, e.meta.get("adapter_conversation")) for e in hot] == [
        ("user_input", "hello, I am bob", "bob"),
        ("assistant_output", "hi bob", None),
    ]

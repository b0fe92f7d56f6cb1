"""A pydantic-ai conversation's claim on a memory outlives compaction of every event that carries its label."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

import aiden
from aiden.adapters.pydantic_ai import aiden_history
from tests.adapters.test_pydantic_ai import Scripted, answer, flat

pytestmark = pytest.mark.anyio
FAST = aiden.Config(durability="none")
WINDOW = 2000
# One answer is over the hot window a compaction keeps (a quarter of the window): it is all that stays
# of the conversation after the kept root input.
LONG = " ".join(f"detail{n}" for n in range(250))
REFUSED = "AidenHistory serves conversation 'alice', not 'bob'"


def agent(memory: aiden.Memory, model: Scripted) -> Agent[None, str]:
    """An agent and capability built for one request."""
    return Agent(FunctionModel(model), capabilities=[aiden_history(memory)])


async def test_a_conversation_whose_labelled_events_were_all_compacted_still_refuses_another(tmp_path: Path) -> None:
    # The session's root input (kept in the hot window by every compaction) came from a run given no
    # conversation_id, so it carries no label; alice's labelled events are all compacted.
    model = Scripted([answer(f"answer {n}: {LONG}") for n in range(3)] + [answer("welcome back"), answer("hi bob")])
    async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:
        await agent(memory, model).run("hello")
        await agent(memory, model).run("my card PIN is 4417 (alice)", conversation_id="alice")
        await agent(memory, model).run("and my account is 2231", conversation_id="alice")
        await memory.maintain(manual=True)
        compacted = [(e.type, e.meta.get("adapter_conversation")) for e in await memory.hot_window()]
    assert compacted == [("user_input", None), ("assistant_output", None)]
    async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:  # a restart
        with pytest.raises(aiden.AidenError, match=REFUSED):
            await agent(memory, model).run("hello, I am bob", conversation_id="bob")
        assert len(model.received) == 3  # bob's model was never called (it would read alice's summary)
        assert memory.run_active is False
        await agent(memory, model).run("what was my PIN?", conversation_id="alice")
        await memory.rotate()  # a new conversation: any may take it
        await agent(memory, model).run("hello, I am bob", conversation_id="bob")
        hot = await memory.hot_window()
    assert flat(model.received[4])[-1] == ("UserPromptPart", "hello, I am bob")
    assert [(e.type, e.content, e.meta.get("adapter_conversation")) for e in hot] == [
        ("user_input", "hello, I am bob", "bob"),
        ("assistant_output", "hi bob", None),
    ]

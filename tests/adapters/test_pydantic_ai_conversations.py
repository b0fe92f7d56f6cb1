"""One pydantic-ai capability serves one conversation: another conversation_id is refused, never given its history."""

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

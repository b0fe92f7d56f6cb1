"""An AidenSession's claim on a memory outlives compaction of every event that carries its session_id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")

import aiden  # noqa: E402
from aiden.adapters.openai_agents import AidenSession  # noqa: E402
from aiden.testing import FakeLLMServer  # noqa: E402

pytestmark = pytest.mark.anyio
FAST = aiden.Config(durability="none")
WINDOW = 2000
# One tool result is over the hot window a compaction keeps (a quarter of the window): the run's
# answer repeats it, and is all that stays of the conversation after the kept root input.
LONG = " ".join(f"detail{n}" for n in range(250))
REFUSED = (
    "AidenSession 'bob': this memory holds the conversation of session_id 'alice'; "
    "one memory holds one conversation: open a memory per session_id "
    "and user (memory.rotate() starts a new conversation of the same user: its long-term memory stays)"
)


def _fetch_call(body: dict[str, Any]) -> dict[str, Any]:
    """Every model call asks for one record (the agent stops on the tool's result)."""
    n = len(body["messages"])
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "fetch", "arguments": json.dumps({"n": n})}}
    return {"content": None, "tool_calls": [call]}


def _agent(base_url: str) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def fetch(n: int) -> str:
        """Fetch a record."""
        return f"record {n}: {LONG}"

    model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=base_url, api_key="x"))
    # The tool's result is the run's answer: commit_run logs it, without the session's label.
    return Agent(name="a", instructions="be brief", model=model, tools=[fetch], tool_use_behavior="stop_on_first_tool")


async def _run(agent: Any, text: str, session_id: str, memory: aiden.Memory) -> Any:
    from agents import RunConfig, Runner

    session = AidenSession(memory, session_id=session_id)  # one per request
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    return await Runner.run(agent, text, session=session, run_config=config, hooks=session.usage_hooks())


async def test_a_session_whose_labelled_events_were_all_compacted_still_refuses_another(tmp_path: Path) -> None:
    with FakeLLMServer(responder=_fetch_call) as server:
        agent = _agent(server.base_url)
        async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:
            # The session's root input (kept in the hot window by every compaction) is an older
            # store's, without a label; alice's labelled events are all compacted.
            await memory.begin_run("why is CI red?")
            await memory.commit_run("a flaky test")
            await _run(agent, "my card PIN is 4417 (alice)", "alice", memory)
            await _run(agent, "and my account is 2231", "alice", memory)
            await memory.maintain(manual=True)
            compacted = [(e.type, e.meta.get("agents_session")) for e in await memory.hot_window()]
        assert compacted == [("user_input", None), ("assistant_output", None)]
        async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:  # a restart
            with pytest.raises(aiden.AidenError) as refused:
                await _run(agent, "hello, I am bob", "bob", memory)
            assert str(refused.value) == REFUSED
            bob = AidenSession(memory, session_id="bob")
            for call in (bob.get_items, bob.pop_item, bob.clear_session, bob.full_history):
                with pytest.raises(aiden.AidenError) as refused:
                    await call()
                assert str(refused.value) == REFUSED
            assert len(server.requests) == 2  # bob's model was never called (it would read alice's summary)
            await AidenSession(memory, session_id="alice").clear_session()  # alice's own clear frees it
            await _run(agent, "hello, I am bob", "bob", memory)
            hot = await memory.hot_window()
    assert server.requests[2].body["messages"][-1] == {"role": "user", "content": "hello, I am bob"}
    assert [(e.type, e.meta.get("agents_session")) for e in hot] == [
        ("user_input", "bob"),
        ("tool_call", "bob"),
        ("tool_result", "bob"),
        ("assistant_output", None),
    ]


async def _plain_compacted(memory: aiden.Memory, runs: int) -> None:
    """A session of the plain API (no label anywhere), compacted."""
    for n in range(runs):
        await memory.begin_run(f"question {n}: {LONG}")
        await memory.commit_run(f"answer {n}")
    await memory.maintain(manual=True)
    assert (await memory.chunk_index()).last_seq > 0


async def test_a_damaged_compacted_chunk_does_not_stop_the_sessions_calls(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:
        await _plain_compacted(memory, 3)
    _tear_chunks(tmp_path)
    async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:
        bob = AidenSession(memory, session_id="bob")
        assert [item["content"] for item in await bob.get_items()][-1] == "answer 2"
        await bob.clear_session()


def _tear_chunks(root: Path) -> None:
    for chunk in (root / "memory" / "session" / "chunks").glob("chunk_*.jsonl"):
        chunk.write_bytes(chunk.read_bytes()[:20])


async def test_a_session_without_labels_is_read_once_not_at_every_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:
        await _plain_compacted(memory, 3)
    async with aiden.open_memory(tmp_path, config=FAST, context_window=WINDOW) as memory:
        bob = AidenSession(memory, session_id="bob")
        await bob.get_items()  # reads the compacted events for a label: none
        _tear_chunks(tmp_path)  # a call that read them again would find them unreadable
        with caplog.at_level("WARNING", logger="aiden.adapters"):
            for _ in range(3):
                await bob.get_items()
        assert [r.getMessage() for r in caplog.records if r.name == "aiden.adapters"] == []

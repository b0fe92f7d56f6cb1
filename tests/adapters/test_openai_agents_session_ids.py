"""One memory, one conversation: an AidenSession with another session_id than the one that wrote the memory is refused.

A platform that opens ``AidenSession(shared_memory, session_id=user_id)`` per user (as the SDK's own
SQLiteSession is used) would otherwise give one user's conversation to the other's model.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

agents = pytest.importorskip("agents")

import aiden  # noqa: E402
from aiden.adapters.openai_agents import AidenSession, event_from_item  # noqa: E402
from aiden.testing import FakeLLMServer  # noqa: E402

pytestmark = pytest.mark.anyio
FAST = aiden.Config(durability="none")
REFUSED = (
    "AidenSession 'bob': this memory holds the conversation of session_id 'alice'; "
    "one memory holds one conversation: open a memory per session_id "
    "and user (memory.rotate() starts a new conversation of the same user: its long-term memory stays)"
)


def _agent(base_url: str) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=base_url, api_key="x"))
    return Agent(name="a", instructions="be brief", model=model)


async def _run(agent: Any, text: str, session: AidenSession) -> Any:
    from agents import RunConfig, Runner

    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    return await Runner.run(agent, text, session=session, run_config=config, hooks=session.usage_hooks())


def _sent(request: Any) -> list[Any]:
    return [m["content"] for m in request.body["messages"]]


async def test_a_session_of_another_user_on_the_memory_is_refused_before_it_reads_or_writes(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        with FakeLLMServer(script=["noted", "hi bob"]) as server:
            agent = _agent(server.base_url)
            await _run(agent, "my card PIN is 4417 (alice)", AidenSession(memory, session_id="alice"))
            before = await memory.hot_window()
            bob = AidenSession(memory, session_id="bob")
            with pytest.raises(aiden.AidenError) as refused:
                await _run(agent, "hello, I am bob", bob)
            assert str(refused.value) == REFUSED
            for call in (
                bob.get_items,
                lambda: bob.add_items([{"role": "user", "content": "hello, I am bob"}]),
                bob.pop_item,
                bob.clear_session,
                bob.full_history,
            ):
                with pytest.raises(aiden.AidenError) as refused:
                    await call()
                assert str(refused.value) == REFUSED
            assert len(server.requests) == 1  # bob's model was never called
        assert await memory.hot_window() == before  # nothing appended, retracted or rotated
        assert not memory.run_active


async def test_the_label_holds_after_a_restart(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        await AidenSession(memory, session_id="alice").add_items([{"role": "user", "content": "PIN 4417"}])
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        with pytest.raises(aiden.AidenError) as refused:
            await AidenSession(memory, session_id="bob").get_items()
        assert str(refused.value) == REFUSED
        assert await AidenSession(memory, session_id="alice").get_items() == [{"role": "user", "content": "PIN 4417"}]


async def test_one_session_id_over_several_session_objects_keeps_one_conversation(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        with FakeLLMServer(script=["noted", "4417", "fresh start"]) as server:
            agent = _agent(server.base_url)
            first = await _run(agent, "my PIN is 4417", AidenSession(memory, session_id="alice"))
            second = await _run(agent, "what is my PIN?", AidenSession(memory, session_id="alice"))
            assert (first.final_output, second.final_output) == ("noted", "4417")
            assert _sent(server.requests[1]) == ["be brief", "my PIN is 4417", "noted", "what is my PIN?"]
            # clear_session rotates; the same session_id goes on in the new, empty conversation.
            await AidenSession(memory, session_id="alice").clear_session()
            third = await _run(agent, "hi again", AidenSession(memory, session_id="alice"))
            assert third.final_output == "fresh start"
            assert _sent(server.requests[2])[-1] == "hi again"
            assert "my PIN is 4417" not in _sent(server.requests[2])
        hot = await memory.hot_window()
        assert [(e.type, e.content) for e in hot] == [("user_input", "hi again"), ("assistant_output", "fresh start")]


async def test_a_conversation_written_without_labels_is_taken_by_any_session_id(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        # As an older store, or a memory written through aiden's own API: its events carry no session_id.
        await memory.begin_run("why is CI red?")
        await memory.commit_run("a flaky test")
        session = AidenSession(memory, session_id="bob")
        await session.add_items([{"role": "user", "content": "which one?"}])
        assert await session.get_items() == [
            {"role": "user", "content": "why is CI red?"},
            {"role": "assistant", "content": "a flaky test"},
            {"role": "user", "content": "which one?"},
        ]
        with pytest.raises(aiden.AidenError) as refused:
            await AidenSession(memory, session_id="carol").get_items()
        assert str(refused.value) == REFUSED.replace("bob", "carol").replace("alice", "bob")


class HeldWrite(aiden.Storage):
    """Holds the first write holding ``marker`` in its worker thread until ``release`` is set."""

    def __init__(self, marker: bytes) -> None:
        super().__init__()
        self.marker = marker
        self.writing = threading.Event()
        self.release = threading.Event()

    def write(self, fd: int, data: bytes) -> None:
        if self.marker in data and not self.writing.is_set():
            self.writing.set()
            self.release.wait(timeout=10)
        super().write(fd, data)


async def test_of_two_session_ids_writing_first_at_once_one_gets_in(tmp_path: Path) -> None:
    # A server opening a session per user on one memory, two first requests at once (review r61-R3, finding 5).
    storage = HeldWrite(b"my PIN is 4417")
    results: dict[str, str] = {}

    async def add(session: AidenSession, text: str) -> None:
        try:
            await session.add_items([{"role": "user", "content": text}])
            results[session.session_id] = "written"
        except aiden.AidenError as exc:
            results[session.session_id] = str(exc)

    async with aiden.open_memory(tmp_path, config=FAST, storage=storage) as memory:
        alice, bob = AidenSession(memory, session_id="alice"), AidenSession(memory, session_id="bob")
        async with anyio.create_task_group() as tg:
            tg.start_soon(add, alice, "my PIN is 4417")
            await anyio.to_thread.run_sync(storage.writing.wait)  # alice's item is being stored
            tg.start_soon(add, bob, "hello, I am bob")
            await anyio.wait_all_tasks_blocked()  # bob is as far as he gets before alice's write ends
            storage.release.set()
        assert results == {"alice": "written", "bob": REFUSED}
        assert [(e.meta["agents_session"], e.content) for e in await memory.hot_window()] == [("alice", "my PIN is 4417")]
        assert await alice.get_items() == [{"role": "user", "content": "my PIN is 4417"}]


async def test_a_memory_two_session_ids_wrote_is_freed_by_the_clear_session_of_either(tmp_path: Path) -> None:
    # As two processes' sessions writing a fresh memory at once leave it: the per-memory lock is per process.
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        alice, bob = AidenSession(memory, session_id="alice"), AidenSession(memory, session_id="bob")
        await alice.add_items([{"role": "user", "content": "my PIN is 4417"}])
        await memory.append(event_from_item({"role": "user", "content": "hello, I am bob"}, session_id="bob"))
        with pytest.raises(aiden.AidenError) as refused:
            await alice.get_items()
        assert str(refused.value) == REFUSED.replace("'bob'", "'alice'").replace("'alice';", "'alice', 'bob';")
        carol = AidenSession(memory, session_id="carol")
        with pytest.raises(aiden.AidenError) as refused:
            await carol.clear_session()  # not one of its writers: it may not archive their conversation
        assert str(refused.value) == REFUSED.replace("'bob'", "'carol'").replace("'alice';", "'alice', 'bob';")
        assert len(await memory.hot_window()) == 2
        await bob.clear_session()
        assert await memory.hot_window() == []
        await alice.add_items([{"role": "user", "content": "hi again"}])
        assert [(e.meta["agents_session"], e.content) for e in await memory.hot_window()] == [("alice", "hi again")]

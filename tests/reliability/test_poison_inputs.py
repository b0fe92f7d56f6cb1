"""Poison text in the public calls: stored so it round trips, or refused before the ack.

Never accepted and then poisonous: after each case the memory still compacts, checkpoints,
learns from later episodes and closes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import InvalidEventError, SessionEvent

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

LONE = "\ud83d"
ESCAPED_ARGS = '{"cmd": "echo \\ud83d half an emoji"}'
FILLER = [f"we agreed the deploy window is {n} o'clock on the staging cluster" for n in range(60)]


async def _fill_and_compact(memory: aiden.Memory) -> None:
    for text in FILLER:
        await memory.append(SessionEvent(type="user_input", role="user", content=text))
    outcome = await memory.maintain(manual=True)
    assert outcome.compacted, outcome
    assert await memory.checkpoint() is not None


async def test_an_escaped_lone_surrogate_in_tool_args_is_replaced_and_said(tmp_path: Path) -> None:
    for _ in range(2):  # and again after a reopen
        async with aiden.open_memory(tmp_path, context_window=8000) as memory:
            stored = await memory.append_message(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "run", "arguments": ESCAPED_ARGS}}
                    ],
                }
            )
            call = next(e for e in stored if e.type == "tool_call")
            assert call.tool_args is not None
            assert json.loads(call.tool_args) == {"cmd": "echo \ufffd half an emoji"}
            assert call.meta["repaired"] == "tool_args: lone surrogate escapes replaced by U+FFFD"
            await memory.append_message({"role": "tool", "tool_call_id": "c1", "content": "ok"})
            await _fill_and_compact(memory)
    assert list((tmp_path / "memory" / "long_term" / "sessions").glob("*.md"))


async def test_a_whole_escaped_emoji_is_kept(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, context_window=8000) as memory:
        event = await memory.append(
            SessionEvent(type="tool_call", tool_name="run", tool_call_id="c1", tool_args='{"s": "\\ud83d\\ude00"}')
        )
    assert event.tool_args == '{"s": "\\ud83d\\ude00"}'
    assert "repaired" not in event.meta


@pytest.mark.parametrize(
    "field", ["content", "role", "tool_name", "tool_call_id", "tool_args", "event_id", "pinned"]
)
async def test_a_raw_lone_surrogate_in_any_event_field_is_refused_before_the_ack(
    tmp_path: Path, field: str
) -> None:
    async with aiden.open_memory(tmp_path, context_window=8000) as memory:
        fields = {"type": "tool_call", "content": "x", field: f"bad {LONE} text"}
        with pytest.raises(InvalidEventError, match="not valid Unicode"):
            await memory.append(SessionEvent(**fields))  # type: ignore[arg-type]
        with pytest.raises(InvalidEventError):
            await memory.append(SessionEvent(type="user_input", content="m", meta={"k": [LONE]}))
        assert await memory.hot_window() == []
        await _fill_and_compact(memory)


async def test_nul_round_trips_and_deep_json_and_a_huge_text_are_refused(tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    async with aiden.open_memory(tmp_path, context_window=8000) as memory:
        nul = await memory.append(SessionEvent(type="user_input", role="user", content="a\x00b"))
        args = await memory.append(
            SessionEvent(type="tool_call", tool_name="run", tool_call_id="c", tool_args='{"a": "[[[[[[[["}')
        )
        with pytest.raises(InvalidEventError, match="deeper than 64"):
            await memory.append(SessionEvent(type="tool_call", tool_name="run", tool_call_id="d", tool_args=deep))
        with pytest.raises(aiden.EventTooLargeError):
            await memory.append(SessionEvent(type="user_input", content="x" * 10_000_000))
        assert [e.content for e in await memory.hot_window()][:1] == ["a\x00b"]
        assert await memory.read_event(args.seq) == args
        assert nul.content == "a\x00b"
        await _fill_and_compact(memory)


async def test_poison_in_recall_and_memory_tools_answers_and_harms_nothing(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, context_window=8000) as memory:
        await _fill_and_compact(memory)
        for query in (f"deploy {LONE}", "\x00", "x" * 100_000, "[" * 10_000):
            answer = json.loads(await memory.handle_tool_call("recall_session_chunks", {"query": query}))
            assert isinstance(answer, dict)
        saved = await memory.handle_tool_call(
            "save_memory", {"type": "preference", "title": f"t{LONE}", "content": f"c{LONE}"}
        )
        assert "error" in json.loads(saved)
        await _fill_and_compact(memory)


async def test_an_unencodable_observation_is_refused_and_later_episodes_still_commit(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, context_window=8000) as memory:
        await memory.begin_run("first task")
        with pytest.raises(InvalidEventError, match="not valid Unicode"):
            memory.observe("python", LONE)
        with pytest.raises(InvalidEventError, match="not valid Unicode"):
            await memory.commit_run("done", outcome="success", outcome_note=LONE)
        await memory.commit_run("done", outcome="success")
        for n in range(2):
            await memory.begin_run(f"task {n}")
            memory.observe("python", "3.11")
            await memory.commit_run("done", outcome="success")
        learned = await memory.learn_experience()
        assert learned.episodes == 3
        assert memory.stats().episodes_quarantined == 0

"""begin_run / commit_run, rotation (incl. crashes), archived sessions invisible."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from tests.helpers import assert_exactly_once

pytestmark = pytest.mark.anyio

CFG = Config(durability="none", keep_recent_tokens=60, hot_window_events=6, count_compress_after_events=12)


async def test_runs_append_and_request_maintenance_without_waiting(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        start = await memory.begin_run("fix the parser", now=1000.0)
        assert memory.run_active
        await memory.append(SessionEvent(type="tool_call", tool_name="run", tool_call_id="c1"))
        await memory.append(SessionEvent(type="tool_result", tool_call_id="c1", content="ok"))
        out = await memory.commit_run("done", prompt_tokens=1234)
        assert not memory.run_active
        hot = await memory.hot_window()
    assert start.user_event.seq == 1 and start.archived_session_id is None
    assert start.decision.reason == "first_turn"
    assert out.seq == 4
    assert [e.type for e in hot] == ["user_input", "tool_call", "tool_result", "assistant_output"]


async def test_long_gap_rotates_session_and_archive_is_invisible(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.begin_run("zebra-unique-word task", now=1000.0)
        for i in range(20):
            await memory.append(SessionEvent(type="assistant_output", content=f"zebra step {i}", timestamp=1000.0 + i))
        await memory.commit_run("zebra done", now=1020.0)
        await memory.maintain(manual=True)
        assert await memory.recall_session_chunks("zebra")
        start = await memory.begin_run("a fresh topic", now=1000.0 + 20 + 1801)
        hot = await memory.hot_window()
        hits = await memory.recall_session_chunks("zebra")
        summary = await memory.summary_md()
        built = await memory.build_messages()
    assert start.decision.new_session and start.archived_session_id is not None
    assert [e.content for e in hot] == ["a fresh topic"]
    assert hot[0].seq == 1  # per-session seqs restart
    assert hits == []
    assert summary == ""
    # The archived log is not in the prompt; only the durable PROJECT MEMORY block carries over.
    system = built.messages[0]["content"]
    assert "# Session History" not in system
    assert system.startswith("PROJECT MEMORY")
    assert [m["content"] for m in built.messages[1:]] == ["a fresh topic"]
    archive = Layout(tmp_path).archived_session(start.archived_session_id)
    assert (archive / "events.jsonl").exists() and (archive / "chunks" / "index.yaml").exists()


@pytest.mark.parametrize("bad", ["../x", "/abs", "a\x00b", "x" * 65, "", "a/b"])
async def test_rotation_rejects_hostile_ids(tmp_path: Path, bad: str) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.append(SessionEvent(type="user_input", content="x"))
        with pytest.raises(aiden.InvalidIdError):
            await memory.rotate(bad)
        assert [e.content for e in await memory.hot_window()] == ["x"]
    assert not (tmp_path / "x").exists()


async def test_rotation_refuses_existing_archive(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.append(SessionEvent(type="user_input", content="one"))
        await memory.rotate("s1")
        await memory.append(SessionEvent(type="user_input", content="two"))
        with pytest.raises(aiden.StorageError, match="already exists"):
            await memory.rotate("s1")
        hot = await memory.hot_window()
    assert [e.content for e in hot] == ["two"]


class CrashAt(Storage):
    def __init__(self, point: str) -> None:
        super().__init__()
        self.point = point

    def checkpoint(self, name: str) -> None:
        if name == self.point:
            self.point = ""
            raise aiden.StorageError(f"simulated crash at {name}")


@pytest.mark.parametrize("point", ["rotate.before_rename", "rotate.after_rename", "events.before_rename"])
async def test_rotation_crash_recovers_to_one_active_session(tmp_path: Path, point: str) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        acked = {e.seq for e in await memory.append_many([SessionEvent(type="user_input", content=f"e{i}") for i in range(5)])}
    async with aiden.open_memory(tmp_path, config=CFG, storage=CrashAt(point)) as memory:
        with pytest.raises(aiden.StorageError):
            await memory.rotate("closed1")
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        hot = await memory.hot_window()
        ev = await memory.append(SessionEvent(type="user_input", content="after"))
    layout = Layout(tmp_path)
    archived = layout.archived_session("closed1")
    assert layout.events.exists()
    if archived.exists():
        old = scan(read_bytes(archived / "events.jsonl")).events
        assert {e.seq for e in old} == acked
        assert [e.content for e in hot] == []
        assert ev.seq == 1
    else:
        assert_exactly_once(tmp_path, acked)
        assert ev.seq == 6


async def test_governance_stub_names_a_seq_the_recall_tool_returns_verbatim(tmp_path: Path) -> None:
    import json

    cfg = Config(durability="none", governance_keep_turns=1, governance_max_tool_tokens=50, count_compress_after_events=10**6)
    big = "line of a large file\n" * 200
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.begin_run("read the file")
        await memory.append(SessionEvent(type="tool_call", tool_name="read_file", tool_call_id="c1", tool_args='{"path": "a.py"}'))
        stored = await memory.append(SessionEvent(type="tool_result", tool_name="read_file", tool_call_id="c1", content=big))
        await memory.commit_run("read it")
        await memory.begin_run("next question")
        built = await memory.build_messages()
        tool_msg = next(m for m in built.messages if m["role"] == "tool")
        answer = json.loads(await memory.handle_recall_tool({"query": "x", "seqs": [stored.seq]}))
    assert f"seq {stored.seq}" in tool_msg["content"]
    assert len(tool_msg["content"]) < len(big)
    assert answer["events"][0]["content"] == big


async def test_tool_output_spike_and_cost_ceiling_trigger_compaction(tmp_path: Path) -> None:
    cfg = Config(
        durability="none", keep_recent_tokens=60, hot_window_events=6, count_compress_after_events=10**6,
        tool_output_spike_tokens=500, cost_ceiling_usd=0.5,
    )
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        for i in range(3):
            await memory.begin_run(f"small turn {i}")
            await memory.commit_run("ok")
        await memory.maintain()  # waits for the passes commit_run requested
        quiet = memory.stats().compactions
        await memory.begin_run("read a big file")
        await memory.append(SessionEvent(type="tool_call", tool_name="read", tool_call_id="c"))
        await memory.append(SessionEvent(type="tool_result", tool_call_id="c", content="word " * 3000))
        await memory.commit_run("read it")  # its pass sees the spike
        await memory.maintain()
        after_spike = memory.stats().compactions
        for i in range(3):
            await memory.begin_run(f"paid turn {i}")
            await memory.commit_run("ok", cost_usd=0.2)
        await memory.maintain()
        after_cost = memory.stats().compactions
    assert (quiet, after_spike, after_cost) == (0, 1, 2)

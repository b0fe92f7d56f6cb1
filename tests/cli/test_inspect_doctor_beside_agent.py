"""``aiden inspect`` and ``aiden doctor`` beside a running agent: a rotation or a compaction between their
reads mixes no two states of the root."""

from __future__ import annotations

import builtins
import io
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.doctor import doctor
from aiden.readonly import Progress, inspect_root

CFG = Config(durability="none", hot_window_events=4, count_compress_after_events=10_000, idle_compact_after_minutes=0)
WAIT_S = 10.0  # a bound on each hand-over between the threads, never reached when the code is right


async def _turns(memory: aiden.Memory, start: int, n: int) -> None:
    for i in range(start, start + n):
        await memory.begin_run(f"question {i}", new_session=False)
        await memory.append(SessionEvent(type="tool_result", role="tool", content=f"output {i}"))
        await memory.commit_run(f"answer {i}")


def _figures(info: dict[str, Any]) -> dict[str, Any]:
    return {k: info[k] for k in ("hot_window", "chunks", "summary_md_bytes")} | {
        "events": info["stats"]["events"],
        "summary_tokens": info["summary_layer"]["tokens"],
    }


def test_a_rotation_during_inspect_shows_the_session_it_started_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def build() -> None:
        async with aiden.open_memory(tmp_path, config=CFG) as memory:
            for start in (0, 4):
                await _turns(memory, start, 4)
                assert (await memory.maintain(manual=True)).compacted
            await _turns(memory, 8, 2)

    async def rotate() -> None:
        async with aiden.open_memory(tmp_path, config=CFG) as memory:
            await memory.rotate("s-1")
            await memory.begin_run("new session")

    anyio.run(build)
    before = _figures(inspect_root(tmp_path))
    assert before["chunks"]["count"] == 2 and before["hot_window"]["events"] == 11
    events = str(tmp_path / "memory" / "session" / "events.jsonl")
    real_open, rotated = builtins.open, threading.Event()

    def open_then_rotate(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        # Inspect has opened events.jsonl (its first session read); the agent rotates before the next one.
        f = real_open(file, mode, *args, **kwargs)
        if not rotated.is_set() and str(file) == events:
            rotated.set()
            agent = threading.Thread(target=anyio.run, args=(rotate,))
            agent.start()
            agent.join(WAIT_S)
        return f

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", open_then_rotate)
        patch.setattr(io, "open", open_then_rotate)
        during = inspect_root(tmp_path)
    assert rotated.is_set()
    assert during["stats"]["archived_sessions"] == 1
    assert _figures(during) == before
    after = _figures(inspect_root(tmp_path))
    assert after["chunks"]["count"] == 0 and after["hot_window"]["events"] == 1


def test_a_compaction_during_doctor_is_no_problem(tmp_path: Path) -> None:
    result: dict[str, Any] = {}
    index_read, compacted = threading.Event(), threading.Event()

    def progress(total: int) -> Progress:
        # Doctor asks for its progress bar once it has read the index: the agent compacts then.
        index_read.set()
        assert compacted.wait(WAIT_S)
        return Progress("doctor", "checks", total, stream=io.StringIO())

    async def agent() -> None:
        async with aiden.open_memory(tmp_path, config=CFG) as memory:
            await _turns(memory, 0, 6)
            assert (await memory.maintain(manual=True)).compacted
            await _turns(memory, 6, 6)
            check = threading.Thread(target=lambda: result.update(doctor(tmp_path, progress=progress)))
            check.start()
            assert await anyio.to_thread.run_sync(index_read.wait, WAIT_S)
            assert (await memory.maintain(manual=True)).compacted
            compacted.set()
            await anyio.to_thread.run_sync(check.join, WAIT_S)
            assert not check.is_alive()
            assert len((await memory.chunk_index()).chunks) == 2

    anyio.run(agent)
    assert result["problems"] == []
    assert result["ok"] is True

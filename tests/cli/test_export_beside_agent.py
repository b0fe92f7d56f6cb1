"""``aiden export`` beside a running agent: a compaction or a rotation meanwhile loses no event and fails nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from functools import partial
from pathlib import Path

import anyio
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.readonly import export_lines
from aiden.storage.fs import Storage

pytestmark = pytest.mark.anyio

CFG = Config(durability="none", hot_window_events=4, count_compress_after_events=10_000, idle_compact_after_minutes=0)
WAIT_S = 10.0  # a bound on each hand-over between the threads, never reached when the code is right


async def _turns(memory: aiden.Memory, start: int, n: int) -> None:
    for i in range(start, start + n):
        await memory.begin_run(f"question {i}", new_session=False)
        await memory.append(SessionEvent(type="tool_result", role="tool", content=f"output {i}"))
        await memory.commit_run(f"answer {i}")


def _seqs(lines: list[str]) -> list[int]:
    return [json.loads(line)["seq"] for line in lines]


class PauseBeforeIndex(Storage):
    """Once armed, the agent's next compaction stops after writing its chunk file, until ``go``."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.chunk_written = threading.Event()
        self.go = threading.Event()

    def checkpoint(self, name: str) -> None:
        if self.armed and name == "compaction.before_index":
            self.armed = False
            self.chunk_written.set()
            assert self.go.wait(WAIT_S)


class PausingProblems(list[str]):
    """The export's ``problems``: when it first says one (it has read the index), wait for ``resume``."""

    def __init__(self) -> None:
        super().__init__()
        self.said = threading.Event()
        self.resume = threading.Event()

    def _pause(self) -> None:
        if not self.said.is_set():
            self.said.set()
            assert self.resume.wait(WAIT_S)

    def append(self, item: str) -> None:
        super().append(item)
        self._pause()

    def extend(self, items: Iterable[str]) -> None:
        super().extend(items)
        if self:
            self._pause()


async def test_a_compaction_committing_during_the_export_loses_no_event(tmp_path: Path) -> None:
    storage = PauseBeforeIndex()
    problems = PausingProblems()
    lines: list[str] = []
    export = threading.Thread(target=lambda: lines.extend(export_lines(tmp_path, problems=problems)))
    async with aiden.open_memory(tmp_path, config=CFG, storage=storage) as memory:
        await _turns(memory, 0, 6)
        assert (await memory.maintain(manual=True)).compacted
        await _turns(memory, 6, 6)
        storage.armed = True
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(memory.maintain, manual=True))
            assert await anyio.to_thread.run_sync(storage.chunk_written.wait, WAIT_S)
            # The export starts while the agent's new chunk is written but not committed: it names that
            # chunk as a problem after reading the index, and the compaction commits (index, trim) meanwhile.
            export.start()
            assert await anyio.to_thread.run_sync(problems.said.wait, WAIT_S)
            storage.go.set()
        compacted = await memory.chunk_index()
    problems.resume.set()
    await anyio.to_thread.run_sync(export.join, WAIT_S)
    assert not export.is_alive()
    assert len(compacted.chunks) == 2
    assert _seqs(lines) == list(range(1, 37))


async def test_a_rotation_during_the_export_finishes_the_session_it_started_on(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        for start in (0, 4, 8):
            await _turns(memory, start, 4)
            assert (await memory.maintain(manual=True)).compacted
        assert len((await memory.chunk_index()).chunks) == 3
    lines = export_lines(tmp_path)
    first = next(lines)  # the export has read the first chunk file; the other two it reads later
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.rotate("s-1")
        await memory.begin_run("new session")
    assert _seqs([first, *lines]) == list(range(1, 37))
    assert _seqs(list(export_lines(tmp_path))) == [1]

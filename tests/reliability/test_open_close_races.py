"""Races at the edges of a memory's life: a close right after the open, on a root with a backlog."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import msgspec
import pytest

import aiden
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.session import FileSessionStore
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

BACKLOG = msgspec.structs.replace(SMALL_MANUAL, count_compress_after_events=5)


async def test_open_then_close_at_once_on_a_backlog_root_raises_nothing(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await memory.append_many(
            aiden.SessionEvent(type="user_input", role="user", content=f"backlog turn {n}") for n in range(60)
        )
    # Each open finds the backlog and requests a pass; the close follows at once, so the pass
    # loop may still be asking for it when the inbox (and its wake stream) closes.
    for _ in range(100):
        async with aiden.open_memory(tmp_path, config=BACKLOG):
            pass
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        hot = [e.seq for e in await memory.hot_window()]
        chunks = (await memory.chunk_index()).chunks
    # Every acknowledged event is in exactly one place: a chunk or the hot window.
    assert sum(c.count for c in chunks) + len(hot) == 60
    assert sorted(hot) == hot


class _HoldAfterCommit(Storage):
    """Holds the pass's thread right after its commit (``compaction.after_summary``) until released:
    the pass has committed its chunk and not yet run its after-compaction hook."""

    def __init__(self) -> None:
        super().__init__()
        self.committed = threading.Event()
        self.release = threading.Event()

    def checkpoint(self, name: str) -> None:
        if name == "compaction.after_summary":
            self.committed.set()
            self.release.wait(30)


async def _release_soon(release: threading.Event) -> None:
    await anyio.sleep(0.05)
    release.set()


async def test_a_chunk_committed_as_the_memory_closes_is_recorded_in_history_before_it_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = msgspec.structs.replace(SMALL_MANUAL, count_compress_after_events=8)
    layout = Layout(tmp_path)
    for round_ in range(3):
        storage = _HoldAfterCommit()
        async with (
            anyio.create_task_group() as tg,
            aiden.open_memory(tmp_path, config=config, storage=storage) as memory,
        ):
            for n in range(10):
                await memory.append(
                    aiden.SessionEvent(type="user_input", role="user", content=f"round {round_} fact {n}")
                )
            memory.request_maintenance()
            assert await anyio.to_thread.run_sync(storage.committed.wait, 30)
            # The close begins while the committed pass is held: its hook is still to run.
            tg.start_soon(_release_soon, storage.release)
        # Read before any reopen (a reopen replays the newest chunks' hook and would hide a miss).
        history = layout.history.read_text() if layout.history.exists() else ""
        recorded = {json.loads(line).get("chunk_id") for line in history.splitlines() if line.strip()}
        committed = {path.stem for path in layout.chunks.glob("chunk_*.jsonl")}
        assert len(committed) == round_ + 1
        assert committed <= recorded, (round_, sorted(committed - recorded))
    assert "after-compaction hook failed" not in caplog.text


@pytest.mark.parametrize("cancel_at", ["the block", "the recovery", "the store's making"])
async def test_a_memory_left_by_cancellation_closes_its_store(tmp_path: Path, cancel_at: str) -> None:
    class Store(FileSessionStore):
        """A file store that counts its makings and closes, and cancels the caller at ``cancel_at``."""

        made = closed = 0

        def __init__(self, layout: Layout, storage: Storage, config: aiden.Config) -> None:
            super().__init__(layout, storage, config)
            type(self).made += 1
            if cancel_at == "the store's making":
                anyio.from_thread.run_sync(scope.cancel)  # the caller's deadline passes now

        def close(self) -> None:
            type(self).closed += 1
            super().close()

        def recover(self) -> aiden.RecoveryReport:
            report = super().recover()
            if cancel_at == "the recovery":
                anyio.from_thread.run_sync(scope.cancel)
            return report

    with anyio.CancelScope() as scope:
        async with aiden.open_memory(tmp_path, store_factory=Store) as memory:
            await memory.append(aiden.SessionEvent(type="user_input", role="user", content="hello"))
            scope.cancel()
            await anyio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    # The store was closed (for a database store: its pool given back), and no descriptor is left.
    assert (Store.made, Store.closed) == (1, 1)
    assert not [fd for fd in os.listdir("/proc/self/fd") if str(tmp_path) in _target(fd)]


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


async def test_a_cancelled_block_still_closes_through_its_hosts_actors(tmp_path: Path) -> None:
    # The host inside the cancelled scope too: its actors must outlive the memory's close.
    with anyio.CancelScope() as scope:
        async with aiden.open_host() as host, aiden.open_memory(tmp_path, host=host) as memory:
            await memory.begin_run("fix the parser bug in billing")
            await memory.append(aiden.SessionEvent(type="user_input", role="user", content="the parser fails on dates"))
            await memory.recall_session_chunks("parser")
            scope.cancel()
            await anyio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    # What a close writes was written: the session summary and the open run's episode.
    assert len(list((tmp_path / "memory" / "long_term" / "sessions").glob("*.md"))) == 1
    assert len(list((tmp_path / "memory" / "episodes").glob("*/*/episode.json"))) == 1
    assert not [fd for fd in os.listdir("/proc/self/fd") if str(tmp_path) in _target(fd)]


class _SlowEventWrites(Storage):
    """A disk whose write of an event marked SLOW stalls (a busy disk); ``writing`` is set as it starts."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = threading.Event()

    def write(self, fd: int, data: bytes) -> None:
        if b"SLOW" in data:
            self.writing.set()
            time.sleep(0.5)
        super().write(fd, data)


async def test_a_close_during_an_append_commit_keeps_the_event(tmp_path: Path) -> None:
    storage = _SlowEventWrites()
    config = aiden.Config(session_summary_on_close=False)
    acked: list[aiden.SessionEvent] = []

    async def append_slow(memory: aiden.Memory) -> None:
        acked.append(await memory.append(aiden.SessionEvent(type="user_input", role="user", content="SLOW")))

    async with (
        anyio.create_task_group() as outside,
        aiden.open_memory(tmp_path, config=config, storage=storage) as memory,
    ):
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="first"))
        outside.start_soon(append_slow, memory)  # e.g. a request handler still running
        await anyio.to_thread.run_sync(storage.writing.wait)
        # The block ends while the host's writer is writing the append.
    assert [(e.seq, e.content) for e in acked] == [(2, "SLOW")]
    async with aiden.open_memory(tmp_path, config=config) as memory:
        assert [(e.seq, e.content) for e in await memory.hot_window()] == [(1, "first"), (2, "SLOW")]
        assert memory.recovery.changed is False


async def test_a_store_failing_as_the_memory_closes_does_not_stop_its_shutdown(tmp_path: Path) -> None:
    class Store(FileSessionStore):
        """A file store whose hot-window read fails once ``down`` (a database store's server gone)."""

        down = False

        def read_hot_window(self) -> list[aiden.SessionEvent]:
            if self.down:
                raise aiden.StorageError("the store is down")
            return super().read_hot_window()

    async with aiden.open_memory(tmp_path, store_factory=Store) as memory:
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="kept"))
        Store.down = True  # the session summary the close writes reads the hot window
    Store.down = False
    async with aiden.open_memory(tmp_path) as memory:
        assert [e.content for e in await memory.hot_window()] == ["kept"]
        assert memory.recovery.changed is False

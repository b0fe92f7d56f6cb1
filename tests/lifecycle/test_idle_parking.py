"""An idle open memory parks its actors (no task or descriptor is left) and the next call starts them again.

``evict_after_idle_minutes`` is set to a fraction of a second here; what parks and wakes is
observed from outside: the event loop's task count, the memory's answers and the files on disk.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

import anyio
import msgspec
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.testing.summarizers import GatedSummarizer
from tests.helpers import HOST_TASKS, SMALL_MANUAL, wait_parked

pytestmark = pytest.mark.anyio

_EVICT_S = 0.1


def _config() -> Config:
    # Small: a manual pass over a dozen short events compacts.
    return msgspec.structs.replace(SMALL_MANUAL, evict_after_idle_minutes=_EVICT_S / 60)


def _user(text: str, event_id: str | None = None) -> SessionEvent:
    return SessionEvent(type="user_input", role="user", content=text, event_id=event_id)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_an_idle_memory_keeps_no_task_and_answers_the_next_call(tmp_path: Path) -> None:
    before = len(asyncio.all_tasks())
    descriptors = _open_descriptors()
    async with aiden.open_memory(tmp_path, config=_config()) as memory:
        first = await memory.append(_user("the deploy key lives in vault path ops/deploy"))
        assert _open_descriptors() > descriptors  # the log (and the recall index once searched)
        outcome = await memory.maintain()
        # Answered after the open's backlog check (the scheduler serves a memory's requests in
        # order) and once its pass is over: what runs now is what a memory in use runs.
        running = len(asyncio.all_tasks())
        assert running > before + HOST_TASKS + 10  # the actors run
        await wait_parked(before)
        assert _open_descriptors() == descriptors  # parked: no descriptor either
        # Parked: the next append starts the actors again, with the next seq.
        second = await memory.append(_user("rotate it every 90 days"))
        assert (first.seq, second.seq) == (1, 2)
        assert len(asyncio.all_tasks()) == running
        assert [e.content for e in await memory.hot_window()] == [
            "the deploy key lives in vault path ops/deploy",
            "rotate it every 90 days",
        ]
        # Counters span the parking: they count since open, not since the last start.
        await memory.maintain()
        assert outcome.compacted is False and memory.stats().passes == 2
        assert memory.stats().appends == 2
        await memory.recall_session_chunks("deploy key")
        await wait_parked(before)
        await memory.recall_session_chunks("vault")
        stats = memory.recall_stats()
        assert stats is not None and stats.recall_calls == 2
    assert len(asyncio.all_tasks()) == before
    async with aiden.open_memory(tmp_path) as memory:
        assert [e.seq for e in await memory.hot_window()] == [1, 2]


async def test_zero_never_parks(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(evict_after_idle_minutes=0)) as memory:
        await memory.append(_user("hello"))
        await memory.maintain()  # answered after the open's backlog check: nothing transient is left
        running = len(asyncio.all_tasks())
        await anyio.sleep(4 * _EVICT_S)
        assert len(asyncio.all_tasks()) == running


async def test_no_parking_while_a_pass_is_in_flight(tmp_path: Path) -> None:
    before = len(asyncio.all_tasks())
    summarizer = GatedSummarizer()
    async with aiden.open_memory(tmp_path, config=_config(), summarizer=summarizer) as memory:
        for i in range(12):
            await memory.append(_user(f"step {i}: build the invoice exporter for account {i}"))
        memory.request_maintenance(manual=True)
        await summarizer.wait_started()
        await anyio.sleep(3 * _EVICT_S)
        assert len(asyncio.all_tasks()) > before + HOST_TASKS  # idle caller, a pass in flight: the actors stay
        summarizer.open()
        await wait_parked(before)
        assert summarizer.calls_finished >= 1
        assert memory.stats().compactions == 1
        assert (await memory.chunk_index()).total_chunks == 1


@pytest.mark.parametrize("requests", [1, 200])
async def test_maintenance_requests_to_a_parked_memory_run(tmp_path: Path, requests: int) -> None:
    before = len(asyncio.all_tasks())
    async with aiden.open_memory(tmp_path, config=_config()) as memory:
        for i in range(12):
            await memory.append(_user(f"step {i}: migrate table t{i} to the new schema"))
        await wait_parked(before)
        for _ in range(requests):
            memory.request_maintenance(manual=True)  # synchronous: the start happens in the background
        with anyio.fail_after(10):
            while memory.stats().compactions < 1:  # noqa: ASYNC110 (a background pass)
                await anyio.sleep(0.02)
        # A parked client holds 8 requests; the ones past them are coalesced at once (and the
        # scheduler may coalesce some of the 8 into one pass).
        assert memory.stats().coalesced_requests >= requests - 8
        assert (await memory.append(_user("still here"))).seq == 13


async def test_closing_a_parked_memory_still_writes_the_session_summary(tmp_path: Path) -> None:
    before = len(asyncio.all_tasks())
    async with aiden.open_memory(tmp_path, config=_config()) as memory:
        await memory.append(_user("we chose PostgreSQL 15 for the billing service"))
        await wait_parked(before)
    sessions = list((tmp_path / "memory" / "long_term" / "sessions").glob("*.md"))
    assert len(sessions) == 1
    assert "PostgreSQL 15" in sessions[0].read_text()


async def test_appends_racing_the_parking_lose_and_double_nothing(tmp_path: Path) -> None:
    """Four appenders fall idle together, then resume at scattered moments around the parking."""
    rng = random.Random(20261205)
    before = len(asyncio.all_tasks())
    acknowledged: list[SessionEvent] = []
    parks = 0

    async def watch(done: anyio.Event) -> None:
        nonlocal parks
        parked = False
        while not done.is_set():
            now = len(asyncio.all_tasks()) <= before + HOST_TASKS + 5  # the host's, the watcher and the appenders
            parks += now and not parked
            parked = now
            await anyio.sleep(0.005)

    async def appender(k: int, phase: int, delay: float) -> None:
        await anyio.sleep(delay)
        for i in range(3):
            event = _user(f"appender {k} phase {phase} event {i}", event_id=f"a{k}-p{phase}-e{i}")
            acknowledged.append(await memory.append(event))

    phases = 10
    async with aiden.open_memory(tmp_path, config=_config()) as memory:
        done = anyio.Event()
        async with anyio.create_task_group() as watching:
            watching.start_soon(watch, done)
            for phase in range(phases):
                # Odd phases start well after the parking; even ones around it (the idle time
                # plus up to one check interval), so requests meet a parking in progress.
                base = 2.5 * _EVICT_S if phase % 2 else _EVICT_S
                async with anyio.create_task_group() as tg:
                    for k in range(4):
                        tg.start_soon(appender, k, phase, base + rng.uniform(0.0, 0.1))
            done.set()
    assert parks >= phases // 2
    seqs = sorted(e.seq for e in acknowledged)
    assert seqs == list(range(1, 4 * phases * 3 + 1))
    async with aiden.open_memory(tmp_path) as memory:
        stored = await memory.hot_window()
    assert [e.seq for e in stored] == seqs
    assert sorted(e.event_id or "" for e in stored) == sorted(e.event_id or "" for e in acknowledged)

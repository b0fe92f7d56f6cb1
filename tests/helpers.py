"""Test helpers shared across test packages: reading everything a session holds on disk."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable, Sequence
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from aiden.config import Config
from aiden.events import SessionEvent
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout

if TYPE_CHECKING:
    from aiden.memory import Memory

# A small hot window that compacts only when asked (maintain(manual=True)).
SMALL_MANUAL = Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summary_max_chunks=3,
    summarizer_timeout_s=5,
)


def all_events(root: Path) -> tuple[list[SessionEvent], list[SessionEvent]]:
    """(events in committed chunks, events in the hot window), each in stored order."""
    layout = Layout(root)
    index = cs.load_index(layout) or cs.ChunkIndex()
    chunked: list[SessionEvent] = []
    for entry in cs.load_all_entries(layout, index):
        chunked.extend(cs.read_chunk(layout, entry.chunk_id, expect_sha256=entry.sha256).events)
    hot = scan(read_bytes(layout.events)).events
    return chunked, hot


def assert_exactly_once(root: Path, acked: set[int]) -> list[int]:
    """Every acked seq is stored exactly once across chunks and hot window; returns all stored seqs."""
    chunked, hot = all_events(root)
    seqs = [e.seq for e in chunked] + [e.seq for e in hot]
    dup = {s for s in seqs if seqs.count(s) > 1} if len(seqs) != len(set(seqs)) else set()
    assert not dup, f"duplicated seqs: {sorted(dup)[:10]}"
    missing = acked - set(seqs)
    assert not missing, f"lost acked seqs: {sorted(missing)[:10]}"
    assert [e.seq for e in hot] == sorted(e.seq for e in hot), "hot window out of seq order"
    return seqs


def race_processes(target: Callable[[str, str, EventType], None], root: Path, writers: Sequence[str]) -> None:
    """Run ``target(root, writer, start)`` in one spawned process per writer, released together."""
    ctx = multiprocessing.get_context("spawn")  # no state inherited from this process
    start = ctx.Event()
    procs = [ctx.Process(target=target, args=(str(root), w, start)) for w in writers]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0] * len(writers)


HOST_TASKS = 9
"""A host's own tasks: its wake loop; its session writer, maintenance scheduler, summarizer and recall
index, and their reply routers."""


async def wait_parked(tasks_before: int, timeout_s: float = 10.0) -> None:
    """Until the open memories keep no task but their host's (``tasks_before``: the tasks before they opened)."""
    with anyio.fail_after(timeout_s):
        while len(asyncio.all_tasks()) > tasks_before + HOST_TASKS:  # noqa: ASYNC110 (parking has no event to wait on)
            await anyio.sleep(0.02)


# Small batches: several of one session wait behind the one committing (the append-order tests).
ORDER_CONFIG = Config(max_batch_events=4, count_compress_after_events=10**9, session_summary_on_close=False)


async def append_bursts_in_order(memory: Memory, rounds: int, burst: int) -> list[SessionEvent]:
    """Append ``rounds`` bursts of ``burst`` events, each burst started in order without awaiting each
    append (asyncio runs the tasks, and so sends their requests, first in first out); assert each
    burst got increasing seqs, and return the hot window."""
    seqs: dict[str, int] = {}

    async def append(name: str) -> None:
        seqs[name] = (await memory.append(SessionEvent(type="user_input", role="user", content=name))).seq

    for r in range(rounds):
        async with anyio.create_task_group() as tg:
            for i in range(burst):
                tg.start_soon(append, f"{r}-{i}")
        got = [seqs[f"{r}-{i}"] for i in range(burst)]
        assert got == sorted(got), f"round {r}: seqs out of submission order: {got}"
    return await memory.hot_window()

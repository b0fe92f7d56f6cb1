"""Reliability finding 4 (entries index): concurrent saves from two OS processes lose no index rows.

``index.yaml`` is read-modify-written; without the inter-process lock two
writers each rewrite it from their own stale copy and drop the other's rows.
"""

from __future__ import annotations

from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import anyio

from aiden.longterm import LongTermMemoryStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from tests.helpers import race_processes

N = 40
NOW = 1_767_225_600.0


def save_many(root: str, writer: str, start: EventType) -> None:
    """One OS process: a fresh store saving N entries with known ids."""
    store = LongTermMemoryStore(Layout(Path(root)), Storage())

    async def run() -> None:
        for i in range(N):
            await store.save(type="fact", title=f"{writer} {i}", content=f"{writer} fact {i}.",
                             now=NOW + i, memory_id=f"{writer}-{i:03d}")

    start.wait()  # both processes save together, so their index rewrites race
    anyio.run(run)


def test_two_processes_saving_keep_every_index_row(layout: Layout) -> None:
    writers = ["proc-a", "proc-b"]
    race_processes(save_many, layout.root, writers)
    index = (layout.long_term / "index.yaml").read_text()
    for writer in writers:
        for i in range(N):
            assert f"{writer}-{i:03d}" in index
    entries = anyio.run(lambda: LongTermMemoryStore(layout, Storage()).entries(now=NOW + N))
    assert sorted(e.id for e in entries) == sorted(f"{w}-{i:03d}" for w in writers for i in range(N))
    assert (layout.long_term / ".entries.lock").exists()

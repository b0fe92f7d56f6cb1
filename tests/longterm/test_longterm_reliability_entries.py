"""Reliability finding 4 (entries index): concurrent saves from two OS processes lose no index rows.

``index.yaml`` is read-modify-written; without the inter-process lock two
writers each rewrite it from their own stale copy and drop the other's rows.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import anyio
import pytest

from aiden.longterm.store import LongTermMemoryStore
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
            await store.save(
                type="fact",
                title=f"{writer} {i}",
                content=f"{writer} fact {i}.",
                now=NOW + i,
                memory_id=f"{writer}-{i:03d}",
            )

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


class OtherProcessBeforeProfileLands(Storage):
    """Runs ``other`` (a second store's save and rebuild) just before this store's profile.md replace.

    It runs only if the entries lock is free at that moment (probed with a separate
    open file description, as another process would): a store that holds the lock
    while it rebuilds leaves no window, and ``other`` then runs after the rebuild.
    """

    def __init__(self, lock_path: Path) -> None:
        super().__init__()
        self.lock_path = lock_path
        self.other: list[Callable[[], None]] = []
        self.lock_was_free: list[bool] = []

    def _fault(self, kind: str, path: str) -> None:
        if kind != "replace" or not path.endswith("profile.md") or not self.other:
            return
        fd = os.open(self.lock_path, os.O_RDWR)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.lock_was_free.append(False)
                return
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        self.lock_was_free.append(True)
        self.other.pop()()


def test_a_profile_rebuild_never_overwrites_a_newer_one_from_another_store(layout: Layout) -> None:
    # [Reliability] finding 4 (profile): the rebuild read the entries, then wrote profile.md
    # without the index lock, so another process's save and rebuild in between was undone.
    storage = OtherProcessBeforeProfileLands(layout.long_term / ".entries.lock")
    mine = LongTermMemoryStore(layout, storage)
    theirs = LongTermMemoryStore(layout, Storage())

    def their_save_and_rebuild() -> None:
        async def run() -> None:
            await theirs.save(
                type="fact", title="theirs", content="Their fact.", now=NOW + 1, memory_id="theirs"
            )
            await theirs.rebuild_profile(now=NOW + 2)

        anyio.run(run)

    async def scenario() -> None:
        await mine.save(type="fact", title="mine", content="My fact.", now=NOW, memory_id="mine")
        storage.other.append(their_save_and_rebuild)
        await mine.rebuild_profile(now=NOW + 2)

    anyio.run(scenario)
    if storage.other:  # the lock was held throughout: their save comes after, as it must
        storage.other.pop()()
    profile = (layout.long_term / "profile.md").read_text()
    assert "(mine)" in profile and "(theirs)" in profile
    assert storage.lock_was_free == [False]


@pytest.mark.parametrize("damage", ["deleted", "emptied"])
def test_a_lost_index_beside_entry_files_is_rebuilt_not_read_as_empty(layout: Layout, damage: str) -> None:
    # A deleted or emptied index.yaml read as "no memories": every saved memory vanished from the
    # profile and search, and the next save wrote an index holding only itself.
    store = LongTermMemoryStore(layout, Storage())

    async def save(i: int) -> None:
        await store.save(type="fact", title=f"t{i}", content=f"fact {i}.", now=NOW + i, memory_id=f"m{i}")

    for i in range(3):
        anyio.run(save, i)
    assert store.stats().problems == ()  # a first save into an empty store is no lost index
    index = layout.long_term / "index.yaml"
    if damage == "deleted":
        index.unlink()
    else:
        index.write_bytes(b"")
    reopened = LongTermMemoryStore(layout, Storage())
    found = anyio.run(lambda: reopened.entries(now=NOW + 10))
    assert [e.id for e in found] == ["m0", "m1", "m2"]
    assert reopened.stats().problems == (
        "index.yaml is missing or empty although memories/ holds entries; rebuilt the index from memories/",
    )
    anyio.run(lambda: reopened.save(type="fact", title="t3", content="fact 3.", now=NOW + 3, memory_id="m3"))
    after = anyio.run(lambda: LongTermMemoryStore(layout, Storage()).entries(now=NOW + 10))
    assert [e.id for e in after] == ["m0", "m1", "m2", "m3"]

"""Reliability finding 4: history cursors are allocated under an inter-process lock.

Several writers (OS processes, or several HistoryStore instances in one
process) appending to one root get unique cursors, strictly increasing in file
order, and no record is lost.
"""

from __future__ import annotations

import threading
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import msgspec

from aiden.longterm.history import HistoryRecord, HistoryStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from tests.helpers import race_processes

N = 60
NOW = 1_767_225_600.0


def records_in_file_order(layout: Layout) -> list[HistoryRecord]:
    data = (layout.long_term / "history.jsonl").read_bytes()
    assert data.endswith(b"\n")
    return [msgspec.json.decode(line, type=HistoryRecord) for line in data.splitlines()]


def assert_consistent(layout: Layout, writers: list[str]) -> None:
    records = records_in_file_order(layout)
    assert [r.cursor for r in records] == list(range(1, N * len(writers) + 1))
    for writer in writers:  # none lost, each writer's own records in its order
        assert [r.content for r in records if r.session_key == writer] == [f"{writer} {i}" for i in range(N)]
    assert (layout.long_term / ".cursor").read_text() == f"{N * len(writers)}\n"


def append_many(root: str, writer: str, start: EventType) -> None:
    """One OS process: a fresh store (nothing shared in memory) appending N records."""
    history = HistoryStore(Layout(Path(root)), Storage())
    start.wait()  # both processes start appending together, so their appends interleave
    for i in range(N):
        history.append(f"{writer} {i}", session_key=writer, now=NOW + i)


def test_two_processes_append_unique_increasing_cursors(layout: Layout) -> None:
    writers = ["proc-a", "proc-b"]
    race_processes(append_many, layout.root, writers)
    assert_consistent(layout, writers)
    assert HistoryStore(layout, Storage()).cursor() == 2 * N


def test_two_stores_in_one_process_interleaved(layout: Layout, storage: Storage) -> None:
    first, second = HistoryStore(layout, storage), HistoryStore(layout, storage)
    for i in range(N):  # strict alternation: each store must see the other's appends
        assert first.append(f"store-a {i}", session_key="store-a", now=NOW).cursor == 2 * i + 1
        assert second.append(f"store-b {i}", session_key="store-b", now=NOW).cursor == 2 * i + 2
    assert_consistent(layout, ["store-a", "store-b"])
    assert first.cursor() == second.cursor() == 2 * N


def test_two_stores_in_threads_concurrently(layout: Layout, storage: Storage) -> None:
    stores = {w: HistoryStore(layout, storage) for w in ("thread-a", "thread-b")}
    barrier = threading.Barrier(len(stores))

    def run(writer: str) -> None:
        barrier.wait()
        for i in range(N):
            stores[writer].append(f"{writer} {i}", session_key=writer, now=NOW)

    threads = [threading.Thread(target=run, args=(w,)) for w in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert_consistent(layout, list(stores))


def test_lock_file_is_created_once_and_kept(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    history.append("one", session_key="k", now=NOW)
    inode = history.lock_path.stat().st_ino
    history.append("two", session_key="k", now=NOW)
    assert history.lock_path.name == ".history.lock"
    assert history.lock_path.stat().st_ino == inode
    assert [r.cursor for r in history.read_after(0)] == [1, 2]

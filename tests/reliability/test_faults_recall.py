"""Issue #16: the recall index's file mutations go through the runtime's :class:`Storage`, and faults there
cost nothing acknowledged.

What recall mutates itself is small: when it (re)creates its database it deletes the old database
files (``recall.sqlite3`` and its ``-wal``/``-shm``/``-journal``) and moves aside a directory found
where they go, both through ``Storage``. The database pages themselves are written by SQLite with its
own I/O, outside the seam: that is accepted because the database is derived data (rebuilt from the
session's chunks whenever it is missing or unreadable), so a fault or a crash there can cost a
rebuild, never an event. Deleting or corrupting the database between ``RecallIndex`` instances is
covered in tests/recall/test_recall_index.py; here it is checked once through the whole runtime and
a reopen, with the rebuild's deletions seen at the seam.
"""

from __future__ import annotations

import errno
import os
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.testing import ScriptedSummarizer
from tests.reliability.harness import reliability_config, tag_of, tagged_event

pytestmark = pytest.mark.anyio

CONFIG = reliability_config(lock_timeout_s=10)

# The one word only the first (compacted) event holds: recall must find exactly that event.
NEEDLE = "zebracorn"


class SeamStorage(Storage):
    """Records every mutation attempted through the seam (``_fault`` runs before each), and fails
    the ones ``fail(kind, path)`` selects with ``OSError(EIO)``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        self.fail: Callable[[str, str], bool] = never
        self.injected = 0

    def take(self) -> list[tuple[str, str]]:
        """The calls since the last take."""
        calls, self.calls = self.calls, []
        return calls

    def _fault(self, kind: str, path: str) -> None:
        self.calls.append((kind, path))
        if self.fail(kind, path):
            self.injected += 1
            raise OSError(errno.EIO, os.strerror(errno.EIO), path)


def never(kind: str, path: str) -> bool:
    return False


def db_files(layout: Layout) -> list[str]:
    base = str(layout.recall_db)
    return [base, base + "-wal", base + "-shm", base + "-journal"]


def damage_db(layout: Layout, damage: str) -> None:
    """Delete the closed database (``"deleted"``) or leave garbage where it was (``"garbage"``)."""
    for path in db_files(layout)[1:]:
        Path(path).unlink(missing_ok=True)
    if damage == "deleted":
        layout.recall_db.unlink()
    else:
        layout.recall_db.write_bytes(random.Random(7).randbytes(3000))


async def compacted_memory(memory: aiden.Memory) -> tuple[list[SessionEvent], list[int]]:
    """Append twenty tagged events with a needle second, compact; returns what was acknowledged and
    the hot window's seqs after the compaction.

    The needle is not first: the session's first user message stays pinned in the hot window.
    """
    rng = random.Random(16)
    needle = SessionEvent(type="assistant_output", role="assistant", content=f"n:0 noted the {NEEDLE} parser")
    events = [tagged_event(f"e:{i}", i, rng) for i in range(20)]
    acked = await memory.append_many([events[0], needle, *events[1:]])
    outcome = await memory.maintain(manual=True)
    assert outcome.compacted
    hot = [e.seq for e in await memory.hot_window()]
    assert hot == [1, 19, 20, 21]  # the pinned first user message and the kept tail
    return acked, hot


async def assert_all_readable(memory: aiden.Memory, acked: list[SessionEvent], hot: list[int]) -> None:
    """Every acknowledged event is still readable by seq, and the hot window is unchanged."""
    for event in acked:
        got = await memory.read_event(event.seq)
        assert got is not None and got.content == event.content
    assert [e.seq for e in await memory.hot_window()] == hot


async def needle_tags(memory: aiden.Memory) -> list[str]:
    return [h.text.split(" ", 1)[0] for h in await memory.recall_session_chunks(NEEDLE)]


async def test_recall_mutations_go_through_the_storage_passed_in(tmp_path: Path) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        acked, hot = await compacted_memory(memory)
        # The compaction's pass created the database (the recall index syncs in the pass): it
        # deleted whatever database files were there (none), through the seam; SQLite then
        # created recall.sqlite3 with its own I/O.
        created = [call for call in storage.take() if call[1] in db_files(layout)]
        assert created == [("unlink", p) for p in db_files(layout)]
        assert layout.recall_db.exists()
        assert await needle_tags(memory) == ["n:0"]
        # A search over an up-to-date database mutates nothing through the seam.
        assert await needle_tags(memory) == ["n:0"]
        assert storage.take() == []
        await assert_all_readable(memory, acked, hot)


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
async def test_fault_deleting_the_old_database_is_a_recall_error_and_loses_nothing(
    tmp_path: Path, suffix: str
) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        target = f"{layout.recall_db}{suffix}"
        # The fault is in place before the pass that creates the database: the pass commits
        # anyway (the index is derived), and the search that needs the database says why not.
        storage.fail = lambda kind, path: (kind, path) == ("unlink", target)
        acked, hot = await compacted_memory(memory)
        with pytest.raises(
            aiden.RecallError, match=re.escape(f"cannot remove the recall database: unlink {target} failed")
        ):
            await memory.recall_session_chunks(NEEDLE)
        assert storage.injected == 2  # the pass's sync, then the search's
        await assert_all_readable(memory, acked, hot)
        # The fault clears: the next search builds the database and answers correctly.
        storage.fail = never
        assert await needle_tags(memory) == ["n:0"]
        stats = memory.recall_stats()
        assert stats is not None and stats.rebuilds == 1
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        assert memory.recovery.unrecoverable == []
        assert await needle_tags(memory) == ["n:0"]
        await assert_all_readable(memory, acked, hot)


async def test_fault_moving_a_directory_off_the_database_path_is_a_recall_error(tmp_path: Path) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        # A directory where the database goes, before the pass that creates the database.
        layout.recall_db.mkdir(parents=True)
        (layout.recall_db / "kept.txt").write_text("not aiden's")
        # The aside name carries a timestamp: the rename is matched on its prefix.
        storage.fail = lambda kind, path: (
            kind == "rename" and path.startswith(f"{layout.recall_db}.displaced-")
        )
        acked, hot = await compacted_memory(memory)
        with pytest.raises(aiden.RecallError, match=r"cannot remove the recall database: rename .* failed"):
            await memory.recall_session_chunks(NEEDLE)
        assert storage.injected == 2  # the pass's sync, then the search's
        assert (layout.recall_db / "kept.txt").read_text() == "not aiden's"
        await assert_all_readable(memory, acked, hot)
        storage.fail = never
        storage.take()
        assert await needle_tags(memory) == ["n:0"]
        (aside,) = [p for p in layout.session.iterdir() if p.name.startswith("recall.sqlite3.displaced-")]
        assert (aside / "kept.txt").read_text() == "not aiden's"
        assert storage.take() == [
            ("rename", str(aside)),
            ("unlink", db_files(layout)[1]),
            ("unlink", db_files(layout)[2]),
            ("unlink", db_files(layout)[3]),
        ]


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
async def test_database_damaged_between_opens_is_rebuilt_through_the_seam(
    tmp_path: Path, damage: str
) -> None:
    layout = Layout(tmp_path)
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        acked, hot = await compacted_memory(memory)
        assert await needle_tags(memory) == ["n:0"]
    damage_db(layout, damage)
    storage = SeamStorage()
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        assert await needle_tags(memory) == ["n:0"]
        # The rebuild runs at the first search or at a background pass's sync, whichever comes
        # first (a pass may run right after the open): count its deletes from the open on.
        files = db_files(layout)
        assert [call for call in storage.take() if call[0] == "unlink" and call[1] in files] == [
            ("unlink", p) for p in files
        ]
        stats = memory.recall_stats()
        assert stats is not None and stats.rebuilds == 1
        await assert_all_readable(memory, acked, hot)
        assert [tag_of(e) for e in await memory.rehydrate(await first_chunk(memory))][:1] == ["n:0"]


async def first_chunk(memory: aiden.Memory) -> str:
    index = await memory.chunk_index()
    return index.chunks[0].chunk_id

"""Recovery's list of file paths (``aiden.storage.recovery``) matches the files aiden writes.

A file an owner writes that the list misses would stop every open again the day a directory
stands in its place (finding 9); a name the list keeps after its owner renamed the file would
guard nothing. Both directions are checked against a memory every part of aiden has written to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiden.experience.episodestore import EpisodeStore
from aiden.experience.recordstore import RecordStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.recovery import file_paths
from tests.experience.test_experience_core import failing_then_working, process
from tests.reliability.test_directory_in_place import _populated as session_and_long_term_written

pytestmark = pytest.mark.anyio

# Files the population below does not write, and who writes them when.
NOT_WRITTEN_HERE = {
    "last_recovery.json",  # a recovery on open that found something
    "session/session.json",  # a session closed by rotation
    "session/events.quarantine",  # a torn tail or corrupt line set aside
    "session/summary_archive.md",  # more chunks than summary_max_chunks
    "long_term/digest.md",  # the session-file cap folding old sessions into the digest
    "long_term/SOUL.md",  # Dream routing a communication-style record
    "long_term/USER.md",  # Dream routing a user preference
    "experience/vectors.msgpack",  # a learning pass or recall of a memory with an embedder
}


def _recovery_owns(rel: str) -> bool:
    # Chunk files and the chunk index are recovery's own (it rebuilds and reports them); the
    # recall database displaces itself; .git is Dream's repository, checked by gitstore.
    return (
        rel.startswith(("session/chunks/", "session/recall.sqlite3", "long_term/.git/"))
        or "/session_archive/" in f"/{rel}"
    )


async def _populated(root: Path) -> Layout:
    await session_and_long_term_written(root)
    layout = Layout(root)
    episodes, records = EpisodeStore(layout, Storage()), RecordStore(layout, Storage())
    assert episodes.commit(failing_then_working("ep-1", 1_800_000_000.0), now=1_800_000_100.0)
    assert process(episodes, records) == 1
    return layout


async def test_every_file_written_is_on_the_list_and_every_listed_file_is_written(tmp_path: Path) -> None:
    layout = await _populated(tmp_path)
    written = {
        p.relative_to(layout.memory).as_posix()
        for p in layout.memory.rglob("*")
        if p.is_file() and not _recovery_owns(p.relative_to(layout.memory).as_posix())
    }
    listed = {p.relative_to(layout.memory).as_posix() for p in file_paths(layout, locks=True)}
    assert written - listed == set()
    assert listed - written == NOT_WRITTEN_HERE
    # Each kind of file the scans find was written at least once (so the scans were exercised).
    for pattern in ("long_term/memories/", "long_term/sessions/", "experience/profiles/", "/episode.json"):
        assert any(pattern in rel for rel in written), pattern

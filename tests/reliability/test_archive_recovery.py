"""Finding 9 leftovers: archived sessions are recovered, and no temp file stays in an archive.

A crash between writing a chunk file and committing the index leaves an orphan
chunk whose events are also in the hot window; when the session is rotated
before any recovery, the orphan travels into ``session_archive/``, where a
reader taking chunk files and hot window together saw those events twice. A
checkpoint racing another process's rotation leaves its temp file in the
archive (the session directory was renamed under it).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

import aiden
from aiden.storage import chunks as cs
from aiden.storage.fs import TEMP_MARKER
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from aiden.testing import ScriptedSummarizer
from tests.reliability.child import CRASH_EXIT, config_for
from tests.reliability.harness import ForkServer, check, session_layout, spawn_child

pytestmark = pytest.mark.anyio


def every_copy(lay: Layout) -> Counter[int]:
    """Seqs of every chunk file on disk (indexed or not) plus the hot window: what a naive reader sees."""
    seqs: Counter[int] = Counter()
    for chunk_id in cs.list_chunk_files(lay):
        seqs.update(e.seq for e in cs.read_chunk(lay, chunk_id).events)
    seqs.update(e.seq for e in scan(read_bytes(lay.events)).events)
    return seqs


async def test_an_orphan_chunk_rotated_into_an_archive_is_settled_at_open(
    tmp_path: Path, fork_server: ForkServer | None
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    crasher = spawn_child(
        fork_server, ["crasher", str(root), "compaction", "compaction.after_chunk", "2", "0"], tmp_path, "c"
    )
    assert crasher.wait(120) == CRASH_EXIT, crasher.stderr()[-2000:]
    log = crasher.output()
    layout = Layout(root)
    # Rotated before any recovery ran (what another, already open, process's rotation does).
    layout.archive.mkdir()
    os.rename(layout.session, layout.archive / "crashed")
    archived = session_layout(root, layout.archive / "crashed")
    before = every_copy(archived)
    assert [s for s, n in before.items() if n > 1] != []  # the orphan really duplicates hot events
    async with aiden.open_memory(root, config=config_for(), summarizer=ScriptedSummarizer()):
        pass
    after = every_copy(archived)
    assert [s for s, n in after.items() if n > 1] == []
    assert set(after) == set(before)
    assert set(cs.list_chunk_files(archived)) == {
        e.chunk_id for e in cs.load_all_entries(archived, cs.load_index(archived) or cs.ChunkIndex())
    }
    verdict = check(root, log.acked, log.intents)
    assert verdict.ok, verdict.explain()


async def test_a_temp_file_left_in_an_archive_is_removed_at_open(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=config_for(), summarizer=ScriptedSummarizer()) as memory:
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="a:0 fix the parser"))
        archive_id = await memory.rotate("old")
    archive = Layout(tmp_path).archived_session(archive_id)
    leftover = archive / f"running_summary.md{TEMP_MARKER}1234"  # what the racing checkpoint leaves
    leftover.write_bytes(b"half a summary")
    async with aiden.open_memory(tmp_path, config=config_for(), summarizer=ScriptedSummarizer()):
        pass
    assert not leftover.exists()
    assert sorted(p.name for p in archive.iterdir() if TEMP_MARKER in p.name) == []

"""[Reliability] finding 9 for the experience stores: crash-left temp files are removed, and a
directory standing where one of their files goes is moved aside at open and reported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aiden
from aiden.experience.episodestore import EpisodeStore
from aiden.experience.recordstore import RecordStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from tests.experience.test_experience_core import failing_then_working, process
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_stale_temp_files_in_the_experience_stores_are_removed(tmp_path: Path) -> None:
    memory = Layout(tmp_path).memory
    episode_dir = memory / "episodes/2026/ep-1"
    for d in (episode_dir, memory / "experience/procedure", memory / "experience/profiles"):
        d.mkdir(parents=True)
    stale = [
        memory / "episodes/.aiden-tmp-index.yaml.1.a",
        episode_dir / ".aiden-tmp-episode.json.2.b",
        episode_dir / ".aiden-tmp-processed.3.c",
        memory / "experience/.aiden-tmp-index.yaml.4.d",
        memory / "experience/procedure/.aiden-tmp-r1.md.5.e",
        memory / "experience/profiles/.aiden-tmp-p.json.6.f",
    ]
    fresh = episode_dir / ".aiden-tmp-processed.7.g"  # another process's write in flight
    kept = [memory / "experience/procedure/r0.md", *stale]
    for path in [*kept, fresh]:
        path.write_text("partial")
    hour_ago = os.stat(fresh).st_mtime - 3600
    for path in kept:
        os.utime(path, (hour_ago, hour_ago))
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as opened:
        await opened.learn_experience()  # the episode store's first use
        assert await opened.experience_records() == []  # the record store's
    assert [p.name for p in stale if p.exists()] == []
    assert fresh.exists()
    assert kept[0].read_text() == "partial"


@pytest.mark.parametrize(
    "where",
    [
        "episodes/index.yaml",
        "episodes/.episodes.lock",
        "experience/index.yaml",
        "experience/.records.lock",
        "episodes/2026/ep-0/episode.json",
        "episodes/2026/ep-0/processed",
        "experience/procedure/r0.md",
    ],
)
async def test_a_directory_where_an_experience_file_goes_is_moved_aside_at_open(
    tmp_path: Path, where: str
) -> None:
    layout = Layout(tmp_path)
    planted = layout.memory / where
    (planted / "inside").mkdir(parents=True)
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as opened:
        (aside,) = [
            p.name for p in planted.parent.iterdir() if p.name.startswith(f"{planted.name}.displaced-")
        ]
        assert opened.recovery.unrecoverable == [f"a directory stood where {where} goes; moved to {aside}"]
    assert (planted.parent / aside / "inside").is_dir()  # nothing deleted
    assert not planted.exists()
    # Both stores work again: an episode commits, is learned from, and its records are stored.
    episodes, records = EpisodeStore(layout, Storage()), RecordStore(layout, Storage())
    assert episodes.commit(failing_then_working("ep-1", 1_800_000_000.0), now=1_800_000_100.0)
    assert process(episodes, records) == 1
    assert [row.id for row in episodes.rows()] == ["ep-1"]
    assert records.rows() != []
    assert episodes.problems == records.problems == []

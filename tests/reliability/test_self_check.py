"""The harness must be able to fail: deliberately broken variants of aiden go through the same
checker the real tests use, and the checker must report lost or duplicated events.

(a) the compaction trim skips the re-read and writes the snapshot's events back,
(b) the storage skips every directory fsync (power-loss replay),
(c) the trim merges by count (drops the first N lines) instead of by seq.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from aiden import Config, SessionEvent
from aiden.events import encode_event
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes
from aiden.storage.protocol import Snapshot
from aiden.storage.session import FileSessionStore
from aiden.testing import RecordingStorage
from tests.reliability.harness import (
    check,
    hot_lines,
    inprocess_workload,
    report,
)
from tests.reliability.powerloss import interesting_prefixes, record_workload, replay

pytestmark = pytest.mark.anyio

CONFIG = Config(
    durability="fsync",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summary_max_chunks=3,
)


class SkipRereadStore(FileSessionStore):
    """(a) Writes the snapshot's events (minus the chunk) instead of re-reading events.jsonl."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._snapshot_events: list[SessionEvent] = []

    def snapshot(self) -> Snapshot:
        snap = super().snapshot()
        self._snapshot_events = list(snap.events)
        return snap

    def _trim_hot_window(self, index: cs.ChunkIndex, entry: cs.ChunkEntry) -> int:
        self.events_lock.acquire(self.config.lock_timeout_s)
        try:
            keep = [e for e in self._snapshot_events if not entry.covers(e.seq)]
            self.storage.write_atomic(self.layout.events, b"".join(encode_event(e) for e in keep), crash_prefix="events")
            return len(keep)
        finally:
            self.events_lock.release()


class CountMergeStore(FileSessionStore):
    """(c) Re-reads events.jsonl but drops its first ``count`` lines instead of the covered seqs."""

    def _trim_hot_window(self, index: cs.ChunkIndex, entry: cs.ChunkEntry) -> int:
        self.events_lock.acquire(self.config.lock_timeout_s)
        try:
            lines = read_bytes(self.layout.events).splitlines(keepends=True)
            keep = lines[entry.count :]
            self.storage.write_atomic(self.layout.events, b"".join(keep), crash_prefix="events")
            return len(keep)
        finally:
            self.events_lock.release()


class NoDirFsyncStorage(RecordingStorage):
    """(b) Never fsyncs a directory: renames and creations are never made durable."""

    def fsync_dir(self, path: object) -> None:  # type: ignore[override]
        return


@pytest.mark.parametrize(
    ("variant", "factory"),
    [("skip-reread", SkipRereadStore), ("merge-by-count", CountMergeStore)],
)
async def test_checker_catches_broken_merge(tmp_path: Path, variant: str, factory: type[FileSessionStore]) -> None:
    wl = await inprocess_workload(tmp_path, config=CONFIG, store_factory=factory, tasks=4, per_task=25, passes=4)
    verdict = check(tmp_path, wl.acked, wl.attempted)
    report(f"self-check {variant}", compactions=wl.compactions, **verdict.figures())
    assert wl.compactions >= 1
    assert len(verdict.lost) + len(verdict.duplicated) > 0, "the checker missed a broken merge"


async def test_same_workload_passes_with_the_real_store(tmp_path: Path) -> None:
    wl = await inprocess_workload(tmp_path, config=CONFIG, tasks=4, per_task=25, passes=4)
    verdict = check(tmp_path, wl.acked, wl.attempted)
    report("self-check control (real SessionStore)", compactions=wl.compactions, **verdict.figures())
    assert wl.compactions >= 1
    assert verdict.ok, verdict.explain()


async def test_power_loss_replay_catches_skipped_dir_fsync(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    rec = await record_workload(root, NoDirFsyncStorage(), seed=0)
    rng = random.Random(0)
    candidates = interesting_prefixes(rec.ops)
    prefixes = sorted({len(rec.ops), *rng.sample(candidates, min(6, len(candidates)))})
    result = await replay(rec, tmp_path / "states", prefixes, ["drop", "random"], seed=0)
    v = result.verdict
    report("self-check no directory fsync", states_checked=result.states, lost=len(v.lost),
           duplicated=len(v.duplicated), bad_states=len(v.bad_states))
    assert len(v.lost) + len(v.duplicated) > 0, "the power-loss replay missed skipped directory fsyncs"


async def test_checker_flags_a_deleted_and_a_duplicated_line(tmp_path: Path) -> None:
    wl = await inprocess_workload(tmp_path, config=CONFIG, tasks=2, per_task=10, passes=0)
    lines = hot_lines(tmp_path)
    events = tmp_path / "memory" / "session" / "events.jsonl"
    events.write_bytes(b"".join([lines[0], *lines[2:], lines[3]]))
    verdict = check(tmp_path, wl.acked, wl.attempted)
    report("self-check hand-edited log", **verdict.figures())
    assert len(verdict.lost) == 1
    assert verdict.duplicated
    assert verdict.bad_states  # the gap and the order

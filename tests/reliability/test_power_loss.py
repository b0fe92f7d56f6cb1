"""Power-loss replay: record every storage op of appends + compactions + a rotation, then rebuild
what the disk could hold after power fails at sampled op prefixes (see ``powerloss.py`` for the
model), open each state with aiden (recovery) and check every event acknowledged before the cut.
"""

from __future__ import annotations

import os
import random
import threading
from functools import partial
from pathlib import Path

import anyio
import pytest

import aiden
from aiden.storage.eventlog import HIGH_WATER_NAME
from aiden.testing import GatedSummarizer, RecordingStorage, ScriptedSummarizer
from tests.reliability.harness import report, tagged_event
from tests.reliability.powerloss import (
    PL_CONFIG,
    Recording,
    capture_baseline,
    interesting_prefixes,
    record_workload,
    replay,
)

pytestmark = pytest.mark.anyio


def sample_prefixes(rec: Recording, k: int, seed: int) -> list[int]:
    rng = random.Random(f"prefixes/{seed}")
    candidates = interesting_prefixes(rec.ops)
    # Always: the very end, right after each replace/rename (commit points), plus a random sample.
    must = {len(rec.ops)}
    for i, op in enumerate(rec.ops):
        if op.kind in ("replace", "rename") and rng.random() < 0.5:
            must.add(i + 1)
    # Some moments with an append written but not yet fsynced (torn / zero-filled tails).
    appends = [i + 1 for i, op in enumerate(rec.ops) if op.kind == "write" and op.path.endswith("events.jsonl")]
    must |= set(rng.sample(appends, min(4, len(appends))))
    picked = set(rng.sample(candidates, min(k, len(candidates))))
    return sorted(must | picked)


@pytest.mark.seeds(ci=1, full=4)
async def test_power_loss_replay(tmp_path: Path, seed: int, full_run: bool) -> None:
    root = tmp_path / "root"
    root.mkdir()
    storage = RecordingStorage()
    rec = await record_workload(root, storage, seed=seed)
    acked_in_run = sum(1 for _, idx in rec.acks.values() if idx > 0)
    if full_run:
        prefixes = sorted(set(interesting_prefixes(rec.ops)) | {len(rec.ops)})
    else:
        prefixes = sample_prefixes(rec, 12, seed)
    result = await replay(rec, tmp_path / "states", prefixes, ["drop", "random", "torn", "keep"], seed=seed)
    v = result.verdict
    report(
        f"power-loss replay seed {seed}",
        ops_recorded=result.ops,
        prefixes_tried=result.prefixes,
        states_checked=result.states,
        acknowledged_in_run=acked_in_run,
        commits=len(rec.commits),
        acked_checks=v.acked,
        dir_ops_undone=result.meta_undone,
        data_ops_undone=result.data_undone,
        torn_writes=result.torn,
        lost=len(v.lost),
        duplicated=len(v.duplicated),
        bad_states=len(v.bad_states),
    )
    assert acked_in_run >= 80 and len(rec.commits) >= 2
    assert result.meta_undone > 0 and result.data_undone > 0 and result.torn > 0
    assert not v.lost, result.failing[:5]
    assert not v.duplicated, result.failing[:5]
    assert v.ok, result.failing[:5]


# --------------------------------------------------------------------------
# directory creations aiden never makes durable
# --------------------------------------------------------------------------


async def test_power_loss_on_a_fresh_root_keeps_acknowledged_events(tmp_path: Path) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): on a fresh root aiden creates memory/
    and memory/session/ (Storage.mkdir) but never fsyncs their parent directories, so acknowledged
    appends can vanish with the directory entries after a power loss (SessionLock._ensure_fd,
    SessionStore._recover, SessionWriter._sync_file_state)
    """
    root = tmp_path / "root"
    root.mkdir()
    storage = RecordingStorage()
    rec = Recording(root, capture_baseline(root), [])
    rng = random.Random(1)
    async with aiden.open_memory(root, config=PL_CONFIG, storage=storage, summarizer=ScriptedSummarizer()) as m:
        for i in range(3):
            ev = await m.append(tagged_event(f"w:{i}", i, rng))
            rec.acks[f"w:{i}"] = (ev.seq, len(storage.ops))
            rec.attempted.add(f"w:{i}")
    rec.ops = storage.ops
    # Power fails after everything returned: only what was synced survives.
    result = await replay(rec, tmp_path / "states", [len(rec.ops)], ["drop"], seed=0)
    report("power loss on a fresh root", **result.verdict.figures())
    assert not result.verdict.lost, result.failing


async def test_power_loss_during_first_rotation_keeps_the_closed_session(tmp_path: Path) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): the first rotation creates
    memory/session_archive/ (Storage.mkdir) and renames the session into it before memory/ is fsynced: a
    power loss between fsync_dir(session_archive) and fsync_dir(memory) leaves the closed session in an
    unreachable directory (SessionStore.rotate)
    """
    root = tmp_path / "root"
    root.mkdir()
    rng = random.Random(2)
    rec = Recording(root, {}, [])
    async with aiden.open_memory(root, config=PL_CONFIG, summarizer=ScriptedSummarizer()) as m:
        for i in range(5):
            ev = await m.append(tagged_event(f"b:{i}", i, rng))
            rec.acks[f"b:{i}"] = (ev.seq, 0)
            rec.attempted.add(f"b:{i}")
    rec.baseline = capture_baseline(root)
    storage = RecordingStorage()
    async with aiden.open_memory(root, config=PL_CONFIG, storage=storage, summarizer=ScriptedSummarizer()) as m:
        await m.rotate("first")
    rec.ops = storage.ops
    renamed = next(i for i, op in enumerate(rec.ops) if op.kind == "rename")
    prefixes = list(range(renamed + 1, len(rec.ops) + 1))
    result = await replay(rec, tmp_path / "states", prefixes, ["drop"], seed=0)
    report("power loss during the first rotation", prefixes_tried=len(prefixes), **result.verdict.figures())
    assert not result.verdict.lost, result.failing


class _FsyncHeldUntilHighWater(RecordingStorage):
    """Holds the fsync of an append tagged INFLIGHT until a seq high-water mark is written (at most
    5 s): a compaction's trim then reads that append's line before it is on disk."""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()
        self._marked = threading.Event()
        self._held: int | None = None

    def write(self, fd: int, data: bytes) -> None:
        super().write(fd, data)
        if b"INFLIGHT" in data:
            self._held = fd
            self.written.set()

    def fsync(self, fd: int) -> None:
        if fd == self._held:
            self._held = None
            self._marked.wait(5)
        super().fsync(fd)

    def write_atomic(self, path: str | os.PathLike[str], data: bytes, *, crash_prefix: str = "") -> None:
        super().write_atomic(path, data, crash_prefix=crash_prefix)
        if Path(path).name == HIGH_WATER_NAME:
            self._marked.set()


async def test_power_loss_while_a_trim_reads_an_unsynced_append_reports_no_loss(tmp_path: Path) -> None:
    """Regression test: the trim wrote the seq high-water mark from lines it read without the events
    lock, so it could name an append written but not yet fsynced; a power loss then took the line back
    and every later open reported that never-acknowledged event as lost (eventlog.trim_hot_window)."""
    root = tmp_path / "root"
    root.mkdir()
    storage = _FsyncHeldUntilHighWater()
    rec = Recording(root, capture_baseline(root), [])
    rng = random.Random(3)
    gated = GatedSummarizer()
    async with aiden.open_memory(root, config=PL_CONFIG, storage=storage, summarizer=gated) as m:
        for i in range(12):
            ev = await m.append(tagged_event(f"h:{i}", i, rng))
            rec.acks[f"h:{i}"] = (ev.seq, len(storage.ops))
            rec.attempted.add(f"h:{i}")

        async def in_flight() -> None:
            ev = await m.append(tagged_event("INFLIGHT", 0, rng))
            rec.acks["INFLIGHT"] = (ev.seq, len(storage.ops))

        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(m.maintain, manual=True))
            await gated.wait_started()  # the pass has read its events; the append comes after
            rec.attempted.add("INFLIGHT")
            tg.start_soon(in_flight)
            await anyio.to_thread.run_sync(storage.written.wait)
            gated.open()
    rec.ops = storage.ops
    marks = [i for i, op in enumerate(rec.ops) if op.kind == "replace" and op.target.endswith(HIGH_WATER_NAME)]
    assert marks  # the trim ran
    # Power fails anywhere from the first mark's write to the end: unsynced lines are dropped.
    prefixes = list(range(marks[0] + 1, len(rec.ops) + 1))
    result = await replay(rec, tmp_path / "states", prefixes, ["drop"], seed=0)
    report("power loss while a trim reads an unsynced append", prefixes_tried=len(prefixes), **result.verdict.figures())
    assert result.verdict.ok, result.failing[:3]

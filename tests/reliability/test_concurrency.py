"""Concurrency: asyncio appender tasks and two appender processes while compaction runs in a loop,
lock holders SIGKILLed while holding ``session.lock`` / ``compaction.lock``, and a reader that
loops throughout and must never see a gap or a duplicate among the seqs it knows are acknowledged.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

import aiden
from aiden import SessionEvent
from aiden.testing import SlowSummarizer
from tests.reliability.harness import (
    ForkServer,
    check,
    read_root,
    reliability_config,
    report,
    spawn_child,
    tagged_event,
)

pytestmark = pytest.mark.anyio

CONFIG = reliability_config(lock_timeout_s=60)


def _reader_pass(root: Path, known: int, hot_first: bool) -> tuple[int, int, int]:
    """One read of chunks | hot window; returns (gaps, duplicates) among seqs <= known, and seqs seen."""
    view = read_root(root, hot_first=hot_first)[-1]
    seqs = [e.seq for e in view.events if e.seq <= known]
    present = set(seqs)
    gaps = sum(1 for s in range(1, known + 1) if s not in present)
    dups = len(seqs) - len(present)
    return gaps, dups, len(view.events)


@pytest.mark.seeds(ci=1, full=3)
async def test_tasks_and_processes_append_while_compaction_loops(
    tmp_path: Path, seed: int, fork_server: ForkServer | None
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    rng = random.Random(f"concurrency/{seed}")
    acked: dict[str, int] = {}
    attempted: set[str] = set()
    stalls: list[float] = []
    figures = {"reads": 0, "reader_gaps": 0, "reader_dups": 0, "naive_reads": 0, "naive_gaps_or_dups": 0}
    outcomes: list[aiden.CompactionOutcome] = []

    async with aiden.open_memory(root, config=CONFIG, summarizer=SlowSummarizer(0.01)) as memory:
        for i in range(6):
            ev = await memory.append(tagged_event(f"s:{i}", i, rng))
            acked[f"s:{i}"] = ev.seq
            attempted.add(f"s:{i}")
        children = [
            spawn_child(fork_server, ["appender", str(root), f"p{k}", str(seed), "60"], tmp_path, f"p{k}")
            for k in range(2)
        ]
        stop = anyio.Event()

        def known_max() -> int:
            best = max(acked.values(), default=0)
            for child in children:
                best = max(best, child.output().max_seq)
            return best

        async def appender(k: int) -> None:
            i = 0
            while not stop.is_set():
                tag = f"t{k}:{i}"
                attempted.add(tag)
                started = time.monotonic()
                ev = await memory.append(tagged_event(tag, i, rng))
                stalls.append(time.monotonic() - started)
                acked[tag] = ev.seq
                i += 1
                await anyio.sleep(rng.random() * 0.006)

        async def reader() -> None:
            while not stop.is_set():
                known = known_max()
                gaps, dups, _ = await anyio.to_thread.run_sync(_reader_pass, root, known, True)
                figures["reads"] += 1
                figures["reader_gaps"] += gaps
                figures["reader_dups"] += dups
                # The naive order (index first, then hot window), for the record only.
                known = known_max()
                gaps, dups, _ = await anyio.to_thread.run_sync(_reader_pass, root, known, False)
                figures["naive_reads"] += 1
                figures["naive_gaps_or_dups"] += int(bool(gaps or dups))
                await anyio.sleep(0.002)

        async def compactor() -> None:
            while not stop.is_set():
                outcomes.append(await memory.maintain(manual=True))

        async with anyio.create_task_group() as tg:
            for k in range(4):
                tg.start_soon(appender, k)
            tg.start_soon(reader)
            tg.start_soon(compactor)
            for child in children:
                await anyio.to_thread.run_sync(child.wait, 90)
            await anyio.sleep(0.1)
            stop.set()
        rcs = [child.returncode() for child in children]
    assert rcs == [0, 0], [c.stderr()[-2000:] for c in children]
    for child in children:
        log = child.output()
        acked.update(log.acked)
        attempted |= log.intents
    verdict = check(root, acked, attempted)
    compactions = sum(o.compacted for o in outcomes)
    report(
        f"concurrency seed {seed}",
        acknowledged=verdict.acked,
        process_acked=sum(len(c.output().acked) for c in children),
        compaction_passes=len(outcomes),
        compactions=compactions,
        reader_snapshots=figures["reads"],
        reader_gaps=figures["reader_gaps"],
        reader_duplicates=figures["reader_dups"],
        naive_reader_inconsistent_snapshots=f"{figures['naive_gaps_or_dups']}/{figures['naive_reads']}",
        lost=len(verdict.lost),
        duplicated=len(verdict.duplicated),
        bad_states=len(verdict.bad_states),
        max_append_s=round(max(stalls), 3),
    )
    assert compactions >= 3
    assert figures["reads"] >= 5
    assert figures["reader_gaps"] == 0 and figures["reader_dups"] == 0
    assert not verdict.lost and not verdict.duplicated, verdict.explain()
    assert verdict.ok, verdict.explain()


@pytest.mark.parametrize("lockfile", ["session.lock", "compaction.lock"])
async def test_lock_holder_sigkilled_while_holding_the_lock(
    tmp_path: Path, lockfile: str, fork_server: ForkServer | None
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    rng = random.Random(lockfile)
    acked: dict[str, int] = {}
    attempted: set[str] = set()
    n = 0

    async def add(memory: aiden.Memory) -> SessionEvent:
        nonlocal n
        tag = f"k:{n}"
        attempted.add(tag)
        ev = await memory.append(tagged_event(tag, n, rng))
        acked[tag] = ev.seq
        n += 1
        return ev

    async with aiden.open_memory(root, config=CONFIG, summarizer=SlowSummarizer(0.005)) as memory:
        for _ in range(20):
            await add(memory)
        holder = spawn_child(fork_server, ["locker", str(root), lockfile], tmp_path, "locker")
        await anyio.to_thread.run_sync(lambda: holder.wait_for_line(lambda log: "LOCKED" in log.lines, 30))
        blocked_at = time.monotonic()
        finished: list[float] = []

        async def blocked_work() -> None:
            if lockfile == "session.lock":
                for _ in range(5):
                    await add(memory)
            else:
                outcome = await memory.maintain(manual=True)
                assert outcome.compacted
            finished.append(time.monotonic())

        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked_work)
            await anyio.sleep(0.3)
            assert not finished, "work went through while another process held the lock"
            killed_at = time.monotonic()
            await anyio.to_thread.run_sync(holder.kill)
        resumed_after = finished[0] - killed_at
        for _ in range(5):
            await add(memory)
    verdict = check(root, acked, attempted)
    report(
        f"lock holder SIGKILLed ({lockfile})",
        held_s=round(killed_at - blocked_at, 3),
        resumed_after_kill_s=round(resumed_after, 3),
        acknowledged=verdict.acked,
        lost=len(verdict.lost),
        duplicated=len(verdict.duplicated),
    )
    assert resumed_after < 5.0
    assert verdict.ok, verdict.explain()


async def test_rotation_by_another_process_does_not_dedupe_new_events_against_the_old_session(
    tmp_path: Path,
) -> None:
    # Two open memories on one root have separate writers and separate lock descriptors:
    # to each other they are two processes.
    acked: dict[str, int] = {}
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=SlowSummarizer(0)) as a, aiden.open_memory(
        tmp_path, config=CONFIG, summarizer=SlowSummarizer(0)
    ) as b:
        for i in range(3):
            ev = await b.append(SessionEvent(type="user_input", content=f"old:{i} turn", event_id=f"turn-{i}"))
            acked[f"old:{i}"] = ev.seq
        await a.rotate("closed-by-a")
        ev = await b.append(SessionEvent(type="user_input", content="new:0 turn", event_id="turn-0"))
        acked["new:0"] = ev.seq
        ev = await b.append(SessionEvent(type="user_input", content="new:1 other"))
        acked["new:1"] = ev.seq
    verdict = check(tmp_path, acked, set(acked))
    report("rotation by another process + event_id dedupe", **verdict.figures())
    assert not verdict.lost, verdict.explain()
    assert verdict.ok, verdict.explain()

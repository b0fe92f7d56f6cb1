"""I/O faults: ENOSPC / EIO injected at the Nth storage call (once, and persistently from then on)
during appends, compaction and recovery; a real short write (RLIMIT_FSIZE, EFBIG) in a child.

Failing calls must raise an aiden StorageError (DurabilityError for fsync), nothing acknowledged
may be lost, a failed append is never adopted into the log, and the memory works again once the
fault clears (after reopening at the latest).
"""

from __future__ import annotations

import errno
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

import aiden
from aiden import SessionEvent
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.testing import ScriptedSummarizer
from tests.reliability.harness import (
    ForkServer,
    Verdict,
    check,
    reliability_config,
    report,
    spawn_child,
    tag_of,
    tagged_event,
)

pytestmark = pytest.mark.anyio

CONFIG = reliability_config(lock_timeout_s=10)


@dataclass
class _Plan:
    nth: int
    persistent: bool
    err: int
    kinds: frozenset[str] | None = None
    path_suffix: str = ""


class FaultStorage(Storage):
    """Raises ``OSError(err)`` at the ``nth`` matching storage call (and every later one if persistent)."""

    def __init__(self) -> None:
        super().__init__()
        self.plan: _Plan | None = None
        self.calls = 0
        self.injected = 0

    def arm(
        self, nth: int, *, persistent: bool, err: int, kinds: set[str] | None = None, path_suffix: str = ""
    ) -> None:
        self.calls = 0
        self.injected = 0
        self.plan = _Plan(nth, persistent, err, frozenset(kinds) if kinds else None, path_suffix)

    def disarm(self) -> None:
        self.plan = None

    def _fault(self, kind: str, path: str) -> None:
        plan = self.plan
        if plan is None or (plan.kinds is not None and kind not in plan.kinds):
            return
        if plan.path_suffix and not path.endswith(plan.path_suffix):
            return
        self.calls += 1
        if self.calls == plan.nth or (plan.persistent and self.calls > plan.nth):
            self.injected += 1
            raise OSError(plan.err, os.strerror(plan.err), path)


@dataclass
class FaultFigures:
    cases: int = 0
    reached: int = 0
    raised: int = 0
    wrong_error_type: list[str] = field(default_factory=list)
    failed_but_stored: list[str] = field(default_factory=list)
    adopted_after_failed_cut_back: list[str] = field(default_factory=list)
    not_working_after: list[str] = field(default_factory=list)
    verdict: Verdict = field(default_factory=Verdict)


class _Appends:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.n = 0
        self.acked: dict[str, int] = {}
        self.attempted: set[str] = set()
        self.failed: set[str] = set()

    async def one(self, memory: aiden.Memory, k: int = 1) -> BaseException | None:
        events = []
        for _ in range(k):
            tag = f"e:{self.n}"
            events.append(tagged_event(tag, self.n, self.rng))
            self.attempted.add(tag)
            self.n += 1
        try:
            stored = await memory.append_many(events)
        except Exception as exc:
            self.failed |= {tag_of(e) for e in events}
            return exc
        for e in stored:
            self.acked[tag_of(e)] = e.seq
        return None


async def _reopen_check(root: Path, apps: _Appends, figs: FaultFigures, label: str, *, compact: bool) -> None:
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        first = memory.recovery
        if compact:
            outcome = await memory.maintain(manual=True)
            if not outcome.compacted:
                figs.not_working_after.append(f"{label}: compaction after reopen: {outcome.reason}")
        if await apps.one(memory) is not None:
            figs.not_working_after.append(f"{label}: append after reopen failed")
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        second = memory.recovery
    verdict = check(root, apps.acked, apps.attempted)
    for problem in first.unrecoverable:
        verdict.bad_states.append(f"unrecoverable: {problem}")
    if second.changed:
        verdict.bad_states.append(f"second recovery changed something: {second}")
    figs.verdict.merge(verdict, label)


async def append_fault_case(root: Path, nth: int, persistent: bool, err: int, figs: FaultFigures) -> None:
    label = f"append nth={nth} {'persistent' if persistent else 'once'} {errno.errorcode[err]}"
    apps = _Appends(random.Random(label))
    storage = FaultStorage()
    figs.cases += 1
    async with aiden.open_memory(root, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()) as memory:
        for _ in range(5):
            assert await apps.one(memory) is None
        storage.arm(nth, persistent=persistent, err=err)
        errors: list[BaseException] = []
        for i in range(6):
            exc = await apps.one(memory, 1 + i % 2)
            if exc is not None:
                errors.append(exc)
            elif errors and persistent:
                figs.not_working_after.append(f"{label}: an append succeeded under a persistent fault")
        reached = storage.injected > 0
        figs.reached += int(reached)
        figs.raised += len(errors)
        for exc in errors:
            if not isinstance(exc, aiden.StorageError):
                figs.wrong_error_type.append(f"{label}: {type(exc).__name__}: {exc}")
        storage.disarm()
        for _ in range(2):
            if await apps.one(memory) is not None:
                figs.not_working_after.append(f"{label}: append after the fault cleared failed")
    stored = {tag_of(e) for view in _views(root) for e in view.events}
    adopted = [f"{label}: {t}" for t in sorted(apps.failed & stored)]
    figs.failed_but_stored += adopted
    if persistent:
        # A persistent fault that starts at an fsync also fails the cut-back (see
        # test_failed_fsync_with_failed_cut_back_is_not_adopted).
        figs.adopted_after_failed_cut_back += adopted
    await _reopen_check(root, apps, figs, label, compact=False)


async def compaction_fault_case(root: Path, nth: int, persistent: bool, err: int, figs: FaultFigures) -> None:
    label = f"compaction nth={nth} {'persistent' if persistent else 'once'} {errno.errorcode[err]}"
    apps = _Appends(random.Random(label))
    storage = FaultStorage()
    figs.cases += 1
    async with aiden.open_memory(root, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()) as memory:
        for _ in range(16):
            assert await apps.one(memory, 2) is None
        storage.arm(nth, persistent=persistent, err=err)
        try:
            outcome = await memory.maintain(manual=True)
        except Exception as exc:
            figs.raised += 1
            if not isinstance(exc, aiden.StorageError):
                figs.wrong_error_type.append(f"{label}: {type(exc).__name__}: {exc}")
        else:
            assert outcome.compacted or storage.injected
        reached = storage.injected > 0
        figs.reached += int(reached)
        # The pass released the compaction lock whatever happened.
        lock = SessionLock(Storage(), Layout(root).memory / "compaction.lock")
        try:
            await anyio.to_thread.run_sync(lock.acquire, 2.0)
        except aiden.LockError:
            figs.not_working_after.append(f"{label}: compaction.lock still held after the failed pass")
        finally:
            lock.close()
        exc2 = await apps.one(memory)
        if exc2 is not None and not persistent:
            figs.not_working_after.append(f"{label}: append after a failed pass: {exc2}")
        storage.disarm()
        if await apps.one(memory) is not None:
            figs.not_working_after.append(f"{label}: append after the fault cleared failed")
    await _reopen_check(root, apps, figs, label, compact=True)


def _views(root: Path) -> list:
    from tests.reliability.harness import read_root

    return read_root(root)


def _cases(full: bool, top: int, ci: list[int]) -> list[int]:
    return list(range(1, top + 1)) if full else ci


def _figures(title: str, figs: FaultFigures) -> None:
    v = figs.verdict
    report(
        title,
        inputs_tried=figs.cases,
        fault_reached=figs.reached,
        calls_raised=figs.raised,
        wrong_error_type=len(figs.wrong_error_type),
        failed_but_stored=len(figs.failed_but_stored),
        adopted_after_failed_cut_back=len(figs.adopted_after_failed_cut_back),
        not_working_after=len(figs.not_working_after),
        acknowledged=v.acked,
        lost=len(v.lost),
        duplicated=len(v.duplicated),
        bad_states=len(v.bad_states),
    )


def _assert_clean(figs: FaultFigures) -> None:
    v = figs.verdict
    assert figs.reached >= max(1, figs.cases // 2)
    assert not figs.wrong_error_type, figs.wrong_error_type[:5]
    assert not v.lost and not v.duplicated, v.explain()
    assert v.ok, v.explain()
    assert not figs.failed_but_stored, figs.failed_but_stored[:5]
    assert not figs.not_working_after, figs.not_working_after[:5]


async def test_append_faults_once(tmp_path: Path, full_run: bool) -> None:
    figs = FaultFigures()
    for nth in _cases(full_run, 12, [1, 2, 3, 4, 7]):
        for err in (errno.ENOSPC, errno.EIO):
            root = tmp_path / f"n{nth}-{err}"
            await append_fault_case(root, nth, False, err, figs)
    _figures("I/O faults on append (once)", figs)
    _assert_clean(figs)


async def test_append_faults_persistent(tmp_path: Path, full_run: bool) -> None:
    figs = FaultFigures()
    for nth in _cases(full_run, 12, [1, 2, 3, 6]):
        for err in (errno.ENOSPC, errno.EIO):
            root = tmp_path / f"n{nth}-{err}"
            await append_fault_case(root, nth, True, err, figs)
    _figures("I/O faults on append (persistent)", figs)
    _assert_clean(figs)


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "persistent"])
async def test_compaction_faults(tmp_path: Path, persistent: bool, full_run: bool) -> None:
    figs = FaultFigures()
    for nth in _cases(full_run, 26, [1, 3, 5, 7, 9, 11, 13, 15, 18]):
        err = errno.ENOSPC if nth % 2 else errno.EIO
        root = tmp_path / f"n{nth}"
        await compaction_fault_case(root, nth, persistent, err, figs)
    _figures(f"I/O faults in compaction ({'persistent' if persistent else 'once'})", figs)
    _assert_clean(figs)


async def test_failed_fsync_is_cut_back_and_never_acknowledged(tmp_path: Path) -> None:
    storage = FaultStorage()
    layout = Layout(tmp_path)
    async with aiden.open_memory(tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()) as memory:
        for i in range(3):
            await memory.append(SessionEvent(type="user_input", content=f"ok:{i}"))
        size = layout.events.stat().st_size
        storage.arm(1, persistent=False, err=errno.EIO, kinds={"fsync"})
        with pytest.raises(aiden.DurabilityError):
            await memory.append(SessionEvent(type="user_input", content="failed:0"))
        size_after = layout.events.stat().st_size
        nxt = await memory.append(SessionEvent(type="user_input", content="next:0"))
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        hot = await memory.hot_window()
        changed = memory.recovery.changed
    report("failed fsync cut back", size_before=size, size_after_failure=size_after, next_seq=nxt.seq)
    assert size_after == size  # the failed batch's bytes were cut back
    assert nxt.seq == 4  # the failed event never got a seq anyone can see
    assert [e.content for e in hot] == ["ok:0", "ok:1", "ok:2", "next:0"]
    assert changed is False


async def test_failed_fsync_with_failed_cut_back_is_not_adopted(tmp_path: Path) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): when an append's fsync fails and the
    cut-back (truncate) fails too, the next batch re-reads the file and adopts the failed event into the
    log with its seq (SessionWriter._undo/_sync_file_state): an append that raised DurabilityError ends
    up stored and is made durable by the next fsync
    """
    storage = FaultStorage()
    async with aiden.open_memory(tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()) as memory:
        for i in range(3):
            await memory.append(SessionEvent(type="user_input", content=f"ok:{i}"))
        storage.arm(1, persistent=True, err=errno.EIO, kinds={"fsync", "truncate"})
        with pytest.raises(aiden.DurabilityError):
            await memory.append(SessionEvent(type="user_input", content="failed:0"))
        storage.disarm()
        await memory.append(SessionEvent(type="user_input", content="next:0"))
        hot = await memory.hot_window()
    report("failed fsync + failed cut-back", hot=[e.content for e in hot])
    assert "failed:0" not in [e.content for e in hot]


async def test_next_compaction_after_a_failed_trim_does_not_duplicate(tmp_path: Path) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): after a compaction whose trim of
    events.jsonl failed (index already committed), the next pass in the same process snapshots the
    covered events again and commits an overlapping chunk: duplicated events
    (MaintenanceScheduler._locked_pass / SessionStore.snapshot do not drop covered events)
    """
    storage = FaultStorage()
    apps = _Appends(random.Random(3))
    async with aiden.open_memory(tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()) as memory:
        for _ in range(16):
            await apps.one(memory, 2)
        # Fail the replace of events.jsonl: the index is committed, the hot window is not trimmed.
        storage.arm(1, persistent=False, err=errno.ENOSPC, kinds={"replace"}, path_suffix="events.jsonl")
        with pytest.raises(aiden.StorageError):
            await memory.maintain(manual=True)
        for _ in range(3):
            await apps.one(memory, 2)
        outcome = await memory.maintain(manual=True)
    verdict = check(tmp_path, apps.acked, apps.attempted)
    report("compaction after a failed trim", second_compacted=outcome.compacted, **verdict.figures())
    assert verdict.ok, verdict.explain()


async def test_faults_during_recovery_raise_and_leave_a_recoverable_session(tmp_path: Path) -> None:
    apps = _Appends(random.Random(4))
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        for _ in range(10):
            await apps.one(memory, 2)
        await memory.maintain(manual=True)
        for _ in range(3):
            await apps.one(memory, 1)
    layout = Layout(tmp_path)
    pristine = layout.events.read_bytes()
    tried = raised = 0
    figs = FaultFigures()
    for nth in range(1, 8):
        # Work for recovery: a torn tail and a tampered summary.
        layout.events.write_bytes(pristine + b'{"type":"user_input","content":"to')
        layout.summary.write_bytes(b"tampered\n")
        storage = FaultStorage()
        storage.arm(nth, persistent=True, err=errno.ENOSPC)
        tried += 1
        try:
            async with aiden.open_memory(tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()):
                pass
        except aiden.StorageError:
            raised += 1
        except Exception as exc:  # pragma: no cover - reported below
            figs.wrong_error_type.append(f"nth={nth}: {type(exc).__name__}: {exc}")
    await _reopen_check(tmp_path, apps, figs, "recovery", compact=False)
    report("I/O faults during recovery", inputs_tried=tried, opens_raised=raised, **figs.verdict.figures())
    assert raised >= 1
    assert not figs.wrong_error_type, figs.wrong_error_type
    assert figs.verdict.ok, figs.verdict.explain()


async def test_real_short_write_efbig_is_cut_back(tmp_path: Path, fork_server: ForkServer | None) -> None:
    root = tmp_path / "root"
    root.mkdir()
    child = spawn_child(fork_server, ["fsize", str(root)], tmp_path, "fsize")
    rc = await anyio.to_thread.run_sync(child.wait, 60)
    log = child.output()
    assert rc == 0, child.stderr()[-3000:]
    line = next(x for x in log.lines if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        recovery = memory.recovery
    verdict = check(root, log.acked, log.intents)
    report(
        "real short write (RLIMIT_FSIZE)",
        error=result["error"],
        errno=result["errno"],
        size_before=result["size_before"],
        size_after_failure=result["size_after_failure"],
        limit=result["limit"],
        next_seq=result["next_seq"],
        **verdict.figures(),
    )
    assert result["error"] == "StorageError" and result["errno"] == errno.EFBIG, result
    assert result["size_after_failure"] == result["size_before"], "the short write was not cut back"
    assert result["next_seq"] == 4
    assert "big:0" not in log.acked
    stored = {tag_of(e) for view in _views(root) for e in view.events}
    assert "big:0" not in stored
    assert recovery.changed is False and not recovery.unrecoverable
    assert verdict.ok, verdict.explain()

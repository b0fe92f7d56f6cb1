"""Idle (AutoCompact), profile debounce and Dream schedules on trio's MockClock: virtual time, no sleeps."""

from __future__ import annotations

from functools import partial

import anyio
import pytest

from aiden.errors import AidenError
from aiden.longterm.autocompact import AutoCompactor, is_idle, run_autocompact, should_autocompact
from aiden.longterm.dream import run_dream_schedule
from aiden.longterm.store import LongTermMemoryStore, run_profile_debouncer
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

pytestmark = pytest.mark.anyio


class RecordingTarget:
    """A typed fake profile target: records the (virtual) time of each rebuild."""

    def __init__(self) -> None:
        self.times: list[float] = []

    async def rebuild_profile(self, *, now: float) -> bool:
        self.times.append(anyio.current_time())
        return True


async def test_a_burst_of_writes_rebuilds_the_profile_once() -> None:
    target = RecordingTarget()
    send, receive = anyio.create_memory_object_stream[None](1)
    async with anyio.create_task_group() as tg:
        await tg.start(run_profile_debouncer, target, receive, 2.0)
        start = anyio.current_time()
        for _ in range(5):  # a burst: one write every 0.5 s
            send.send_nowait(None)
            await anyio.sleep(0.5)
        await anyio.sleep(10)
        assert [t - start for t in target.times] == [4.0]  # 2 s after the last write of the burst
        send.send_nowait(None)
        await anyio.sleep(10)
        assert [t - start for t in target.times] == [4.0, 14.5]
        send.close()
    assert len(target.times) == 2


async def test_debounce_is_bounded_by_max_delay() -> None:
    target = RecordingTarget()
    send, receive = anyio.create_memory_object_stream[None](1)
    async with anyio.create_task_group() as tg:
        await tg.start(partial(run_profile_debouncer, target, receive, 2.0, max_delay_s=4.75))
        start = anyio.current_time()
        await anyio.sleep(0.5)
        for _ in range(12):  # a write every second: never quiet for 2 s
            await send.send(None)
            await anyio.sleep(1)
        send.close()  # closing flushes the pending rebuild
    assert [t - start for t in target.times] == [5.25, 10.25, 12.5]


class GatedStore:
    """Wraps the real store so a test can wait for a rebuild to finish (threads + autojump clock)."""

    def __init__(self, store: LongTermMemoryStore) -> None:
        self.store = store
        self.done = anyio.Event()

    async def rebuild_profile(self, *, now: float) -> bool:
        changed = await self.store.rebuild_profile(now=now)
        self.done.set()
        return changed


async def test_real_store_signals_the_debouncer(layout: Layout, storage: Storage) -> None:
    send, receive = anyio.create_memory_object_stream[None](1)
    store = LongTermMemoryStore(layout, storage, dirty=send)
    for i in range(3):  # the stream holds one signal: the other two are dropped, "dirty" is already set
        await store.save(type="preference", title=f"P{i}", content=f"Preference {i}.", now=1000.0 + i)
    assert receive.statistics().current_buffer_used == 1
    gate = GatedStore(store)
    with send:
        async with anyio.create_task_group() as tg:
            await tg.start(run_profile_debouncer, gate, receive, 1.0)
            await gate.done.wait()  # no virtual deadline here: the clock autojumps while threads work
            tg.cancel_scope.cancel()
    assert store.stats().profile_rebuilds == 1
    assert store.profile_path.read_text().count("- **P") == 3


@pytest.mark.parametrize(
    ("last", "now", "minutes", "active", "idle"),
    [
        (None, 5000.0, 15.0, False, False),
        (1000.0, 1000.0 + 899, 15.0, False, False),
        (1000.0, 1000.0 + 900, 15.0, False, True),
        (1000.0, 1000.0 + 900, 15.0, True, False),
        (1000.0, 1e9, 0.0, False, False),
    ],
)
def test_is_idle(last: float | None, now: float, minutes: float, active: bool, idle: bool) -> None:
    assert is_idle(last, now, minutes, active) is idle


def test_should_autocompact_once_per_idle_period() -> None:
    assert should_autocompact(1000.0, 2000.0, 15.0, False, None)
    assert not should_autocompact(1000.0, 2000.0, 15.0, False, 1000.0)
    assert should_autocompact(1500.0, 3000.0, 15.0, False, 1000.0)


class _Counts:
    def __init__(self, appends: int, last_append_at: float | None) -> None:
        self.appends = appends
        self.last_append_at = last_append_at


class FakeSession:
    """A typed fake of the memory AutoCompactor drives: :meth:`act` is an append at ``at``."""

    def __init__(self) -> None:
        self.last: float | None = 0.0
        self.active = False
        self.maintained: list[float] = []
        self.appends = 0
        self.appended_at: float | None = None
        self.reads = 0

    def act(self, at: float) -> None:
        self.last = self.appended_at = at
        self.appends += 1

    def stats(self) -> _Counts:
        return _Counts(self.appends, self.appended_at)

    @property
    def run_active(self) -> bool:
        return self.active

    async def last_activity(self) -> float | None:
        self.reads += 1
        return self.last

    async def maintain(self, *, manual: bool = False) -> object:
        assert manual
        self.maintained.append(anyio.current_time())
        return None


async def test_autocompact_runs_once_per_idle_period_and_never_during_a_run() -> None:
    session = FakeSession()
    start = anyio.current_time()
    compactor = AutoCompactor(session, 15.0, wall_clock=lambda: anyio.current_time() - start)
    async with anyio.create_task_group() as tg:
        await tg.start(run_autocompact, compactor.check, 60.0)
        await anyio.sleep(30 * 60 + 1)
        assert [t - start for t in session.maintained] == [900.0]  # first tick at/after 15 min idle
        session.act(1000.0)  # new activity at t=1000 s, then a run stays active
        session.active = True
        await anyio.sleep(3600)
        assert len(session.maintained) == 1
        session.active = False
        await anyio.sleep(600)
        tg.cancel_scope.cancel()
    assert [t - start for t in session.maintained] == [900.0, 5460.0]
    # Reads only where the answer could change: the first tick (60 s), then none until the activity
    # seen could be 15 min old (900 s, compacting); none while compacted with no new append or while
    # the run was active; one at 5,460 s (an append since).
    assert session.reads == 3


async def test_an_idle_compacted_session_reads_nothing_until_it_appends_again() -> None:
    session = FakeSession()
    start = anyio.current_time()
    compactor = AutoCompactor(session, 15.0, wall_clock=lambda: anyio.current_time() - start)
    async with anyio.create_task_group() as tg:
        await tg.start(run_autocompact, compactor.check, 60.0)
        await anyio.sleep(15 * 60 + 1)
        assert (len(session.maintained), session.reads) == (1, 2)
        await anyio.sleep(24 * 3600)  # a day idle: 1,440 ticks
        assert (len(session.maintained), session.reads) == (1, 2)
        session.act(anyio.current_time() - start)
        await anyio.sleep(60)  # its own append is a minute old: not idle, nothing to read
        assert session.reads == 2
        await anyio.sleep(15 * 60)  # one read when that append can be 15 min old, and a compaction
        tg.cancel_scope.cancel()
    assert (len(session.maintained), session.reads) == (2, 3)


async def test_autocompact_disabled_and_failing_checks() -> None:
    session = FakeSession()
    compactor = AutoCompactor(session, 0.0, wall_clock=lambda: 1e9)
    calls: list[float] = []

    async def failing() -> None:
        calls.append(anyio.current_time())
        raise AidenError("storage hiccup")

    async with anyio.create_task_group() as tg:
        await tg.start(run_autocompact, compactor.check, 60.0)
        await tg.start(run_autocompact, failing, 100.0)
        await anyio.sleep(1050)
        tg.cancel_scope.cancel()
    assert session.maintained == [] and compactor.compactions == 0
    assert len(calls) == 10  # errors are logged, the loop goes on


async def test_dream_schedule_runs_on_interval_and_on_demand() -> None:
    runs: list[float] = []

    async def dream_once() -> None:
        runs.append(anyio.current_time())
        if len(runs) == 2:
            raise AidenError("summarizer down")

    send, receive = anyio.create_memory_object_stream[None](1)
    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        await tg.start(partial(run_dream_schedule, dream_once, 3600.0, requests=receive))
        await anyio.sleep(4000)
        send.send_nowait(None)  # /dream
        await anyio.sleep(7300)
        send.close()
    assert [t - start for t in runs] == [3600.0, 4000.0, 7600.0, 11200.0]


async def test_dream_schedule_survives_an_error_outside_aiden_s_tree(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # [Reliability] finding 1: a foreign error out of a run ended the schedule and with it the
    # runtime's task group (every actor cancelled, the caller's `async with` raising).
    runs: list[float] = []

    async def dream_once() -> None:
        runs.append(anyio.current_time())
        raise RuntimeError("a bug in a run")

    send, receive = anyio.create_memory_object_stream[None](1)
    start = anyio.current_time()
    with caplog.at_level("ERROR", logger="aiden.longterm"):
        async with anyio.create_task_group() as tg:
            await tg.start(partial(run_dream_schedule, dream_once, 3600.0, requests=receive))
            await anyio.sleep(7300)
            send.close()
    assert [t - start for t in runs] == [3600.0, 7200.0]
    failed = [r for r in caplog.records if r.name == "aiden.longterm"]
    assert [r.getMessage() for r in failed] == ["dream run failed with an unexpected error"] * 2
    assert all(r.exc_info is not None and r.exc_info[0] is RuntimeError for r in failed)

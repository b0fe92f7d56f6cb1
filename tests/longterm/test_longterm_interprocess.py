"""Long-term writes stay atomic across processes sharing a root.

A second ``flock`` holder on the same lock file stands in for another
process: ``flock`` locks belong to the open file description, so two
descriptors in one process exclude each other exactly as two processes do.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from aiden.config import Config
from aiden.errors import DreamError, LockError
from aiden.events import SessionEvent
from aiden.longterm.dream import DREAM_LOCK_NAME, Dream
from aiden.longterm.files import read_summary
from aiden.longterm.history import HistoryStore
from aiden.longterm.writer import SUMMARIES_LOCK_NAME, SessionSummaryWriter
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import SummaryRequest, SummaryResult

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    # Real time: the writers hop to worker threads while the gate waits, which an
    # autojumping MockClock would read as idleness and fire the summarizer deadline.
    return "asyncio"


NOW = 1_767_225_600.0
# A generous summarizer deadline: the gate holds the first call until the second one arrives.
CFG = Config(durability="none", lock_timeout_s=5.0, summarizer_timeout_s=60.0)


class _BothStarted:
    """Extractive summaries, released only once ``n`` calls are in flight (forces the interleaving)."""

    def __init__(self, n: int) -> None:
        self._n = n
        self._started = 0
        self._inner = ExtractiveSummarizer()
        self._all_in = anyio.Event()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self._started += 1
        if self._started >= self._n:
            self._all_in.set()
        await self._all_in.wait()
        return await self._inner.summarize(request)


def _said(seq: int, text: str) -> SessionEvent:
    return SessionEvent(type="user_input", role="user", seq=seq, content=text)


async def test_two_writers_merging_at_once_lose_neither_merge(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.session.mkdir(parents=True)
    gate = _BothStarted(2)
    # Two writers = two runtimes (two processes) on one root: each has its own anyio lock.
    first = SessionSummaryWriter(layout, Storage(), gate, CFG, use_fallback=False)
    second = SessionSummaryWriter(layout, Storage(), gate, CFG, use_fallback=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: first.merge_running_summary([_said(1, "I prefer tabs over spaces.")], now=NOW))
        tg.start_soon(
            lambda: second.merge_running_summary(
                [_said(2, "I prefer Redis over memcached for this project.")], now=NOW
            )
        )
    running = read_summary(first.running_path, kind="running")
    assert running is not None
    assert sorted(running.user_preferences) == [
        "I prefer Redis over memcached for this project.",
        "I prefer tabs over spaces.",
    ]
    assert running.through_seq == 2


async def test_a_session_write_is_refused_with_lock_error_while_another_process_holds_the_lock(
    tmp_path: Path,
) -> None:
    layout = Layout(tmp_path)
    layout.session.mkdir(parents=True)
    writer = SessionSummaryWriter(
        layout, Storage(), ExtractiveSummarizer(), Config(durability="none", lock_timeout_s=0.2)
    )
    other = SessionLock(Storage(), layout.long_term / SUMMARIES_LOCK_NAME)
    other.acquire(1.0)
    try:
        with pytest.raises(LockError, match=r"timed out after 0\.2s waiting for .*\.summaries\.lock"):
            await writer.write_session_summary([_said(1, "I prefer tabs over spaces.")], now=NOW)
        assert not (layout.long_term / "sessions").exists()  # nothing half-written while refused
    finally:
        other.close()
    write = await writer.write_session_summary([_said(1, "I prefer tabs over spaces.")], now=NOW)
    assert write.path is not None and await anyio.Path(write.path).exists()


async def test_dream_skips_while_another_process_runs_it_and_folds_the_records_once(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    storage = Storage()
    history = HistoryStore(layout, storage)
    history.append("Constraints:\n- Always use yarn, never npm.", session_key="cli:direct", now=NOW)
    dream = Dream(layout, storage, history)
    other = SessionLock(Storage(), layout.long_term / DREAM_LOCK_NAME)
    assert other.try_acquire()
    try:
        skipped = await dream.run(now=NOW)
        assert (skipped.ran, skipped.records, skipped.commit_id) == (False, 0, None)
        assert skipped.message == f"another process is running Dream ({DREAM_LOCK_NAME} is held)"
        assert history.dream_cursor() == 0
        with pytest.raises(DreamError, match="restore refused"):
            await dream.restore(1, now=NOW)
    finally:
        other.close()
    ran = await dream.run(now=NOW)
    assert (ran.ran, ran.records, ran.cursor) == (True, 1, 1)
    assert history.dream_cursor() == 1
    assert not other.try_acquire() or other.release() is None  # free again after the run
    again = await dream.run(now=NOW)
    assert (again.ran, again.records) == (False, 0)  # nothing new: the record was folded once

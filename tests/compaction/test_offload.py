"""A pass's CPU-heavy work runs in the helper process, never in this one ([Reliability] finding 2).

Summarizing and the must-keep scan of a backlog slice, and the survey (snapshot,
estimates, cut) of a backlog's whole hot window, are ~0.1-0.3 s of pure Python: on the loop they stall every task, in a worker thread they hold the GIL
and slow every hand-off of the loop and the writer's thread. These tests pin,
structurally (no timing): a large request is computed by the helper process
(this process's copy of the function is made to fail and the answer still
arrives), the answer is the one this process would give, and every way the
helper can fail falls back to this process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

import aiden
import aiden.storage.jsonl as jsonl
import aiden.summarizers.mustkeep.check as mustkeep_job
from aiden import offload
from aiden.actors import planning
from aiden.actors.planning import Planner
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.policy.cutpoints import CompactionPlan
from aiden.policy.tokens import CL100K
from aiden.storage.chunks import ChunkEntry, ChunkIndex, chunk_id_for
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.session import FileSessionStore
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import SummaryRequest
from aiden.testing import MemorySessionStore
from aiden.testing.storekit import fill

pytestmark = pytest.mark.anyio


def _events(n: int) -> tuple[SessionEvent, ...]:
    out: list[SessionEvent] = []
    for i in range(n):
        if i % 2 == 0:
            content = f"Continue with step {i}. Ticket PROJ-{i % 7} must stay under {i % 5} MB."
            out.append(SessionEvent(type="user_input", seq=i + 1, content=content))
        else:
            content = f"I decided to run step {i} because billing/export_{i % 3}.py needs it."
            out.append(SessionEvent(type="assistant_output", seq=i + 1, content=content))
    return tuple(out)


BIG = SummaryRequest(purpose="history", events=_events(offload.INLINE_EVENTS + 50), max_tokens=800)


@pytest.fixture
def child(monkeypatch: pytest.MonkeyPatch) -> Iterator[offload._Child]:
    """A helper process of this test's own (the module's one is shared by the whole run)."""
    fresh = offload._Child()
    monkeypatch.setattr(offload, "_CHILD", fresh)
    try:
        yield fresh
    finally:
        fresh.close()


def _count(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(owner, name)

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


class _CountingDecoder:
    """Stands in for jsonl's seq-only decoder and counts the lines it reads."""

    def __init__(self, real: msgspec.json.Decoder[object]) -> None:
        self.real = real
        self.lines = 0

    def decode(self, line: bytes) -> object:
        self.lines += 1
        return self.real.decode(line)


def _fail_here(monkeypatch: pytest.MonkeyPatch) -> None:
    def here(*args: object, **kwargs: object) -> object:
        raise AssertionError("computed in this process")

    monkeypatch.setattr(ExtractiveSummarizer, "summarize_sync", here)
    monkeypatch.setattr(ExtractiveSummarizer, "_finish", here)


async def test_a_large_request_is_summarized_by_the_helper_process_with_the_same_result(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = ExtractiveSummarizer().summarize_sync(BIG)
    _fail_here(monkeypatch)
    assert await ExtractiveSummarizer().summarize(BIG) == expected
    assert await ExtractiveSummarizer().summarize(BIG) == expected
    assert child.started == 1  # one helper, reused


async def test_the_must_keep_step_of_a_large_chunk_runs_in_the_helper_process(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = mustkeep_job.MustKeepJob("Goal: export.", _events(300), 40)
    expected = mustkeep_job.apply_job(job)
    assert "Must keep" in expected

    def here(job: mustkeep_job.MustKeepJob) -> str:
        raise AssertionError("computed in this process")

    monkeypatch.setattr(mustkeep_job, "apply_job", here)
    raw = await offload.run_job("must_keep", msgspec.msgpack.encode(job))
    assert msgspec.msgpack.decode(raw, type=str) == expected


async def test_few_events_of_long_text_are_summarized_by_the_helper_process(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Dream's session summary: a handful of history records, each a chunk's whole summary.
    record = " ".join(event.content for event in _events(40))
    events = tuple(
        SessionEvent(type="system_event", role="history", content=f"Record {i}. {record}", seq=i + 1)
        for i in range(4)
    )
    request = SummaryRequest(purpose="session_summary", events=events, max_tokens=1200)
    expected = ExtractiveSummarizer().summarize_sync(request)
    _fail_here(monkeypatch)
    assert await ExtractiveSummarizer().summarize(request) == expected
    assert child.started == 1


async def test_the_must_keep_step_of_a_few_events_of_long_tool_output_runs_in_the_helper_process(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = "\n".join(f"FAILED tests/test_export.py::test_{i} - AssertionError: ticket PROJ-{i} over 5 MB" for i in range(150))
    events = (
        SessionEvent(type="user_input", seq=1, content="Keep every export under 5 MB."),
        SessionEvent(type="tool_result", seq=2, content=log, tool_call_id="c1"),
    )
    expected = mustkeep_job.apply_job(mustkeep_job.MustKeepJob("Goal: export.", events, 40))

    def here(job: mustkeep_job.MustKeepJob) -> str:
        raise AssertionError("computed in this process")

    monkeypatch.setattr(mustkeep_job, "apply_job", here)
    assert await mustkeep_job.with_must_keep("Goal: export.", events, 40) == expected
    assert child.started == 1


async def test_a_small_request_stays_in_this_process(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = SummaryRequest(purpose="history", events=_events(50), max_tokens=800)
    expected = ExtractiveSummarizer().summarize_sync(small)
    assert await ExtractiveSummarizer().summarize(small) == expected
    assert child.started == 0


async def test_without_an_interpreter_to_start_the_request_is_summarized_here(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offload.sys, "executable", "")
    with pytest.raises(offload.OffloadUnavailable):
        await offload.run_job("extractive", b"")
    assert await ExtractiveSummarizer().summarize(BIG) == ExtractiveSummarizer().summarize_sync(BIG)
    assert child.started == 0


async def test_a_host_binary_that_is_no_python_is_never_started(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offload.sys, "executable", "/usr/bin/uwsgi")  # an embedded host's own binary
    with pytest.raises(offload.OffloadUnavailable, match="no Python interpreter"):
        await offload.run_job("extractive", b"")
    assert child.started == 0


async def test_a_helper_that_never_answers_is_not_started_again_at_once(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "python3-broken"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setattr(offload.sys, "executable", str(broken))
    with pytest.raises(offload.OffloadUnavailable, match="helper process lost"):
        await offload.run_job("extractive", b"")
    with pytest.raises(offload.OffloadUnavailable, match="could not be started recently"):
        await offload.run_job("extractive", b"")
    assert child.started == 1
    # The request itself is still summarized, here.
    assert await ExtractiveSummarizer().summarize(BIG) == ExtractiveSummarizer().summarize_sync(BIG)


async def test_a_helper_that_died_is_replaced_by_a_new_one(child: offload._Child) -> None:
    expected = ExtractiveSummarizer().summarize_sync(BIG)
    assert await ExtractiveSummarizer().summarize(BIG) == expected
    assert child._proc is not None
    child._proc.kill()
    child._proc.wait()
    # The job that finds it dead falls back to this process; the next one starts a new helper.
    assert await ExtractiveSummarizer().summarize(BIG) == expected
    assert await ExtractiveSummarizer().summarize(BIG) == expected
    assert child.started == 2


async def test_a_job_that_fails_in_the_helper_is_reported_and_the_helper_kept(child: offload._Child) -> None:
    with pytest.raises(
        offload.OffloadUnavailable, match="must_keep failed in the helper process: ValidationError"
    ):
        await offload.run_job("must_keep", b"not msgpack of a job")
    assert await ExtractiveSummarizer().summarize(BIG) == ExtractiveSummarizer().summarize_sync(BIG)
    assert child.started == 1


def _wait_until_sent(child: offload._Child) -> None:
    while child._running is None:
        time.sleep(0.001)


async def test_a_job_beyond_the_one_waiting_is_refused_at_once_and_summarized_here(
    child: offload._Child,
) -> None:
    huge = msgspec.msgpack.encode(mustkeep_job.MustKeepJob("Goal.", _events(20_000), 40))
    async with anyio.create_task_group() as tg:
        tg.start_soon(offload.run_job, "must_keep", huge)
        await anyio.to_thread.run_sync(_wait_until_sent, child)
        tg.start_soon(offload.run_job, "must_keep", huge)  # waits behind it
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(offload.OffloadUnavailable, match="the helper process is busy"):
            await offload.run_job("extractive", b"")
        # A summary refused by the helper is made here, the same.
        assert await ExtractiveSummarizer().summarize(BIG) == ExtractiveSummarizer().summarize_sync(BIG)
        tg.cancel_scope.cancel()
    assert child.started == 1


async def test_a_caller_that_gives_up_ends_the_helper_busy_with_its_job(child: offload._Child) -> None:
    huge = msgspec.msgpack.encode(mustkeep_job.MustKeepJob("Goal.", _events(20_000), 40))
    async with anyio.create_task_group() as tg:
        tg.start_soon(offload.run_job, "must_keep", huge)
        await anyio.to_thread.run_sync(_wait_until_sent, child)
        busy = child._running
        tg.cancel_scope.cancel()
    assert busy is not None
    assert busy.wait() != 0  # killed, not finished
    assert await ExtractiveSummarizer().summarize(BIG) == ExtractiveSummarizer().summarize_sync(BIG)
    assert child.started == 2


async def test_an_unknown_job_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown offload job"):
        await offload.run_job("exec", b"print(1)")


async def test_a_large_hot_window_is_surveyed_by_the_helper_process(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = Config(durability="none", max_pass_events=100)
    store = FileSessionStore(Layout(tmp_path), Storage(), config)
    try:
        fill(store, 300)
        planner = Planner(store, config, CL100K)
        here = await planner.survey(2_000, None)
        expected = await here.plan()
        assert here.event_count == 300
        assert isinstance(expected, CompactionPlan) and expected.backlog_left

        def not_here() -> object:
            raise AssertionError("surveyed in this process")

        monkeypatch.setattr(planning, "OFFLOAD_BYTES", 1)
        monkeypatch.setattr(store, "snapshot", not_here)
        monkeypatch.setattr(planning, "plan_compaction", not_here)
        there = await planner.survey(2_000, None)
        assert there.event_count == 300
        assert there.index == store.load_index()
        # The rest of the hot window is not sent back: nothing after planning reads it.
        assert await there.plan() == msgspec.structs.replace(expected, retained=())
        assert child.started == 1
    finally:
        store.close()


async def test_a_backlog_pass_reads_only_its_slice_in_this_process(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The structural form of "append max during a pass does not grow with the backlog":
    # what this process reads per pass is the slice compacted, not the hot window.
    quiet = Config(durability="none", count_compress_after_events=10**6, context_window=10**9)
    async with aiden.open_memory(tmp_path, config=quiet) as memory:
        await memory.append_many(list(_events(1_200)))
    monkeypatch.setattr(planning, "OFFLOAD_BYTES", 1)
    snapshots = _count(monkeypatch, FileSessionStore, "snapshot")
    seqs = _CountingDecoder(jsonl._seq_decoder)
    monkeypatch.setattr(jsonl, "_seq_decoder", seqs)
    config = Config(durability="none", max_pass_events=200, count_compress_after_events=10**6)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        outcome = await memory.maintain(manual=True)
        chunk = (await memory.chunk_index()).chunks[-1]
    assert outcome.compacted and outcome.backlog_left
    assert (chunk.first_seq, chunk.last_seq, outcome.events_compacted) == (
        2,
        201,
        200,
    )  # seq 1: the root input
    assert snapshots == []  # the hot window was surveyed by the helper
    # The trim read the lines up to the chunk's last, the first one above it, and the last line.
    assert seqs.lines == chunk.last_seq + 2


async def test_a_helper_survey_of_another_index_is_made_again_here(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The helper read the files at one moment and this process the index at another: if a
    # commit came between (only possible without the compaction lock), its cut is not used.
    config = Config(durability="none", max_pass_events=100)
    store = FileSessionStore(Layout(tmp_path), Storage(), config)
    try:
        fill(store, 300)
        moved = ChunkIndex(
            chunks=[
                ChunkEntry(
                    chunk_id=chunk_id_for(1, 5), first_seq=1, last_seq=5, count=5, sha256="", summary="s"
                )
            ]
        )
        monkeypatch.setattr(planning, "OFFLOAD_BYTES", 1)
        monkeypatch.setattr(store, "load_index", lambda: moved)
        snapshots = _count(monkeypatch, store, "snapshot")
        survey = await Planner(store, config, CL100K).survey(2_000, None)
        assert snapshots == [1]  # surveyed again here, from this process's own snapshot
        assert survey.event_count == 295  # against the index it read: seqs 1-5 are in the chunk
        assert child.started == 1
    finally:
        store.close()


class _OtherStorage(Storage):
    """A Storage subclass, as a fault-injecting one is: its store offers the helper no root."""


async def test_a_store_that_offers_no_root_is_surveyed_here(
    child: offload._Child, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The planner asks the store (SessionStore.survey_root), whatever the window's size.
    monkeypatch.setattr(planning, "OFFLOAD_BYTES", 1)
    config = Config(durability="none", max_pass_events=100)
    memory = MemorySessionStore(config)
    files = FileSessionStore(Layout(tmp_path), _OtherStorage(), config)
    try:
        for store in (memory, files):
            fill(store, 300)
            snapshots = _count(monkeypatch, store, "snapshot")
            survey = await Planner(store, config, CL100K).survey(2_000, None)
            assert (survey.event_count, snapshots) == (300, [1])
            assert isinstance(await survey.plan(), CompactionPlan)
        assert child.started == 0
    finally:
        memory.close()
        files.close()

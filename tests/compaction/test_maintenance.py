"""Two-phase compaction through the maintenance scheduler and summarizer actors."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import msgspec
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.storage import chunks as cs
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.summarizers.protocol import SummaryResult
from aiden.testing import FailingSummarizer, HangingSummarizer, ScriptedSummarizer, SlowSummarizer
from tests.helpers import all_events, assert_exactly_once

pytestmark = pytest.mark.anyio

SMALL = Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=12,
    summary_max_chunks=3,
    summarizer_timeout_s=5,
)
# With a summarizer that never answers, a close waits out close_timeout_s (for the pass, then for the
# session summary): these tests prove what the close leaves behind, not how long it waited.
HUNG = msgspec.structs.replace(SMALL, close_timeout_s=0.3)


def turn(i: int) -> list[SessionEvent]:
    return [
        SessionEvent(type="user_input", role="user", content=f"request {i}: please fix module m{i}"),
        SessionEvent(type="tool_call", tool_name="read", tool_call_id=f"c{i}", tool_args='{"p": 1}'),
        SessionEvent(type="tool_result", tool_call_id=f"c{i}", content=f"file body {i} " * 20),
        SessionEvent(type="assistant_output", role="assistant", content=f"fixed m{i}"),
    ]


async def fill(memory: aiden.Memory, turns: int, start: int = 0) -> set[int]:
    acked: set[int] = set()
    for i in range(start, start + turns):
        for ev in await memory.append_many(turn(i)):
            acked.add(ev.seq)
    return acked


async def test_compaction_writes_chunk_index_summary_and_trims_hot_window(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        acked = await fill(memory, 8)
        outcome = await memory.maintain()
        hot = await memory.hot_window()
        summary = await memory.summary_md()
    assert outcome.compacted is True
    assert outcome.chunk_id is not None
    assert_exactly_once(tmp_path, acked)
    assert hot[0].type == "user_input" and hot[0].seq == 1  # the root input stays pinned first
    layout = Layout(tmp_path)
    index = cs.load_index(layout)
    assert index is not None and [c.chunk_id for c in index.chunks] == [outcome.chunk_id]
    assert (index.chunks[0].first_seq, index.chunks[0].kept_seqs) == (
        2,
        [],
    )  # the pinned root lies before the range
    assert summary.startswith("# Session History (compressed chunks)\n")
    assert "## Rolling Summary" in summary and "## Recent Chunks" in summary
    assert f"- **{outcome.chunk_id}**" in summary


async def test_appends_during_slow_compactions_are_kept_exactly_once(tmp_path: Path) -> None:
    acked: set[int] = set()
    slow = SlowSummarizer(0.05)
    async with aiden.open_memory(tmp_path, config=SMALL, summarizer=slow) as memory:
        await fill(memory, 4)
        done = anyio.Event()

        async def appender(n: int) -> None:
            i = 0
            while not done.is_set():
                ev = await memory.append(SessionEvent(type="user_input", content=f"a{n}-{i}"))
                acked.add(ev.seq)
                i += 1
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            for n in range(64):
                tg.start_soon(appender, n)
            compactions = 0
            during: list[int] = []
            # Three passes: the first (under max_pass_events) and two capped ones with a backlog
            # left, each with thousands of appends landing in it, its commit window included. Six
            # passes added only more capped ones, each slower than the last: the spinning
            # appenders outrun the 1,000-event cap (~5,000 appends in the first pass, ~100,000
            # in six), so the hot window only grows.
            for _ in range(3):
                before = len(acked)
                outcome = await memory.maintain(manual=True)
                compactions += outcome.compacted
                during.append(len(acked) - before)
            done.set()
    seqs = assert_exactly_once(tmp_path, acked)
    assert compactions == 3
    assert len(acked) > 64
    assert all(n > 0 for n in during), during  # appends landed during every pass
    assert sorted(seqs) == list(range(1, max(seqs) + 1))


async def test_burst_of_100_requests_runs_at_most_two_passes(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL, summarizer=SlowSummarizer(0.05)) as memory:
        await fill(memory, 6)
        for _ in range(100):
            memory.request_maintenance()
        await memory.maintain()  # queued behind the burst: returns after the pending pass
        stats = memory.stats()
    # The burst gives one running + one pending pass; maintain() rides on a third at most.
    assert stats.passes <= 3
    assert stats.coalesced_requests >= 98


async def test_burst_coalesces_into_two_passes_exactly(tmp_path: Path) -> None:
    slow = SlowSummarizer(0.05)
    async with aiden.open_memory(tmp_path, config=SMALL, summarizer=slow) as memory:
        await fill(memory, 6)
        for _ in range(100):
            memory.request_maintenance()
        await slow.wait_started(1)
        await slow.wait_started(1)  # pass 1 is running, pass 2 pending
        # maintain() rides on the pending pass: it returns when pass 2 is done.
        await memory.maintain()
        stats = memory.stats()
    assert stats.passes == 2
    assert stats.coalesced_requests == 99


def _state(root: Path) -> tuple[bytes, bytes, bytes]:
    layout = Layout(root)
    return read_bytes(layout.events), read_bytes(layout.summary), read_bytes(layout.index)


@pytest.mark.parametrize(
    "summarizer",
    [
        FailingSummarizer(),
        ScriptedSummarizer([SummaryResult(text="   ")] * 4),
        ScriptedSummarizer([SummaryResult(text="x" * 100_000)] * 4),
        ScriptedSummarizer([RuntimeError("provider exploded")] * 4),
    ],
    ids=["raises", "empty", "huge", "foreign-exception"],
)
async def test_summarizer_failure_changes_nothing(tmp_path: Path, summarizer: aiden.Summarizer) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        acked = await fill(memory, 6)
        await memory.maintain()  # one good compaction first, so summary.md exists
    before = _state(tmp_path)
    async with aiden.open_memory(tmp_path, config=SMALL, summarizer=summarizer) as memory:
        acked |= await fill(memory, 6, start=6)
        before = _state(tmp_path)
        outcome = await memory.maintain(manual=True)
        after = _state(tmp_path)
        stats = memory.stats()
        ev = await memory.append(SessionEvent(type="user_input", content="lock is free"))
    assert outcome.compacted is False
    assert outcome.reason == "summarizer_failed"
    assert before == after
    assert stats.summarizer_failures >= 1
    assert ev.seq == max(acked) + 1
    assert_exactly_once(tmp_path, acked | {ev.seq})


async def test_hanging_summarizer_hits_deadline_and_releases_lock(tmp_path: Path) -> None:
    # HUNG: the close (0.3 s, not 5 s) gives up on the hanging session summary before the
    # summarizer's stretched 0.8 s deadline; the pass's own deadline is what this test proves.
    config = msgspec.structs.replace(HUNG, summarizer_timeout_s=0.2)
    hanging = HangingSummarizer()
    async with aiden.open_memory(tmp_path, config=config, summarizer=hanging) as memory:
        acked = await fill(memory, 6)
        before = _state(tmp_path)
        outcome = await memory.maintain(manual=True)
        after = _state(tmp_path)
    assert outcome.reason == "summarizer_failed"
    assert "deadline" in outcome.note
    assert before == after
    lock = SessionLock(Storage(), Layout(tmp_path).memory / "compaction.lock")
    lock.acquire(0.5)
    lock.close()
    assert_exactly_once(tmp_path, acked)


async def test_cancelled_pass_changes_nothing(tmp_path: Path) -> None:
    hanging = HangingSummarizer()
    async with aiden.open_memory(tmp_path, config=HUNG, summarizer=hanging) as memory:
        acked = await fill(memory, 6)
        before = _state(tmp_path)
        memory.request_maintenance(manual=True)
        await hanging.wait_started(1)
    # Closing the memory cancelled the in-flight pass.
    assert _state(tmp_path) == before
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        assert memory.recovery.changed is False
        # The reopened memory finds the backlog at open and compacts it by itself;
        # maintain() returns once that pass (or its own) is done.
        await memory.maintain(manual=True)
        index = await memory.chunk_index()
    assert len(index.chunks) == 1
    assert_exactly_once(tmp_path, acked)


async def test_backlog_found_at_open_drains_without_a_call(tmp_path: Path) -> None:
    # [Reliability] finding 2: a caller that only appends must still see a reopened backlog drain.
    async with aiden.open_memory(tmp_path, config=HUNG, summarizer=HangingSummarizer()) as memory:
        acked = await fill(memory, 6)
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        with anyio.fail_after(10):
            # No public event marks a background pass done: poll the published counters.
            while memory.stats().compactions == 0:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        stats = memory.stats()
        index = await memory.chunk_index()
    assert (stats.passes, stats.compactions, len(index.chunks)) == (1, 1, 1)
    assert_exactly_once(tmp_path, acked)


async def test_breadcrumb_fallback_marks_chunk_degraded(tmp_path: Path) -> None:
    config = aiden.Config(
        **{**{f: getattr(SMALL, f) for f in SMALL.__struct_fields__}, "failure_fallback": "breadcrumb"}
    )
    async with aiden.open_memory(tmp_path, config=config, summarizer=FailingSummarizer()) as memory:
        acked = await fill(memory, 6)
        outcome = await memory.maintain(manual=True)
        summary = await memory.summary_md()
        stats = memory.stats()
    assert outcome.compacted is True and outcome.degraded is True
    assert stats.fallbacks == 1
    assert "scripted failure" not in summary  # error text never becomes a summary
    assert "raw breadcrumb" in summary
    index = cs.load_index(Layout(tmp_path))
    assert index is not None and index.chunks[0].degraded is True
    assert_exactly_once(tmp_path, acked)


async def test_rolling_summary_and_archive_after_overflow(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        acked: set[int] = set()
        for k in range(6):
            acked |= await fill(memory, 4, start=k * 4)
            await memory.maintain(manual=True)
        summary = await memory.summary_md()
        index = await memory.chunk_index()
    layout = Layout(tmp_path)
    assert index.total_chunks == 6
    assert index.rolled_count == 3
    recent = summary.split("## Recent Chunks", 1)[1]
    assert recent.count("- **") == 3
    assert index.rolling_summary and index.rolling_summary in summary
    archive = layout.summary_archive.read_text()
    assert archive.count("- **chunk_") == 3
    assert_exactly_once(tmp_path, acked)


class CrashAt(Storage):
    """Fails (as a crash would stop) at one named checkpoint."""

    def __init__(self, point: str) -> None:
        super().__init__()
        self.point = point
        self.hit = False

    def checkpoint(self, name: str) -> None:
        if name == self.point and not self.hit:
            self.hit = True
            raise aiden.StorageError(f"simulated crash at {name}")


@pytest.mark.parametrize(
    "point",
    [
        "chunk.before_rename",
        "chunk.before_dir_fsync",
        "compaction.after_chunk",
        "compaction.before_index",
        "index.before_rename",
        "index.before_dir_fsync",
        "compaction.after_index",
        "events.before_rename",
        "compaction.after_replace",
        "summary.before_rename",
        "compaction.after_summary",
    ],
)
async def test_crash_at_each_commit_step_recovers(tmp_path: Path, point: str) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        acked = await fill(memory, 6)
    storage = CrashAt(point)
    # No count trigger at open: the crash must hit this test's own pass, not the backlog check's.
    manual_only = msgspec.structs.replace(SMALL, count_compress_after_events=10**6)
    async with aiden.open_memory(tmp_path, config=manual_only, storage=storage) as memory:
        with pytest.raises(aiden.StorageError, match="simulated crash"):
            await memory.maintain(manual=True)
    assert storage.hit
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        first = memory.recovery
        acked |= await fill(memory, 1, start=100)
    assert first.unrecoverable == []
    assert_exactly_once(tmp_path, acked)
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        assert memory.recovery.changed is False
    chunked, hot = all_events(tmp_path)
    assert sorted(e.seq for e in chunked + hot) == sorted(acked)


async def test_degraded_chunk_is_resummarized_on_a_later_pass(tmp_path: Path) -> None:
    config = aiden.Config(
        **{**{f: getattr(SMALL, f) for f in SMALL.__struct_fields__}, "failure_fallback": "breadcrumb"}
    )
    async with aiden.open_memory(tmp_path, config=config, summarizer=FailingSummarizer()) as memory:
        acked = await fill(memory, 6)
        assert (await memory.maintain(manual=True)).degraded is True
    async with aiden.open_memory(tmp_path, config=config) as memory:
        outcome = await memory.maintain()  # quiet pass: nothing to compact, repairs instead
        summary = await memory.summary_md()
        index = await memory.chunk_index()
    assert outcome.compacted is False
    assert index.chunks[0].degraded is False
    assert "raw breadcrumb" not in summary
    assert "(degraded)" not in summary
    assert_exactly_once(tmp_path, acked)


async def test_a_summary_from_the_summarizers_own_fallback_is_degraded_until_the_model_answers(
    tmp_path: Path,
) -> None:
    # The LLM summarizer answers an outage with its extractive fallback, flagged degraded.
    fallback = SummaryResult(text="fallback summary", degraded=True)
    down = ScriptedSummarizer([fallback] * 20)
    async with aiden.open_memory(tmp_path, config=SMALL, summarizer=down) as memory:
        acked = await fill(memory, 6)
        assert (await memory.maintain(manual=True)).degraded is True
        assert [c.degraded for c in (await memory.chunk_index()).chunks] == [True]
        assert (memory.stats().fallbacks, memory.stats().degraded_chunks) == (1, 1)
    # A repair the fallback answers again changes nothing.
    async with aiden.open_memory(tmp_path, config=SMALL, summarizer=down) as memory:
        asked = len(down.requests)
        assert (await memory.maintain()).compacted is False
        index = await memory.chunk_index()
        assert [r.purpose for r in down.requests[asked:]] == ["history"]
    assert [c.degraded for c in index.chunks] == [True]
    # The model back: the next quiet pass re-summarizes the chunk.
    async with aiden.open_memory(tmp_path, config=SMALL, summarizer=ScriptedSummarizer()) as memory:
        await memory.maintain()
        index = await memory.chunk_index()
    [chunk] = index.chunks
    assert chunk.degraded is False
    assert chunk.summary.startswith(f"summary of seq {chunk.first_seq}-{chunk.last_seq} ")
    assert_exactly_once(tmp_path, acked)


async def test_reported_prompt_tokens_calibrate_the_estimator(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        await fill(memory, 2)
        built = await memory.build_messages()
        await memory.record_usage(prompt_tokens=built.estimated_tokens * 2, run_ended=True)
        await memory.flush()
        await memory.maintain()  # a round trip through the scheduler's inbox
        stats = memory.stats()
    assert built.estimated_tokens > 0
    assert stats.token_calibration == 2.0
    assert stats.last_prompt_tokens == built.estimated_tokens * 2


async def test_soft_trigger_is_batched_for_the_prompt_cache_but_hard_trigger_is_not(tmp_path: Path) -> None:
    fields = {f: getattr(SMALL, f) for f in SMALL.__struct_fields__}
    config = aiden.Config(
        **{**fields, "compact_batch_turns": 3, "reserve_tokens": 100, "compress_at_percent": 50}
    )
    async with aiden.open_memory(tmp_path, config=config, context_window=1000) as memory:
        await fill(memory, 6)
        # 600 tokens: the percent trigger (>= 500) but not the reserve one (>= 900).
        await memory.record_usage(prompt_tokens=600, cached_tokens=450, run_ended=True)
        soft = await memory.maintain()
        await memory.record_usage(prompt_tokens=950, cached_tokens=0, run_ended=True)
        hard = await memory.maintain()
        stats = memory.stats()
    assert soft.reason == "deferred_for_cache" and soft.compacted is False
    assert hard.compacted is True and hard.reason == "reserve"
    assert stats.deferred_for_cache == 1
    assert stats.cached_share_before_last_compaction == 450 / 1550
    assert stats.cached_share_since_last_compaction is None


async def test_count_trigger_keeps_working_without_provider_usage(tmp_path: Path) -> None:
    # No record_usage at all: after the first compaction the retained-window
    # estimate must not silence the count path (it would never grow again).
    async with aiden.open_memory(tmp_path, config=SMALL) as memory:
        acked = await fill(memory, 6)
        first = await memory.maintain()
        acked |= await fill(memory, 6, start=6)
        second = await memory.maintain()
        stats = memory.stats()
    assert (first.compacted, first.reason) == (True, "event_count")
    assert (second.compacted, second.reason) == (True, "event_count")
    assert stats.compactions == 2
    assert_exactly_once(tmp_path, acked)


async def test_a_backlog_drains_in_bounded_passes_without_a_call(tmp_path: Path) -> None:
    # [Reliability] finding 2: each pass takes at most max_pass_events, the next follows by itself.
    async with aiden.open_memory(tmp_path, config=HUNG, summarizer=HangingSummarizer()) as memory:
        acked = await fill(memory, 10)
    bounded = msgspec.structs.replace(SMALL, max_pass_events=5)
    async with aiden.open_memory(tmp_path, config=bounded) as memory:
        with anyio.fail_after(20):
            # No public event marks a background pass done: poll the hot window down to the
            # count trigger (count_compress_after_events), where the chain of passes stops.
            while len(await memory.hot_window()) > SMALL.count_compress_after_events:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        index = await memory.chunk_index()
        manual = await memory.maintain(manual=True)
    counts = [c.count for c in index.chunks]
    assert len(counts) >= 4 and max(counts) <= 5
    assert [c.first_seq for c in index.chunks] == sorted(c.first_seq for c in index.chunks)
    # A manual pass down to hot_window_events (6) is itself capped: it says more is due.
    assert (manual.compacted, manual.backlog_left, manual.events_compacted) == (True, True, 4)
    assert_exactly_once(tmp_path, acked)

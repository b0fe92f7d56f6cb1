"""LLM faults not covered by tests/compaction/test_maintenance.py: truncated output (through the
real LiteLLM summarizer against a local fake server), a slow summarizer while hundreds of events
are appended, a hang past the deadline under load, cancellation by rotation, and malformed results.

Whatever the summarizer does: events are never lost or duplicated, summary.md only changes with a
committed chunk, and the compaction lock is free afterwards.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import aiden
from aiden import Config
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.summarizers.protocol import SummaryRequest, SummaryResult
from aiden.testing import FakeLLMServer, HangingSummarizer, ScriptedSummarizer, SlowSummarizer
from tests.reliability.harness import check, report, tag_of, tagged_event

pytestmark = pytest.mark.anyio

CONFIG = Config(
    durability="fsync",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summary_max_chunks=3,
    summarizer_timeout_s=10,
    summarizer_retries=0,
)


def _with(**changes: Any) -> Config:
    return Config(**{**{f: getattr(CONFIG, f) for f in CONFIG.__struct_fields__}, **changes})


class _Log:
    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        self.acked: dict[str, int] = {}
        self.attempted: set[str] = set()
        self.latencies: list[float] = []

    async def add(self, memory: aiden.Memory, prefix: str = "e") -> None:
        tag = f"{prefix}:{self.n}"
        event = tagged_event(tag, self.n, self.rng)
        self.n += 1
        self.attempted.add(tag)
        t0 = time.monotonic()
        stored = await memory.append(event)
        self.latencies.append(time.monotonic() - t0)
        self.acked[tag] = stored.seq


def _files(root: Path) -> tuple[bytes, bytes, bytes]:
    lay = Layout(root)
    return read_bytes(lay.summary), read_bytes(lay.index), read_bytes(lay.summary_archive)


async def _lock_is_free(root: Path) -> bool:
    lock = SessionLock(Storage(), Layout(root).memory / "compaction.lock")
    try:
        await anyio.to_thread.run_sync(lock.acquire, 2.0)
        return True
    except aiden.LockError:
        return False
    finally:
        lock.close()


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


# --------------------------------------------------------------------------
# truncated output through LiteLLMSummarizer + FakeLLMServer
# --------------------------------------------------------------------------


async def _compact_with_llm_reply(root: Path, reply: dict[str, Any]) -> tuple[aiden.CompactionOutcome, bool, Any]:
    log = _Log("llm")
    with FakeLLMServer(script=[reply] * 4) as server:
        # The per-request mode raises an unusable answer (the default one-call mode falls back to
        # the extractive summarizer: tests/summarizers/test_llm_malformed.py).
        summarizer = aiden.LiteLLMSummarizer(
            "openai/test-model",
            config=CONFIG,
            api_base=server.base_url,
            api_key="sk-test",
            one_call_per_compaction=False,
        )
        async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
            for _ in range(16):
                await log.add(memory)
            await memory.maintain(manual=True)  # a good chunk first: summary.md exists
            for _ in range(12):
                await log.add(memory)
        before = (*_files(root), read_bytes(Layout(root).events))
        async with aiden.open_memory(root, config=CONFIG, summarizer=summarizer) as memory:
            outcome = await memory.maintain(manual=True)
        after = (*_files(root), read_bytes(Layout(root).events))
    verdict = check(root, log.acked, log.attempted)
    assert verdict.ok, verdict.explain()
    return outcome, before == after, server.requests


async def test_truncated_json_output_changes_nothing(tmp_path: Path) -> None:
    reply = {"content": '{"text": "The user asked to fix the parser and we decided', "finish_reason": "length"}
    outcome, unchanged, requests = await _compact_with_llm_reply(tmp_path, reply)
    report("truncated JSON output", requests=len(requests), compacted=outcome.compacted, unchanged=unchanged)
    assert len(requests) >= 1
    assert outcome.compacted is False and outcome.reason == "summarizer_failed"
    assert unchanged


async def test_truncated_prose_output_changes_nothing(tmp_path: Path) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): LiteLLMSummarizer._result_from ignores
    finish_reason='length': prose cut off at the token limit is committed as the chunk summary
    (truncated output must leave events and summary.md unchanged)
    """
    reply = {"content": "The user asked to fix the parser in module m3 and we decided to", "finish_reason": "length"}
    outcome, unchanged, requests = await _compact_with_llm_reply(tmp_path, reply)
    report("truncated prose output (finish_reason=length)", requests=len(requests), compacted=outcome.compacted)
    assert outcome.compacted is False
    assert unchanged


# --------------------------------------------------------------------------
# slow / hanging / cancelled while the session keeps growing
# --------------------------------------------------------------------------


async def test_slow_summarizer_while_hundreds_of_events_are_appended(tmp_path: Path) -> None:
    delay = 1.0
    slow = SlowSummarizer(delay)
    log = _Log("slow")
    result: list[aiden.CompactionOutcome] = []
    acked_while_running: set[str] = set()
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=slow) as memory:
        for _ in range(24):
            await log.add(memory, "pre")
        log.latencies.clear()
        async with anyio.create_task_group() as tg:

            async def run_pass() -> None:
                result.append(await memory.maintain(manual=True))

            tg.start_soon(run_pass)
            await slow.wait_started(1)

            async def appender() -> None:
                for _ in range(40):
                    await log.add(memory, "dur")
                    if not result:
                        acked_while_running.add(f"dur:{log.n - 1}")

            async with anyio.create_task_group() as inner:
                for _ in range(8):
                    inner.start_soon(appender)
        outcome = result[0]
        index = await memory.chunk_index()
        hot = await memory.hot_window()
        summary = await memory.summary_md()
    verdict = check(tmp_path, log.acked, log.attempted)
    hot_tags = {tag_of(e) for e in hot}
    during = {t for t in log.acked if t.startswith("dur:")}
    report(
        "slow summarizer while appending",
        summarizer_delay_s=delay,
        appended_after_snapshot=len(during),
        acked_while_pass_in_flight=len(acked_while_running),
        append_p99_s=round(_p99(log.latencies), 4),
        compacted=outcome.compacted,
        **verdict.figures(),
    )
    assert len(during) == 320 and len(acked_while_running) >= 100
    assert _p99(log.latencies) < delay / 3, "appends waited for the summarizer"
    assert outcome.compacted
    assert during <= hot_tags, "events appended during the pass must all stay in the hot window"
    assert len(index.chunks) == 1 and index.chunks[0].last_seq < min(log.acked[t] for t in during)
    assert summary.count("- **chunk_") == 1
    assert verdict.ok, verdict.explain()
    assert await _lock_is_free(tmp_path)


async def test_hang_past_deadline_while_appending(tmp_path: Path) -> None:
    hanging = HangingSummarizer()
    log = _Log("hang")
    config = _with(summarizer_timeout_s=0.4)
    async with aiden.open_memory(tmp_path, config=config, summarizer=ScriptedSummarizer()) as memory:
        for _ in range(20):
            await log.add(memory, "pre")
        await memory.maintain(manual=True)
        for _ in range(10):
            await log.add(memory, "pre")
    before = _files(tmp_path)
    async with aiden.open_memory(tmp_path, config=config, summarizer=hanging) as memory:
        async with anyio.create_task_group() as tg:
            result: list[aiden.CompactionOutcome] = []

            async def run_pass() -> None:
                result.append(await memory.maintain(manual=True))

            tg.start_soon(run_pass)
            await hanging.wait_started(1)
            while not result:
                await log.add(memory, "dur")
        after = _files(tmp_path)
    verdict = check(tmp_path, log.acked, log.attempted)
    report(
        "summarizer hangs past its deadline",
        appended_during=sum(1 for t in log.acked if t.startswith("dur:")),
        cancellations=hanging.cancellations,
        reason=result[0].reason,
        **verdict.figures(),
    )
    assert result[0].compacted is False and result[0].reason == "summarizer_failed"
    assert hanging.cancellations >= 1
    assert before == after
    assert verdict.ok, verdict.explain()
    assert await _lock_is_free(tmp_path)


class _HangsOnCompaction:
    """Hangs on chunk summaries (history / turn prefix / rolling fold); answers anything else at once.

    So the session summary written at rotation (seed 004, bounded by the deadline by design) does not
    mask what this test is about: the in-flight compaction pass.
    """

    def __init__(self) -> None:
        self.hanging = HangingSummarizer()
        self.other = ScriptedSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if request.purpose in ("history", "turn_prefix", "rolling_fold"):
            return await self.hanging.summarize(request)
        return await self.other.summarize(request)


async def test_rotation_cancels_a_hanging_pass_without_waiting(tmp_path: Path) -> None:
    """Also the regression test of a bug found by this suite and fixed in 82d78b0:
    MaintenanceScheduler._rotate cancelled the in-flight pass but called SessionStore.rotate before the pass
    released store.compaction_lock, so rotate() failed with LockError('session lock is not reentrant')."""
    summarizer = _HangsOnCompaction()
    log = _Log("rot")
    config = _with(summarizer_timeout_s=5)
    async with aiden.open_memory(tmp_path, config=config, summarizer=ScriptedSummarizer()) as memory:
        for _ in range(20):
            await log.add(memory)
        await memory.maintain(manual=True)
        for _ in range(10):
            await log.add(memory)
    summary_before = read_bytes(Layout(tmp_path).summary)
    async with aiden.open_memory(tmp_path, config=config, summarizer=summarizer) as memory:
        memory.request_maintenance(manual=True)
        await summarizer.hanging.wait_started(1)
        for _ in range(5):
            await log.add(memory)
        t0 = time.monotonic()
        with anyio.move_on_after(3) as scope:
            await memory.rotate("closed-while-summarizing")
        took = time.monotonic() - t0
        assert not scope.cancelled_caught, "rotation waited on the hanging compaction pass"
        for _ in range(3):
            await log.add(memory, "new")
    archived = Layout(tmp_path).archive / "closed-while-summarizing"
    verdict = check(tmp_path, log.acked, log.attempted)
    report("rotation cancels a hanging pass", rotate_s=round(took, 3),
           cancellations=summarizer.hanging.cancellations, **verdict.figures())
    assert took < 3
    assert summarizer.hanging.cancellations == 1
    assert read_bytes(archived / "summary.md") == summary_before
    assert verdict.ok, verdict.explain()
    assert await _lock_is_free(tmp_path)


# --------------------------------------------------------------------------
# malformed results
# --------------------------------------------------------------------------


class _Returns:
    """A summarizer that returns ``value`` as is (whatever its type)."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> Any:
        self.calls += 1
        return self.value


async def _malformed_case(root: Path, value: Any) -> tuple[aiden.CompactionOutcome, bool, Any]:
    log = _Log("malformed")
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        for _ in range(16):
            await log.add(memory)
        await memory.maintain(manual=True)
        for _ in range(12):
            await log.add(memory)
    before = (*_files(root), read_bytes(Layout(root).events))
    summarizer = _Returns(value)
    async with aiden.open_memory(root, config=CONFIG, summarizer=summarizer) as memory:
        outcome = await memory.maintain(manual=True)
        await log.add(memory, "after")
    after = (*_files(root), read_bytes(Layout(root).events))
    verdict = check(root, log.acked, log.attempted)
    assert verdict.ok, verdict.explain()
    # events.jsonl may only have grown by the one append made after the pass.
    return outcome, before == (*after[:3], after[3][: len(before[3])]), summarizer


@pytest.mark.parametrize(
    "value",
    [
        "a plain string, not a SummaryResult",
        None,
        SummaryResult(text="\n\t  \n"),
        SummaryResult(text="y" * 50_000),
    ],
    ids=["str", "none", "whitespace", "over-max-chars"],
)
async def test_malformed_summarizer_result_changes_nothing(tmp_path: Path, value: Any) -> None:
    outcome, unchanged, summarizer = await _malformed_case(tmp_path, value)
    report("malformed summarizer result", calls=summarizer.calls, compacted=outcome.compacted, unchanged=unchanged)
    assert outcome.compacted is False and outcome.reason == "summarizer_failed"
    assert unchanged


async def test_lone_surrogate_in_summary_is_rejected_not_fatal(tmp_path: Path) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): a summary text with a lone surrogate
    (e.g. a JSON escape like backslash-ud83d from an LLM) passes SummarizerActor._validate, then encoding the reply
    kills the summarizer actor and the whole open_memory task group raises UnicodeEncodeError
    """
    outcome, unchanged, _ = await _malformed_case(tmp_path, SummaryResult(text="summary \ud83d cut emoji"))
    assert outcome.compacted is False and unchanged

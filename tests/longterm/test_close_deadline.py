"""[Integrations]: closing a memory with a hung summarizer waited out the whole summarizer deadline
(120 s by default). Now the session summary at close gets ``close_timeout_s``, then the extractive
fallback writes it; nothing is lost and the close returns."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import msgspec
import pytest

import aiden
from aiden.storage.layout import Layout
from aiden.summarizers.protocol import SummaryRequest, SummaryResult
from aiden.testing import HangingSummarizer, ScriptedSummarizer, SlowSummarizer
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio


async def test_close_with_a_hung_summarizer_uses_the_close_deadline(tmp_path: Path) -> None:
    # A deadline far beyond the per-test timeout: without the close deadline this test times out.
    config = msgspec.structs.replace(SMALL_MANUAL, summarizer_timeout_s=10_000.0, close_timeout_s=0.2)
    hung = SlowSummarizer(10_000.0)
    async with aiden.open_memory(tmp_path, config=config, summarizer=hung) as memory:
        for n in range(4):
            await memory.append(
                aiden.SessionEvent(type="user_input", role="user", content=f"decided to use kafka {n}")
            )
    assert hung.calls_started == 1
    assert hung.calls_finished == 0
    written = sorted((Layout(tmp_path).long_term / "sessions").glob("*.md"))
    assert len(written) == 1  # the extractive fallback wrote the session summary
    assert "kafka" in written[0].read_text()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # real time: a virtual clock jumps past any sleep
async def test_close_with_a_pass_in_flight_on_a_hung_summarizer_cancels_it_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A pass is waiting on the hung summarizer (its running-summary merge holds the writer's ordering
    # lock): the close used to wait behind it for the whole summarizer deadline.
    config = msgspec.structs.replace(
        SMALL_MANUAL, summarizer_timeout_s=10_000.0, close_timeout_s=0.2, count_compress_after_events=5
    )
    hung = SlowSummarizer(10_000.0)
    texts = [f"decided to use kafka {n}" for n in range(12)]
    with caplog.at_level(logging.WARNING):
        async with aiden.open_memory(tmp_path, config=config, summarizer=hung) as memory:
            for text in texts:
                await memory.append(aiden.SessionEvent(type="user_input", role="user", content=text))
            memory.request_maintenance()
            with anyio.fail_after(30):
                await hung.wait_started()  # the pass is in flight, on the hung summarizer
    assert hung.calls_finished == 0
    said = {r.getMessage() for r in caplog.records}
    # What the close says (the teardown may log more: the cancelled calls' own fallbacks).
    assert {
        "closing: a running-summary merge is still waiting for the summarizer after 0.2s (close_timeout_s); "
        "writing the session summary beside it, the merge is cancelled",
        "session summary extraction failed (no answer within 0.2s); using the extractive fallback",
        "closing: the maintenance pass in flight was cancelled; nothing is lost "
        "(its events stay in the hot window for the next pass)",
    } <= said
    (written,) = sorted((Layout(tmp_path).long_term / "sessions").glob("*.md"))
    assert "kafka" in written.read_text()
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        assert [e.content for e in await memory.hot_window()] == texts  # nothing compacted, nothing lost


class FirstCallHangs:
    """The first call never answers (until cancelled); later ones answer as a ScriptedSummarizer."""

    def __init__(self) -> None:
        self.hung = HangingSummarizer()
        self.answers = ScriptedSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.hung.calls == 0:
            return await self.hung.summarize(request)
        return await self.answers.summarize(request)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # real time: a virtual clock jumps past any sleep
async def test_close_behind_a_hung_merge_asks_the_summarizer_for_the_session_summary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The close gives up waiting behind the merge and cancels it: the session summary's own call
    # reaches the summarizer (it queued behind the hung call until its deadline, then fell back).
    config = msgspec.structs.replace(
        SMALL_MANUAL, summarizer_timeout_s=10_000.0, close_timeout_s=0.2, count_compress_after_events=5
    )
    summarizer = FirstCallHangs()
    with caplog.at_level(logging.WARNING):
        async with aiden.open_memory(tmp_path, config=config, summarizer=summarizer) as memory:
            for n in range(12):
                await memory.append(aiden.SessionEvent(type="user_input", role="user", content=f"use kafka {n}"))
            memory.request_maintenance()
            with anyio.fail_after(30):
                await summarizer.hung.wait_started()  # the pass's merge waits on the hung call
    said = {r.getMessage() for r in caplog.records}
    assert summarizer.hung.cancellations == 1
    assert "session summary extraction failed (no answer within 0.2s); using the extractive fallback" not in said
    assert "session_summary" in [r.purpose for r in summarizer.answers.requests]

"""``summary_max_chars`` bounds the chunk summary as stored, must-keep facts and the split turn included."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent, SummarizerError
from aiden.testing import ScriptedSummarizer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LIMIT = 400


def _events() -> list[SessionEvent]:
    events = [SessionEvent(type="user_input", role="user", content="Fix the failing import in the worker.")]
    for i in range(30):
        events.append(SessionEvent(type="user_input", role="user", content=f"Now check job {i}."))
        events.append(
            SessionEvent(
                type="assistant_output",
                role="assistant",
                content=f"Job {i} fails: ModuleNotFoundError: No module named 'pkg_{i}' in src/worker/job_{i}.py. "
                + "More detail follows. " * 10,
            )
        )
    return events


async def test_summary_with_must_keep_facts_stays_within_summary_max_chars(tmp_path: Path) -> None:
    near_limit = "The worker import was traced. " * (LIMIT // 30)
    assert LIMIT - 30 < len(near_limit) <= LIMIT
    config = Config(summary_max_chars=LIMIT)
    summarizer = ScriptedSummarizer([near_limit] * 8)
    async with aiden.open_memory(
        tmp_path, config=config, summarizer=summarizer, context_window=4096
    ) as memory:
        await memory.append_many(_events())
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted, outcome
        index = await memory.chunk_index()
    (chunk,) = index.chunks
    assert len(chunk.summary) <= LIMIT, len(chunk.summary)
    assert chunk.summary.startswith(near_limit.rstrip()[:100])


async def test_the_breadcrumb_of_a_failed_summarizer_stays_within_summary_max_chars(tmp_path: Path) -> None:
    config = Config(summary_max_chars=LIMIT, breadcrumb_max_chars=4 * LIMIT, failure_fallback="breadcrumb")
    summarizer = ScriptedSummarizer([SummarizerError("provider down")] * 8)
    async with aiden.open_memory(
        tmp_path, config=config, summarizer=summarizer, context_window=4096
    ) as memory:
        await memory.append_many(_events())
        outcome = await memory.maintain(manual=True)
        assert (outcome.compacted, outcome.degraded) == (True, True), outcome
        index = await memory.chunk_index()
    (chunk,) = index.chunks
    assert chunk.summary.startswith("[raw breadcrumb: summarization failed")
    assert len(chunk.summary) <= LIMIT, len(chunk.summary)

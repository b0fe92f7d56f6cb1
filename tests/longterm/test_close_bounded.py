"""A close's session summary reads a bounded slice of the hot window: the same slice at any window,
and never empty when the session has content."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

import aiden
from aiden.storage.layout import Layout
from aiden.summarizers.protocol import SummaryRequest
from aiden.testing import ScriptedSummarizer

pytestmark = pytest.mark.anyio

WORDS = ["deploy", "cluster", "staging", "billing", "invoice", "retry", "queue", "kafka", "postgres", "migration", "index", "cache", "latency", "timeout", "owner", "decided", "prefer", "because", "failed", "fixed", "test", "module", "handler", "config"]
NEWEST = "I prefer tabs over spaces, always."
EVENT_CHARS = 1_000


def _events(n: int) -> list[aiden.SessionEvent]:
    rng = random.Random(7)
    events = []
    for i in range(n):
        text = " ".join(" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(16))
        events.append(
            aiden.SessionEvent(
                type="user_input" if i % 2 == 0 else "assistant_output",
                role="user" if i % 2 == 0 else "assistant",
                content=text[:EVENT_CHARS],
            )
        )
    return [*events, aiden.SessionEvent(type="user_input", role="user", content=NEWEST)]


async def _close_with(root: Path, events: list[aiden.SessionEvent], summarizer: aiden.Summarizer | None) -> None:
    config = msgspec.structs.replace(aiden.Config.for_window(1_000_000), durability="none")
    async with aiden.open_memory(root, config=config, summarizer=summarizer) as memory:
        for start in range(0, len(events), 500):
            await memory.append_many(events[start : start + 500])
        assert len(await memory.hot_window()) == len(events)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_close_reads_the_same_newest_slice_at_any_window(tmp_path: Path) -> None:
    read: dict[int, SummaryRequest] = {}
    for n in (2_000, 4_000):
        summarizer = ScriptedSummarizer()
        await _close_with(tmp_path / str(n), _events(n), summarizer)
        [read[n]] = [r for r in summarizer.requests if r.purpose == "session_summary"]
    small, large = read[2_000].events, read[4_000].events
    # The slice is the newest events, as many at 4,000 events as at 2,000, and a small part of either.
    assert len(small) == len(large)
    assert small[-1].content == large[-1].content == NEWEST
    assert 1 < len(small) < 2_001 // 10
    assert [e.seq for e in large] == list(range(large[0].seq, large[0].seq + len(large)))  # contiguous


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_close_on_a_huge_hot_window_writes_a_session_summary(tmp_path: Path) -> None:
    await _close_with(tmp_path, _events(2_000), None)  # the embedded extractive summarizer
    written = list((Layout(tmp_path).long_term / "sessions").glob("*.md"))
    assert len(written) == 1
    assert "tabs over spaces" in written[0].read_text()

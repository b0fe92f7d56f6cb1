"""A close's session summary reads a bounded slice of the hot window: the same cost at any window,
and never empty when the session has content (issue 34 finding 6, issue 35's close at 1M)."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

import aiden
from aiden.storage.layout import Layout

pytestmark = pytest.mark.anyio

WORDS = ["deploy", "cluster", "staging", "billing", "invoice", "retry", "queue", "kafka", "postgres", "migration", "index", "cache", "latency", "timeout", "owner", "decided", "prefer", "because", "failed", "fixed", "test", "module", "handler", "config"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # real threads and real time
async def test_a_close_on_a_huge_hot_window_writes_a_session_summary(tmp_path: Path) -> None:
    rng = random.Random(7)
    config = msgspec.structs.replace(
        aiden.Config.for_window(1_000_000), durability="none", close_timeout_s=1.0, summarizer_timeout_s=1.0
    )
    events = [
        aiden.SessionEvent(
            type="user_input" if n % 2 == 0 else "assistant_output",
            role="user" if n % 2 == 0 else "assistant",
            content=" ".join(" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(12)),
        )
        for n in range(2000)
    ]
    async with aiden.open_memory(tmp_path, config=config) as memory:
        for start in range(0, len(events), 500):
            await memory.append_many(events[start : start + 500])
        await memory.append(
            aiden.SessionEvent(type="user_input", role="user", content="I prefer tabs over spaces, always.")
        )
        assert len(await memory.hot_window()) == 2001
    written = list((Layout(tmp_path).long_term / "sessions").glob("*.md"))
    assert len(written) == 1
    assert "tabs over spaces" in written[0].read_text()

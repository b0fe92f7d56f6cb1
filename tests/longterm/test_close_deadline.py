"""[Integrations]: closing a memory with a hung summarizer waited out the whole summarizer deadline
(120 s by default). Now the session summary at close gets ``close_timeout_s``, then the extractive
fallback writes it; nothing is lost and the close returns."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

import aiden
from aiden.storage.layout import Layout
from aiden.testing import SlowSummarizer
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio


async def test_close_with_a_hung_summarizer_uses_the_close_deadline(tmp_path: Path) -> None:
    # A deadline far beyond the per-test timeout: without the close deadline this test times out.
    config = msgspec.structs.replace(SMALL_MANUAL, summarizer_timeout_s=10_000.0, close_timeout_s=0.2)
    hung = SlowSummarizer(10_000.0)
    async with aiden.open_memory(tmp_path, config=config, summarizer=hung) as memory:
        for n in range(4):
            await memory.append(aiden.SessionEvent(type="user_input", role="user", content=f"decided to use kafka {n}"))
    assert hung.calls_started == 1
    assert hung.calls_finished == 0
    written = sorted((Layout(tmp_path).long_term / "sessions").glob("*.md"))
    assert len(written) == 1  # the extractive fallback wrote the session summary
    assert "kafka" in written[0].read_text()

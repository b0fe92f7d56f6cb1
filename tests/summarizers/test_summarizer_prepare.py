"""A summarizer's one-time setup runs while the memory opens, not in the first compaction (#18).

Importing litellm holds the GIL for ~150 ms of pure Python: in the first
compaction it stalled every append made meanwhile (the backlog benchmark's
1k LLM row). The summarizer actor awaits ``prepare()`` before it reports
started, so ``open_memory`` returns only after it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

import aiden
from aiden.errors import SummarizerUnavailable
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import Preparable, SummaryRequest, SummaryResult

pytestmark = pytest.mark.timeout(60)


class RecordingSummarizer:
    """Extractive summaries; records when it was prepared and when it was first asked."""

    def __init__(self, *, fail: bool = False) -> None:
        self.log: list[str] = []
        self._fail = fail
        self._inner = ExtractiveSummarizer()

    async def prepare(self) -> None:
        self.log.append("prepare")
        if self._fail:
            raise SummarizerUnavailable("no provider package")

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.log.append("summarize")
        return await self._inner.summarize(request)


@pytest.mark.anyio
async def test_open_memory_returns_after_the_summarizer_is_prepared(tmp_path: Path) -> None:
    summarizer = RecordingSummarizer()
    assert isinstance(summarizer, Preparable)
    async with aiden.open_memory(str(tmp_path), summarizer=summarizer) as memory:
        assert summarizer.log == ["prepare"]
        await memory.begin_run("Ship the CSV export by Friday.")
        await memory.maintain()
    assert summarizer.log[0] == "prepare"
    assert summarizer.log.count("prepare") == 1
    assert "summarize" in summarizer.log


@pytest.mark.anyio
async def test_a_failed_preparation_is_logged_and_the_memory_still_opens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    summarizer = RecordingSummarizer(fail=True)
    with caplog.at_level(logging.WARNING, logger="aiden.summarizer"):
        async with aiden.open_memory(str(tmp_path), summarizer=summarizer) as memory:
            stored = await memory.append(aiden.SessionEvent(type="user_input", content="hello"))
            assert stored.seq == 1
    assert summarizer.log[0] == "prepare"
    assert [r.getMessage() for r in caplog.records if r.name == "aiden.summarizer"] == [
        "summarizer setup failed (the first call will retry it): no provider package"
    ]


@pytest.mark.anyio
async def test_the_litellm_summarizer_imports_litellm_before_open_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiden.summarizers.llm import client as litellm_handle
    from aiden.summarizers.llm.client import imported_litellm
    from aiden.summarizers.llm.summarizer import LiteLLMSummarizer

    # An earlier test of this process may have set litellm up already: start from none.
    monkeypatch.setattr(litellm_handle, "_litellm", None)
    assert imported_litellm() is None

    summarizer = LiteLLMSummarizer("openai/never-called", api_base="http://127.0.0.1:9/v1", api_key="x")
    assert isinstance(summarizer, Preparable)
    async with aiden.open_memory(str(tmp_path), summarizer=summarizer):
        assert imported_litellm() is not None
        assert "litellm" in sys.modules

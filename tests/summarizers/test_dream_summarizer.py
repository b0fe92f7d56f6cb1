"""An open memory's Dream asks the configured summarizer, through the summarizer actor (#19).

Before, Dream hard-wired the extractive summarizer whatever the memory was
given; now its request goes through the actor, so the actor's deadline and
output validation apply to it as to every other summary.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden.config import Config
from aiden.errors import AidenError
from aiden.events import SessionEvent
from aiden.summarizers.protocol import SummaryRequest, SummaryResult
from aiden.testing import ScriptedSummarizer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    """trio on the real clock: the memory's deadlines must not jump while storage runs in threads."""
    return "trio"


CONFIG = Config(keep_recent_tokens=60, hot_window_events=4, count_compress_after_events=10**6)


def is_dream(request: SummaryRequest) -> bool:
    return bool(request.events) and all(e.role == "history" for e in request.events)


class DreamAnswers(ScriptedSummarizer):
    """Scripted defaults, and ``dream_text`` for Dream's request over the history records."""

    def __init__(self, dream_text: str) -> None:
        super().__init__()
        self.dream_text = dream_text

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if is_dream(request):
            self.requests.append(request)
            return SummaryResult(text=self.dream_text)
        return await super().summarize(request)


async def compact_some(memory: aiden.Memory) -> None:
    for i in range(12):
        await memory.append(
            SessionEvent(type="user_input", content=f"Always use yarn, never npm. Step {i} of the docs site.")
        )
    assert (await memory.maintain(manual=True)).compacted


async def test_memory_dream_asks_the_configured_summarizer(tmp_path: Path) -> None:
    text = "## OUTCOME\n- docs site built\n\n## USER PREFERENCES\n- Always use yarn, never npm."
    summarizer = DreamAnswers(text)
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=summarizer) as memory:
        await compact_some(memory)
        outcome = await memory.dream()
    dream = [r for r in summarizer.requests if is_dream(r)]
    assert [r.purpose for r in dream] == ["session_summary"]
    assert outcome.ran and outcome.commit_id is not None
    user_md = (tmp_path / "memory" / "long_term" / "USER.md").read_text(encoding="utf-8")
    assert "- Always use yarn, never npm." in user_md


async def test_an_empty_dream_answer_is_refused_by_the_actor_and_changes_nothing(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=DreamAnswers("   ")) as memory:
        await compact_some(memory)
        with pytest.raises(AidenError, match="summarizer returned an empty summary"):
            await memory.dream()
        assert await memory.dream_log() == []
    assert not (tmp_path / "memory" / "long_term" / "USER.md").exists()

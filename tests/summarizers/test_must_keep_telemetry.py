"""The must-keep check is counted, and the first summarizer failure explained, in ``memory.stats()`` (#19)."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden.config import Config
from aiden.errors import SummarizerUnavailable
from aiden.events import SessionEvent
from aiden.storage.layout import Layout
from aiden.summarizers.mustkeep.check import appended_count, apply_must_keep
from aiden.testing import ScriptedSummarizer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CONFIG = Config(
    keep_recent_tokens=60, hot_window_events=4, count_compress_after_events=10**6, failure_fallback="breadcrumb"
)
RULE = "Never run migrations against prod directly."
DECISION = "I decided to use logical replication because it allows a zero-downtime cutover."


@pytest.fixture
def anyio_backend() -> str:
    """trio on the real clock: the memory's deadlines must not jump while storage runs in threads."""
    return "trio"


def test_appended_count_counts_the_items_apply_must_keep_appended() -> None:
    summary = "Goal: migrate billing.\n"
    after = apply_must_keep(summary, [RULE, DECISION, "migrate billing"], max_items=5)
    assert after == f"Goal: migrate billing.\n\nMust keep:\n- {RULE}\n- {DECISION}"
    assert appended_count(summary, after) == 2
    assert appended_count(after, after) == 0


async def fill(memory: aiden.Memory) -> None:
    await memory.append(SessionEvent(type="user_input", content="Migrate billing to Postgres 16."))
    await memory.append(SessionEvent(type="user_input", content=RULE))
    await memory.append(SessionEvent(type="assistant_output", content=DECISION))
    for step in range(10):
        await memory.append(SessionEvent(type="assistant_output", content=f"Step {step} done: " + "ok " * 20))


async def test_facts_a_summary_dropped_are_appended_and_counted(tmp_path: Path) -> None:
    # The scripted summary ("summary of seq 2-10 ...") keeps none of the range's facts; the root
    # input (seq 1) is pinned, not compacted.
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await fill(memory)
        assert (await memory.maintain(manual=True)).compacted
        stats = memory.stats()
    summary_md = Layout(tmp_path).summary.read_text(encoding="utf-8")
    assert f"  Must keep:\n  - {RULE}\n  - {DECISION}\n" in summary_md
    assert (stats.must_keep_added, stats.summarizer_first_error) == (2, "")


async def test_the_first_summarizer_failure_is_explained_in_stats(tmp_path: Path) -> None:
    failing = ScriptedSummarizer([SummarizerUnavailable("provider down: connection refused")] * 4)
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=failing) as memory:
        await fill(memory)
        await memory.maintain(manual=True)
        stats = memory.stats()
    assert stats.summarizer_failures == 1
    assert stats.summarizer_first_error == "SummarizerUnavailable: provider down: connection refused"

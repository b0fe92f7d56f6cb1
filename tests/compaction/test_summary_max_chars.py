"""``summary_max_chars`` bounds the chunk summary as stored, must-keep facts and the split turn included;
a lowered one never makes the embedded summarizer's compactions fail (the chunk summary budget, set or
derived, is clamped to ``summary_max_chars`` / 8, and the extractive summarizer takes at most
``SUMMARY_CHARS_PER_TOKEN`` characters per budget token, however few tokens its words estimate)."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, ConfigError, SessionEvent, SummarizerError
from aiden.config import SUMMARY_CHARS_PER_TOKEN
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import SummaryRequest
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


def _long_word_events() -> list[SessionEvent]:
    # A word of 65 letters estimates as about 4 tokens: 16 characters each, twice the usual 4.
    word = "a" * 65
    events = []
    for _ in range(20):
        events.append(SessionEvent(type="user_input", role="user", content=f"Constraint: never use {word} {word} {word}"))
        events.append(SessionEvent(type="assistant_output", role="assistant", content=f"Decision: we keep {word} {word} {word}"))
    return events


async def _compact(tmp_path: Path, config: Config, events: list[SessionEvent]) -> str:
    async with aiden.open_memory(tmp_path, config=config, context_window=4096) as memory:
        await memory.append_many(events)
        outcome = await memory.maintain(manual=True)
        assert (outcome.compacted, outcome.reason, outcome.degraded) == (True, "manual", False), outcome
        index = await memory.chunk_index()
    (chunk,) = index.chunks
    return chunk.summary


async def test_a_lowered_summary_max_chars_still_compacts_with_the_embedded_summarizer(tmp_path: Path) -> None:
    config = Config(summary_max_chars=400)
    summary = await _compact(tmp_path, config, _events())
    assert len(summary) <= 400, len(summary)
    assert "ModuleNotFoundError: No module named 'pkg_0'" in summary
    # The budget left unset follows the bound (the window's own would be 4096 // 20 = 204 tokens).
    assert config.with_window(4096).chunk_summary_tokens() == 400 // SUMMARY_CHARS_PER_TOKEN


async def test_long_words_do_not_push_the_extractive_summary_over_summary_max_chars(tmp_path: Path) -> None:
    config = Config(summary_max_tokens=20, summary_max_chars=20 * SUMMARY_CHARS_PER_TOKEN)
    summary = await _compact(tmp_path, config, _long_word_events())
    assert len(summary) <= 20 * SUMMARY_CHARS_PER_TOKEN, len(summary)
    assert summary.startswith("Constraints:")


async def test_the_extractive_summary_takes_at_most_its_characters_per_budget_token() -> None:
    request = SummaryRequest(purpose="history", events=tuple(_long_word_events()), max_tokens=20)
    result = await ExtractiveSummarizer().summarize(request)
    assert 0 < len(result.text) <= 20 * SUMMARY_CHARS_PER_TOKEN, len(result.text)
    assert result.text.endswith(" [...]")


async def test_an_explicit_budget_summary_max_chars_cannot_hold_is_clamped_to_it(tmp_path: Path) -> None:
    config = Config(summary_max_tokens=200, summary_max_chars=400)
    summary = await _compact(tmp_path, config, _events())
    assert len(summary) <= 400, len(summary)
    assert (config.summary_max_tokens, config.chunk_summary_tokens()) == (200, 400 // SUMMARY_CHARS_PER_TOKEN)
    # A budget it can hold stays as set.
    assert Config(summary_max_tokens=100, summary_max_chars=800).chunk_summary_tokens() == 100


def test_a_summary_max_chars_below_one_token_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        Config(summary_max_chars=7)
    assert str(raised.value) == "Config: key 'summary_max_chars': Expected `int` >= 8"
    path = tmp_path / "extraction.yaml"
    path.write_text("summary_max_chars: 7\n")
    with pytest.raises(ConfigError) as loaded:
        aiden.load_config(path)
    assert str(loaded.value) == f"{path}: key 'summary_max_chars': Expected `int` >= 8"
    assert Config(summary_max_chars=8).chunk_summary_tokens() == 1

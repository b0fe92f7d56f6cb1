"""history.jsonl with .cursor, and consolidation with the raw-breadcrumb fallback."""

from __future__ import annotations

import json

import anyio
import pytest

from aiden import Config, SessionEvent
from aiden.errors import SummarizerError
from aiden.longterm import HistoryStore, consolidate, consolidate_pass
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.testing import FailingSummarizer, HangingSummarizer, ScriptedSummarizer

pytestmark = pytest.mark.anyio

NOW = 1_767_225_600.0
EVENTS = [
    SessionEvent(type="user_input", role="user", content="Always use yarn, never npm.", seq=1),
    SessionEvent(type="assistant_output", role="assistant", content="<think>hmm</think>Noted: yarn it is.", seq=2),
]


def test_append_allocates_cursors_strips_thinking_and_bounds_records(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage, max_record_chars=64)
    first = history.append("<think>private chain of thought</think>The user prefers yarn.", session_key="cli:a",
                           now=NOW)
    second = history.append("x" * 500, session_key="k" * 300, now=NOW + 60)
    assert (first.cursor, first.content, first.timestamp) == (1, "The user prefers yarn.", "2026-01-01T00:00:00Z")
    assert second.cursor == 2
    assert len(second.content) == 64 and second.content.endswith(" [... truncated]")
    assert len(second.session_key) == 128
    assert history.cursor_path.read_text() == "2\n"
    lines = history.path.read_text().splitlines()
    assert json.loads(lines[0]) == {
        "cursor": 1, "timestamp": "2026-01-01T00:00:00Z", "content": "The user prefers yarn.", "session_key": "cli:a"
    }
    assert history.read_after(1) == [second]
    assert history.read_after(0, limit=1) == [first]


def test_cursor_never_reused_after_a_crash_between_append_and_cursor(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    history.append("one", session_key="s", now=NOW)
    history.append("two", session_key="s", now=NOW)
    history.cursor_path.write_text("1\n")  # .cursor lagging behind the file (crash before its rename)
    with history.path.open("ab") as f:
        f.write(b'{"cursor": 3, "timest')  # a torn, unacknowledged tail
    reopened = HistoryStore(layout, Storage())
    assert reopened.cursor() == 2
    third = reopened.append("three", session_key="s", now=NOW)
    assert third.cursor == 3
    assert [r.content for r in reopened.read_after(0)] == ["one", "two", "three"]
    assert reopened.dream_cursor() == 0
    reopened.set_dream_cursor(2)
    assert reopened.dream_cursor() == 2 and reopened.dream_cursor_path.read_text() == "2\n"


async def test_consolidate_summarizes_or_leaves_a_bounded_breadcrumb(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    config = Config(breadcrumb_max_chars=120)
    ok = await consolidate(history, ScriptedSummarizer(["- The user prefers yarn."]), EVENTS,
                           session_key="cli:a", now=NOW, config=config)
    assert (ok.record.cursor, ok.record.content, ok.degraded, ok.stop_pass) == (1, "- The user prefers yarn.",
                                                                               False, False)
    failed = await consolidate(history, FailingSummarizer(SummarizerError("provider down")), EVENTS * 20,
                               session_key="cli:a", now=NOW, config=config)
    assert failed.degraded and failed.stop_pass and failed.error == "SummarizerError: provider down"
    assert failed.record.cursor == 2  # the boundary still advances
    assert failed.record.content.startswith("[raw archive: SummarizerError: provider down]\nuser: Always use yarn")
    assert len(failed.record.content) <= 120 and "hmm" not in failed.record.content


async def test_a_hanging_summarizer_times_out_into_a_breadcrumb(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    hanging = HangingSummarizer()
    start = anyio.current_time()
    out = await consolidate(history, hanging, EVENTS, session_key="s", now=NOW,
                            config=Config(summarizer_timeout_s=5.0))
    assert anyio.current_time() - start == 5.0 and hanging.cancellations == 1
    assert out.degraded and out.error == "TimeoutError: "


async def test_a_pass_stops_after_the_first_failure(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    summarizer = ScriptedSummarizer(["first", SummarizerError("503"), "never asked"])
    outcomes = await consolidate_pass(history, summarizer, [EVENTS, EVENTS, EVENTS], session_key="s", now=NOW,
                                      config=Config())
    assert [(o.record.cursor, o.degraded) for o in outcomes] == [(1, False), (2, True)]
    assert len(summarizer.requests) == 2 and summarizer.remaining == 1


def test_a_record_for_a_known_chunk_lands_once(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    first = history.append("chunk one", session_key="s", now=NOW, chunk_id="chunk_1_4")
    other = history.append("unrelated", session_key="s", now=NOW)
    again = history.append("chunk one, retried", session_key="s", now=NOW + 5, chunk_id="chunk_1_4")
    assert again == first
    assert [(r.cursor, r.chunk_id) for r in history.read_after(0)] == [(1, "chunk_1_4"), (2, "")]
    assert other.cursor == 2
    assert json.loads(history.path.read_text().splitlines()[0])["chunk_id"] == "chunk_1_4"

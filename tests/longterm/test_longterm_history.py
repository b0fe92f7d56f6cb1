"""history.jsonl with .cursor."""

from __future__ import annotations

import json

from aiden.longterm.history import HistoryStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

NOW = 1_767_225_600.0


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


def test_a_record_for_a_known_chunk_lands_once(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    first = history.append("chunk one", session_key="s", now=NOW, chunk_id="chunk_1_4")
    other = history.append("unrelated", session_key="s", now=NOW)
    again = history.append("chunk one, retried", session_key="s", now=NOW + 5, chunk_id="chunk_1_4")
    assert again == first
    assert [(r.cursor, r.chunk_id) for r in history.read_after(0)] == [(1, "chunk_1_4"), (2, "")]
    assert other.cursor == 2
    assert json.loads(history.path.read_text().splitlines()[0])["chunk_id"] == "chunk_1_4"

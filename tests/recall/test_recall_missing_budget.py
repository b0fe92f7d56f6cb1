"""The seqs a rehydration did not find count against ``recall_max_chars`` like the rest of the answer."""

from __future__ import annotations

import json

from aiden.events import SessionEvent
from aiden.recall.tool import encode_events

UNKNOWN = [10**17 + i for i in range(200)]


def test_a_long_missing_list_is_cut_to_half_the_budget_with_its_count() -> None:
    event = SessionEvent(type="user_input", role="user", content="kept event", seq=3)
    out = encode_events("c1", [event], [3, *UNKNOWN], 500)
    assert len(out) == 303
    assert json.loads(out) == {
        "chunk_id": "c1",
        "events": [{"type": "user_input", "content": "kept event", "seq": 3, "role": "user"}],
        "missing_seqs": UNKNOWN[:9],
        "missing_count": 200,
    }


def test_a_short_missing_list_is_whole() -> None:
    out = encode_events("c1", [], [5, 77], 500)
    assert json.loads(out) == {"chunk_id": "c1", "events": [], "missing_seqs": [5, 77]}

"""Recall over conversations: the answer fills its budget, turns next to a match, dates in the query."""

from __future__ import annotations

import calendar
import json

from hypothesis import given
from hypothesis import strategies as st

from aiden.config import Config
from aiden.recall.index import RecallIndex
from aiden.recall.query import query_periods
from aiden.recall.tool import encode_hits
from tests.recall.recall_helpers import SessionFiles, ev, found

DAY = 86_400.0


def utc(year: int, month: int, day: int) -> float:
    return float(calendar.timegm((year, month, day, 0, 0, 0)))


def test_answer_is_packed_to_its_budget_not_to_five_results(files: SessionFiles) -> None:
    # 40 short matching turns: all fit in the default 4,800 characters.
    files.write("c1", [ev(n, f"turn {n} about the orchard", timestamp=1000.0 + n) for n in range(1, 41)])
    index = RecallIndex(files.layout, Config())
    try:
        hits = index.search("orchard")
        assert len(hits) == 40
        answer = encode_hits(hits)
        assert len(answer) <= Config().recall_max_chars
        first = json.loads(answer)["results"][0]
        # What identifies the event, its time included (UTC, minutes).
        assert first == {"chunk_id": "c1", "seq": 40, "type": "user_input", "time": "1970-01-01T00:17Z",
                         "text": "turn 40 about the orchard"}
        # k (and recall_max_results) lower it.
        assert len(index.search("orchard", k=3)) == 3
    finally:
        index.close()
    small = RecallIndex(files.layout, Config(recall_max_results=7))
    try:
        assert len(small.search("orchard")) == 7
    finally:
        small.close()


def test_a_turn_next_to_a_strong_match_outranks_a_lone_equal_match(files: SessionFiles) -> None:
    files.write(
        "c1",
        [
            ev(1, "did you ever try the quince jam recipe?", role="user"),
            ev(2, "yes, the jam came out great", "assistant_output", role="assistant"),
            ev(3, "unrelated chatter", role="user"),
        ],
    )
    files.write("c2", [ev(20, "the jam jar is empty again", role="user")] + [ev(21 + n, "filler") for n in range(3)])
    index = RecallIndex(files.layout, Config())
    try:
        hits = index.search("quince jam")
        # seq 2 and seq 20 both hold "jam" once (seq 20 is newer, equal length); seq 2 is the reply
        # to the turn holding both words, so it comes before the lone match.
        assert found(hits) == [("c1", "event", 1), ("c1", "event", 2), ("c2", "event", 20)]
    finally:
        index.close()


def test_a_date_in_the_query_favours_events_written_then(files: SessionFiles) -> None:
    files.write("c1", [ev(1, "we baked bread today", timestamp=utc(2024, 3, 9) + 3600)])
    files.write("c2", [ev(5, "filler")])  # seqs apart: no neighbour shares
    files.write("c3", [ev(9, "we baked bread today", timestamp=utc(2024, 7, 2) + 3600)])
    index = RecallIndex(files.layout, Config())
    try:
        # Same text twice: identical texts are shown once, the favoured one.
        assert found(index.search("what did we bake in March 2024?")) == [("c1", "event", 1)]
        assert found(index.search("what did we bake on 2 July, 2024?")) == [("c3", "event", 9)]
        # Without a date: the newest.
        assert found(index.search("what did we bake?")) == [("c3", "event", 9)]
    finally:
        index.close()


def test_query_periods() -> None:
    assert query_periods("what happened in May 2023?") == [(utc(2023, 5, 1), utc(2023, 6, 1) + 7 * DAY)]
    day = (utc(2022, 11, 9) - DAY, utc(2022, 11, 10) + 7 * DAY)
    assert query_periods("on 9 November, 2022") == [day]
    assert query_periods("on 9th of November 2022") == [day]
    assert query_periods("on November 9, 2022") == [day]
    assert query_periods("in 2021") == [(utc(2021, 1, 1), utc(2022, 1, 1) + 7 * DAY)]
    assert query_periods("December 2023 and 2024") == [
        (utc(2023, 12, 1), utc(2024, 1, 1) + 7 * DAY),
        (utc(2024, 1, 1), utc(2025, 1, 1) + 7 * DAY),
    ]
    # Not dates: the verb "may", a month without a year, other numbers, an impossible day.
    assert query_periods("you may go in May") == []
    assert query_periods("port 8443, 12345 rows, v2.2023") == []
    assert query_periods("on 31 February, 2023") == []


@given(st.text(alphabet=st.sampled_from(list("MayJunNovember 0123456789,thof.")), max_size=80))
def test_query_periods_never_raise(text: str) -> None:
    periods = query_periods(text)
    assert len(periods) <= 4
    assert all(start < end for start, end in periods)

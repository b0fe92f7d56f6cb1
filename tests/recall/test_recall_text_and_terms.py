"""What recall indexes, shows and ranks by: escaped colour codes, zero width spaces, Windows paths,
stem-only matches and the words a long query is ranked by."""

from __future__ import annotations

import json

import pytest

from aiden.config import Config
from aiden.recall.index import RecallIndex
from aiden.recall.query import display_text, index_text
from tests.recall.recall_helpers import SessionFiles, ev

JSON_COLOURED = json.dumps(
    {"stdout": "\x1b[31mFAILED\x1b[0m tests/test_pay.py::test_refund - \x1b[1mZeroDivisionError\x1b[0m"}
)


@pytest.mark.parametrize("query", ["FAILED", "ZeroDivisionError"])
def test_words_after_json_escaped_colour_codes_are_found_and_shown_raw(
    files: SessionFiles, index: RecallIndex, query: str
) -> None:
    assert "\\u001b[31mFAILED" in JSON_COLOURED
    files.write("c1", [ev(1, "run the tests", role="user"), ev(2, JSON_COLOURED, "tool_result", role="tool")])
    hits = index.search(query)
    assert [(h.kind, h.first_seq, h.text) for h in hits] == [("event", 2, JSON_COLOURED)]


def test_index_text_adds_the_words_json_escaped_colour_codes_hide() -> None:
    assert index_text('"\\u001B[1;31mFAILED\\u001b[0m x"') == '"\\u001B[1;31mFAILED\\u001b[0m x"\x1eFAILED'


def test_zero_width_spaces_of_the_text_are_shown(files: SessionFiles, index: RecallIndex) -> None:
    text = "zero\u200bwidth alpha \u200b数\u200b\u200b据\u200b库"
    files.write("c1", [ev(1, text, role="user")])
    assert [h.text for h in index.search("alpha")] == [text]
    assert [h.text for h in index.search("数据")] == [text]
    for sample in [text, "\u200b", "数\u200b", "\u200b数", "a\u200b\u200bb 数据"]:
        assert display_text(index_text(sample)) == sample


def test_a_raw_windows_path_adds_no_words_json_escapes_would(files: SessionFiles, index: RecallIndex) -> None:
    raw = "saved to C:\\new\\temp\\build.txt"
    assert index_text(raw) == raw
    assert index_text(json.dumps({"path": "C:\\new", "log": "x\nport"})) == (
        '{"path": "C:\\\\new", "log": "x\\nport"}\x1eport'
    )
    files.write("c1", [ev(1, raw, role="user")])
    assert [h.first_seq for h in index.search("temp")] == [1]
    assert index.search("emp") == []
    assert index.search("uild") == []


def test_a_one_letter_label_before_an_escape_is_no_path(files: SessionFiles, index: RecallIndex) -> None:
    # "A:\nRestart" in JSON output is a label and an escaped newline: its word is found (a review finding).
    text = json.dumps({"stdout": "A:\nRestart the worker", "note": "see: B:\tRollback first"})
    files.write("c1", [ev(1, text, role="tool")])
    assert [h.first_seq for h in index.search("rollback")] == [1]
    assert [h.first_seq for h in index.search("restart")] == [1]


@pytest.mark.parametrize("query", ["runs", "running", "cafe"])
def test_a_stem_only_match_is_cut_around_the_match(files: SessionFiles, query: str) -> None:
    # "runs" and "cafe" match only through the index's stemmer and diacritic folding.
    text = "x " * 400 + "the service kept running out of memory at the café" + " y" * 400
    files.write("c1", [ev(1, text, role="user")])
    files.write("c2", [ev(2, "unrelated", role="user")], summary="x " * 400 + "all about running at the café" + " y" * 400)
    index = RecallIndex(files.layout, Config(recall_max_chars=600))
    try:
        hits = index.search(query)
    finally:
        index.close()
    assert [(h.kind, h.truncated) for h in hits] == [("event", True), ("summary", True)]
    assert "the service kept running out of memory at the café" in hits[0].text
    assert "all about running at the café" in hits[1].text


def test_a_long_query_is_ranked_by_its_rarest_words(files: SessionFiles, index: RecallIndex) -> None:
    common = "alpha beta gamma delta epsilon zeta theta iota kappa lambda sigma omega"
    events = [ev(i, f"{common} filler {i}", role="user") for i in range(1, 30)]
    events.append(ev(30, "the zqrare setting lives in config.toml", "assistant_output", role="assistant"))
    files.write("c1", events)
    # The telling word comes thirteenth: the first twelve are in every other event.
    assert [h.first_seq for h in index.search(f"{common} zqrare", k=1)] == [30]

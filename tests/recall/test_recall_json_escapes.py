"""Words a JSON string escape hides from the tokenizer are found; the raw JSON is what is shown."""

from __future__ import annotations

import json

import pytest

from aiden.recall.index import RecallIndex
from aiden.recall.query import display_text, index_text, match_finder, query_terms
from tests.recall.recall_helpers import SessionFiles, ev

ARGS = json.dumps({"path": "a.txt", "content": 'first\nzqnewline=1 col\tzqtabbed say "zqquoted" café 数据库 C:\\new'})


@pytest.mark.parametrize("query", ["zqnewline", "zqtabbed", "zqquoted", "café", "数据库"])
def test_escaped_words_of_tool_args_are_found_and_shown_raw(files: SessionFiles, index: RecallIndex, query: str) -> None:
    files.write(
        "c1",
        [
            ev(1, "write the file", role="user"),
            ev(2, "", "tool_call", role="assistant", tool_name="write_file", tool_args=ARGS),
        ],
    )
    hits = index.search(query)
    assert [(h.kind, h.first_seq, h.text) for h in hits] == [("event", 2, "write_file\n" + ARGS)]


def test_index_text_round_trips_and_adds_only_hidden_words() -> None:
    for text in [ARGS, "C:\\new \x1e plain", "no escapes", '{"k": "\\ud83d\\ude00 x"}']:
        assert display_text(index_text(text)) == text
    assert index_text('{"a": "x\\nport \\\\new"}') == '{"a": "x\\nport \\\\new"}\x1eport'
    assert index_text("no escapes") == "no escapes"


def test_the_finder_locates_a_unicode_escaped_word() -> None:
    find = match_finder(query_terms("café"))
    assert find('{"c": "menu caf\\u00e9"}') == (12, 21)


COLOURED = (
    "\x1b[31mFAILED\x1b[0m tests/test_pay.py::test_refund - \x1b[1mZeroDivisionError\x1b[0m: division by zero\n"
    "\x1b]8;;file:///src/pay.py\x07\x1b[32mPASSED\x1b[0m\x1b]8;;\x1b\\ tests/test_pay.py::test_charge"
)


@pytest.mark.parametrize("query", ["FAILED", "ZeroDivisionError", "PASSED"])
def test_words_right_after_terminal_escapes_are_found_and_shown_raw(
    files: SessionFiles, index: RecallIndex, query: str
) -> None:
    files.write("c1", [ev(1, "run the tests", role="user"), ev(2, COLOURED, "tool_result", role="tool")])
    hits = index.search(query)
    assert [(h.kind, h.first_seq, h.text) for h in hits] == [("event", 2, COLOURED)]


def test_index_text_adds_the_words_terminal_escapes_hide() -> None:
    assert index_text("\x1b[1;31mFAILED\x1b[0m x") == "\x1b[1;31mFAILED\x1b[0m x\x1eFAILED"
    assert index_text("\x1b]0;title\x07done") == "\x1b]0;title\x07done"  # BEL already separates words
    assert display_text(index_text(COLOURED)) == COLOURED

"""Pure query building: CJK segmentation, safe FTS5 phrases, snippets, truncation."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiden.recall.query import (
    MAX_QUERY_CHARS,
    MAX_TERMS,
    Term,
    bigram_terms,
    display_text,
    index_text,
    or_expression,
    query_terms,
    snippet,
    truncate,
)


@pytest.fixture
def fts() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')")
    rows = [
        (1, "We migrate the 数据库迁移 today"),
        (2, "カタカナ と ひらがな、한국어 데이터베이스"),
        (3, 'quote " and NEAR(x y) col:value ^start * AND OR NOT'),
        (4, "Café naïve résumé"),
    ]
    db.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", [(r, index_text(t)) for r, t in rows])
    yield db
    db.close()


def match(db: sqlite3.Connection, expression: str) -> list[int]:
    return [r[0] for r in db.execute("SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid", (expression,))]


def and_expression(terms: Sequence[Term]) -> str:
    return " AND ".join(t.phrase for t in terms)


def phrases(query: str) -> list[str]:
    return [t.phrase for t in query_terms(query)]


def test_cjk_characters_become_single_tokens() -> None:
    for ch in ("数", "カ", "ひ", "한", "\U00020000"):
        assert index_text(ch) == f"\u200b{ch}\u200b"
    for ch in ("a", "\uff0c", "\uff21"):  # fullwidth comma, A
        assert index_text(ch) == ch
    assert index_text("ab数据c") == "ab\u200b数\u200b\u200b据\u200bc"
    assert display_text(index_text("用 数据库 migrate")) == "用 数据库 migrate"
    assert index_text("plain ascii") == "plain ascii"


def test_query_terms_split_like_unicode61() -> None:
    assert query_terms("数据") == [Term("数据", True, '"数 据"')]
    assert phrases("Hello, world! foo-bar") == ['"Hello"', '"world"', '"foo"', '"bar"']
    assert phrases("数据库migration失败") == ['"数 据 库"', '"migration"', '"失 败"']
    assert phrases("HELLO hello Hello") == ['"HELLO"']
    assert phrases('"quoted" NEAR(a b) col:x ^y z* (p) AND') == [
        '"quoted"', '"NEAR"', '"a"', '"b"', '"col"', '"x"', '"y"', '"z"', '"p"', '"AND"'
    ][:MAX_TERMS]
    assert phrases("") == []
    assert phrases("   \t\n") == []
    assert phrases("\x00\x01 ** ^^ () \"\" ''") == []
    assert phrases("a\x00b") == ['"a"', '"b"']
    assert phrases("\ud800lone") == ['"lone"']
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == MAX_TERMS
    long_word = "x" * (MAX_QUERY_CHARS + 500)
    assert query_terms(long_word) == [Term("x" * MAX_QUERY_CHARS, False, '"' + "x" * MAX_QUERY_CHARS + '"')]


def test_expressions_match_as_intended(fts: sqlite3.Connection) -> None:
    assert match(fts, and_expression(query_terms("数据"))) == [1]
    assert match(fts, and_expression(query_terms("迁移 migrate"))) == [1]
    assert match(fts, and_expression(query_terms("カタカナ"))) == [2]
    assert match(fts, and_expression(query_terms("데이터"))) == [2]
    assert match(fts, and_expression(query_terms("cafe NAIVE"))) == [4]
    assert match(fts, and_expression(query_terms('NEAR(x y) col:value "'))) == [3]
    assert match(fts, and_expression(query_terms("AND OR NOT"))) == [3]
    assert match(fts, and_expression(query_terms("数据 café"))) == []
    assert match(fts, or_expression(query_terms("数据 café"))) == [1, 4]


def test_fallback_splits_long_cjk_runs_into_bigrams() -> None:
    terms = query_terms("数据库迁移 ok 数据")
    assert [t.text for t in bigram_terms(terms)] == ["数据", "据库", "库迁", "迁移", "ok"]
    assert bigram_terms(query_terms("ab 中文")) == query_terms("ab 中文")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_a_valid_expression(text: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')")
    try:
        db.execute("INSERT INTO fts(rowid, text) VALUES (1, ?)", (index_text(text.encode("utf-8", "replace").decode()),))
        terms = query_terms(text)
        assert len(terms) <= MAX_TERMS
        for expression in (and_expression(terms), or_expression(bigram_terms(terms))):
            if expression:
                db.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (expression,)).fetchall()
    finally:
        db.close()


def test_snippet_is_centred_and_bounded() -> None:
    text = "a" * 500 + " needle " + "b" * 500
    out = snippet(text, query_terms("needle"), 40)
    assert len(out) == 40
    assert out.startswith("…") and out.endswith("…")
    assert "needle" in out
    assert snippet("short   text\n\nwith  needle", query_terms("needle"), 100) == "short text with needle"
    assert snippet("no match here at all", query_terms("zzz"), 8) == "no matc…"
    assert snippet("数据库迁移完成", query_terms("迁移"), 100) == "数据库迁移完成"
    assert snippet("abc", query_terms("abc"), 0) == ""
    assert snippet("abcdef", query_terms("cd"), 2) == "cd"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.text(max_size=20), st.integers(min_value=0, max_value=60))
def test_snippet_never_exceeds_width(text: str, query: str, width: int) -> None:
    assert len(snippet(text, query_terms(query), width)) <= width


def test_truncate() -> None:
    assert truncate("hello", 5) == "hello"
    assert truncate("hello", 4) == "hel…"
    assert truncate("hello", 1) == "…"
    assert truncate("hello", 0) == ""

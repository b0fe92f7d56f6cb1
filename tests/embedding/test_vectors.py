"""Vectors beside the FTS index: storage round trip, staleness, orphans, and exact top-k search."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiden.errors import RecallError
from aiden.recall import vectors
from aiden.recall.db import IndexDB, text_hash
from aiden.recall.query import ZWSP, index_text
from aiden.recall.vectors import (
    VectorSearch,
    decode_vector,
    embed_missing,
    encode_vector,
    ensure_schema,
    vector_state,
)
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.testing import HashingEmbedder, hashing_embedding


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A real recall database, created by aiden's own schema."""
    layout = Layout(tmp_path)
    layout.session.mkdir(parents=True)
    db = IndexDB(layout.recall_db, Storage())
    db.create("test")
    yield db.require()
    db.close()


def add_docs(conn: sqlite3.Connection, texts: dict[int, str]) -> None:
    for doc, text in texts.items():
        conn.execute(
            "INSERT INTO docs VALUES (?, 1, ?, 'user_input', 'user', 0, 0, ?)", (doc, doc, text_hash(text))
        )
        conn.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (doc, text))


def stored(conn: sqlite3.Connection) -> dict[int, tuple[str, list[float]]]:
    rows = conn.execute("SELECT doc, model, v FROM vectors ORDER BY doc").fetchall()
    return {doc: (model, decode_vector(blob)) for doc, model, blob in rows}


def f32(vector: list[float]) -> list[float]:
    return decode_vector(encode_vector(vector))


def test_encode_decode_round_trip() -> None:
    assert encode_vector([1.0, -0.5]) == b"\x00\x00\x80?\x00\x00\x00\xbf"
    assert decode_vector(encode_vector([0.25, 3.0])) == [0.25, 3.0]
    with pytest.raises(RecallError, match="5 bytes"):
        decode_vector(b"12345")


def test_embed_missing_round_trip_and_idempotent(conn: sqlite3.Connection) -> None:
    # The index spaces CJK characters with U+200B: the embedder sees the text as written.
    add_docs(conn, {1: "alpha beta", 2: index_text("gamma delta 数据"), 3: "epsilon"})
    assert ZWSP in index_text("gamma delta 数据")
    fake = HashingEmbedder()
    assert embed_missing(conn, fake, batch=2) == 3
    # By length, two per call: the shortest first.
    assert fake.calls == 2 and fake.seen == ["epsilon", "alpha beta", "gamma delta 数据"]
    assert stored(conn) == {
        1: ("hashing-64", f32(hashing_embedding("alpha beta"))),
        2: ("hashing-64", f32(hashing_embedding("gamma delta 数据"))),
        3: ("hashing-64", f32(hashing_embedding("epsilon"))),
    }
    assert embed_missing(conn, fake) == 0
    assert fake.calls == 2
    add_docs(conn, {4: "zeta"})
    assert embed_missing(conn, fake) == 1
    assert fake.seen[-1] == "zeta"
    assert vector_state(conn, "hashing-64") == (4, 4)


def test_limit_and_resume(conn: sqlite3.Connection) -> None:
    add_docs(conn, {i: f"text {i}" for i in range(1, 8)})
    fake = HashingEmbedder()
    assert embed_missing(conn, fake, batch=2, limit=3) == 3
    assert sorted(stored(conn)) == [1, 2, 3]
    assert embed_missing(conn, fake, batch=10, limit=0) == 0
    assert embed_missing(conn, fake, batch=10) == 4
    assert sorted(stored(conn)) == list(range(1, 8))


def test_model_change_re_embeds(conn: sqlite3.Connection) -> None:
    add_docs(conn, {1: "one", 2: "two"})
    embed_missing(conn, HashingEmbedder(64))
    other = HashingEmbedder(8)
    assert embed_missing(conn, other) == 2
    assert stored(conn) == {
        1: ("hashing-8", f32(hashing_embedding("one", 8))),
        2: ("hashing-8", f32(hashing_embedding("two", 8))),
    }
    assert vector_state(conn, "hashing-64") == (0, 0)


def test_deleted_docs_lose_their_vectors(conn: sqlite3.Connection) -> None:
    add_docs(conn, {1: "one", 2: "two", 3: "three", 4: "four"})
    fake = HashingEmbedder()
    embed_missing(conn, fake)
    conn.execute("DELETE FROM fts WHERE rowid BETWEEN 2 AND 3")
    conn.execute("DELETE FROM docs WHERE id BETWEEN 2 AND 3")
    assert embed_missing(conn, fake) == 0
    assert sorted(stored(conn)) == [1, 4]


def test_reused_doc_id_with_new_text_is_re_embedded(conn: sqlite3.Connection) -> None:
    add_docs(conn, {1: "old text"})
    fake = HashingEmbedder()
    embed_missing(conn, fake)
    conn.execute("DELETE FROM fts WHERE rowid = 1")
    conn.execute("DELETE FROM docs WHERE id = 1")
    add_docs(conn, {1: "new text"})
    assert embed_missing(conn, fake) == 1
    assert stored(conn)[1] == ("hashing-64", f32(hashing_embedding("new text")))


def test_embedder_errors_propagate_and_store_nothing(conn: sqlite3.Connection) -> None:
    add_docs(conn, {1: "one"})
    fake = HashingEmbedder()
    fake.fail_with = RecallError("provider down")
    with pytest.raises(RecallError, match="provider down"):
        embed_missing(conn, fake)
    assert stored(conn) == {}
    assert not conn.in_transaction


def test_wrong_vector_count_is_an_error(conn: sqlite3.Connection) -> None:
    class Short(HashingEmbedder):
        def embed(self, texts: object) -> list[list[float]]:
            return []

    add_docs(conn, {1: "one"})
    with pytest.raises(RecallError, match="returned 0 vectors for 1 texts"):
        embed_missing(conn, Short())


def test_bad_arguments_and_sqlite_errors(conn: sqlite3.Connection) -> None:
    with pytest.raises(ValueError):
        embed_missing(conn, HashingEmbedder(), batch=0)
    with pytest.raises(ValueError):
        embed_missing(conn, HashingEmbedder(), limit=-1)
    bare = sqlite3.connect(":memory:")
    with pytest.raises(RecallError, match="cannot delete orphaned vectors"):
        embed_missing(bare, HashingEmbedder())  # no docs table
    bare.close()
    with pytest.raises(RecallError, match="cannot create the vectors table"):
        ensure_schema(bare)


# -- VectorSearch ---------------------------------------------------------------

HAND = {
    1: [1.0, 0.0, 0.0],
    2: [0.0, 1.0, 0.0],
    3: [0.6, 0.8, 0.0],
    4: [0.8, 0.6, 0.0],
    5: [0.0, 0.0, 1.0],
    6: [0.6, 0.8, 0.0],  # ties with 3
}


def put(conn: sqlite3.Connection, table: dict[int, list[float]], model: str = "hand") -> None:
    ensure_schema(conn)
    conn.executemany(
        "INSERT OR REPLACE INTO vectors(doc, model, h, v) VALUES (?, ?, 0, ?)",
        [(doc, model, encode_vector(v)) for doc, v in table.items()],
    )


@pytest.mark.parametrize("use_numpy", [True, False])
def test_top_k_exact(conn: sqlite3.Connection, use_numpy: bool) -> None:
    if use_numpy:
        pytest.importorskip("numpy", reason="numpy is an optional extra")
    put(conn, HAND)
    put(conn, {7: [0.6, 0.8, 0.0]}, model="other")
    search = VectorSearch("hand", use_numpy=use_numpy)
    assert search.refresh(conn) is True
    assert search.ids == [1, 2, 3, 4, 5, 6]
    got = search.top([0.6, 0.8, 0.0], 4)
    assert [doc for doc, _ in got] == [6, 3, 4, 2]
    assert [score for _, score in got] == pytest.approx([1.0, 1.0, 0.96, 0.8], abs=1e-6)
    assert [d for d, _ in search.top([0.0, 0.0, 1.0], 1)] == [5]
    assert [d for d, _ in search.top([1.0, 0.0, 0.0], 10)] == [1, 4, 6, 3, 5, 2]  # 2 and 5 tie at 0
    assert search.top([1.0, 0.0, 0.0], 0) == []
    with pytest.raises(RecallError, match="query vector has 2 dimensions"):
        search.top([1.0, 0.0], 1)


@pytest.mark.parametrize("use_numpy", [True, False])
def test_refresh_tracks_changes(conn: sqlite3.Connection, use_numpy: bool) -> None:
    if use_numpy:
        pytest.importorskip("numpy", reason="numpy is an optional extra")
    search = VectorSearch("hand", use_numpy=use_numpy)
    assert search.refresh(conn) is True and search.top([1.0], 3) == []
    put(conn, {1: [1.0, 0.0], 2: [0.0, 1.0]})
    assert search.refresh(conn) is True and search.ids == [1, 2]
    assert search.refresh(conn) is False
    conn.execute("DELETE FROM vectors WHERE doc = 1")
    assert search.refresh(conn) is True and search.ids == [2]
    put(conn, {9: [0.5]})  # another length than the first vector read: skipped
    assert search.refresh(conn) is True and search.ids == [2]


def test_numpy_and_pure_top_k_agree_on_many_rows(conn: sqlite3.Connection) -> None:
    pytest.importorskip("numpy", reason="numpy is an optional extra")
    # 300 docs, many tied by pairs: the numpy path partitions, then orders ties to the higher doc id.
    table = {doc: [1.0 - (doc // 2) / 1000, (doc // 2) / 1000] for doc in range(1, 301)}
    put(conn, table)
    search = VectorSearch("hand")
    search.refresh(conn)
    pure = VectorSearch("hand", use_numpy=False)
    pure.refresh(conn)
    query = [1.0, 0.0]
    assert [d for d, _ in search.top(query, 5)] == [1, 3, 2, 5, 4]
    for k in (1, 2, 7, 64, 300, 500):
        assert [d for d, _ in search.top(query, k)] == [d for d, _ in pure.top(query, k)]


def test_module_has_no_numpy_import_at_top() -> None:
    assert "numpy" not in vectors.__dict__


@pytest.mark.parametrize("use_numpy", [True, False])
def test_neighbours_search_each_doc_in_its_context(conn: sqlite3.Connection, use_numpy: bool) -> None:
    if use_numpy:
        pytest.importorskip("numpy", reason="numpy is an optional extra")
    # Doc 2 answers the question doc 1 asks; doc 4 is alone with a weaker match.
    put(conn, {1: [1.0, 0.0, 0.0], 2: [0.0, 1.0, 0.0], 3: [0.0, 0.0, 1.0], 4: [0.6, 0.0, 0.8]})
    query = [1.0, 0.0, 0.0]
    plain = VectorSearch("hand", use_numpy=use_numpy)
    plain.refresh(conn)
    assert [d for d, _ in plain.top(query, 2)] == [1, 4]
    context = VectorSearch("hand", use_numpy=use_numpy, neighbours=0.5)
    context.refresh(conn)
    # In context: doc 1 = (1, 0.5, 0), doc 2 = (0.5, 1, 0.5), doc 3 = (0.3, 0.5, 1.4), doc 4 = (0.6, 0, 1.3).
    got = context.top(query, 4)
    assert [d for d, _ in got] == [1, 4, 2, 3]
    expected = [1 / 1.25**0.5, 0.6 / 2.05**0.5, 0.5 / 1.5**0.5, 0.3 / 2.3**0.5]
    assert [s for _, s in got] == pytest.approx(expected, abs=1e-5)
    with pytest.raises(ValueError, match="neighbours"):
        VectorSearch("hand", neighbours=-1.0)

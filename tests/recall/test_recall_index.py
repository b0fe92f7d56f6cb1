"""RecallIndex over real chunk files and index.yaml."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import aiden.recall.search as recall_search
from aiden.config import Config
from aiden.errors import ClosedError, CorruptionError, InvalidIdError, RecallError
from aiden.events import SessionEvent
from aiden.recall.index import BulkChunk, RecallIndex
from aiden.recall.tool import RecallContext, RecallHit, RecallStats, encode_hits
from aiden.storage.chunks import list_chunk_files
from aiden.storage.layout import Layout
from aiden.storage.protocol import ChangeToken, ChunkChanges
from aiden.storage.session import FileChangeFeed
from tests.recall.recall_helpers import SessionFiles, ev, found

OLD_NS = 1_000_000_000_000_000_000  # 2001-09-09: a chunks/ mtime the index may trust


def ids(hits: list[RecallHit]) -> list[str]:
    """Chunk ids of the hits, in order of first appearance."""
    return list(dict.fromkeys(h.chunk_id for h in hits))


def age_chunks_dir(files: SessionFiles) -> None:
    """Make chunks/ look untouched for a long time, so its mtime is trusted (not racy)."""
    os.utime(files.layout.chunks, ns=(OLD_NS, OLD_NS))


@pytest.fixture
def sample(files: SessionFiles) -> SessionFiles:
    files.write(
        "c1",
        [
            ev(1, "Please migrate the orders table to PostgreSQL", role="user", timestamp=100.0),
            ev(2, "I will run the 数据库迁移 script now", "assistant_output", role="assistant", timestamp=110.0),
        ],
        summary="User asked for a database migration to PostgreSQL.",
    )
    files.write(
        "c2",
        [
            ev(3, "Deploy the frontend to staging", role="user", timestamp=200.0),
            ev(4, "", "tool_call", role="assistant", tool_name="bash", tool_args='{"cmd": "make deploy"}'),
            ev(5, "deploy finished: build 4711 ok", "tool_result", role="tool", timestamp=210.0),
        ],
        summary="Frontend deployed to staging (build 4711).",
    )
    files.write(
        "c3",
        [
            ev(6, "用户偏好：回答请使用中文，并保持简洁。", role="user"),  # noqa: RUF001 - real Chinese punctuation
            ev(7, "好的，我会用中文回答。", "assistant_output"),  # noqa: RUF001
        ],
        summary="用户希望使用中文交流。",
    )
    return files


# --- search -------------------------------------------------------------------------

def test_english_search_returns_the_matching_event(sample: SessionFiles, index: RecallIndex) -> None:
    hits = index.search("postgresql migrate")
    assert found(hits) == [("c1", "event", 1)]
    hit = hits[0]
    assert hit.score > 0
    assert hit == RecallHit(
        chunk_id="c1",
        source="active",
        kind="event",
        score=hit.score,
        text="Please migrate the orders table to PostgreSQL",
        first_seq=1,
        last_seq=1,
        type="user_input",
        role="user",
        timestamp=100.0,
        # The reply after a user's words is the context.
        context=RecallContext(
            seq=2, type="assistant_output", role="assistant", text="I will run the 数据库迁移 script now"
        ),
    )
    assert hit.seq == 1


def test_tool_name_and_args_are_searchable(sample: SessionFiles, index: RecallIndex) -> None:
    hits = index.search("make deploy bash")
    # The tool call holds three of the words; the other two events one each (a tie: newest first).
    assert found(hits) == [("c2", "event", 4), ("c2", "event", 5), ("c2", "event", 3)]
    assert [h.type for h in hits] == ["tool_call", "tool_result", "user_input"]
    assert hits[0].text == 'bash\n{"cmd": "make deploy"}'
    assert hits[0].score > hits[1].score == hits[2].score


def test_chinese_queries_including_two_characters(sample: SessionFiles, index: RecallIndex) -> None:
    # 数据 sits inside 数据库迁移: unicode61 alone would index the run as one token.
    assert found(index.search("数据")) == [("c1", "event", 2)]
    assert found(index.search("迁移")) == [("c1", "event", 2)]
    assert index.search("数据")[0].text == "I will run the 数据库迁移 script now"
    assert found(index.search("中文")) == [("c3", "event", 7), ("c3", "event", 6)]
    assert found(index.search("简洁")) == [("c3", "event", 6)]
    # The event with both words first.
    assert found(index.search("偏好 中文")) == [("c3", "event", 6), ("c3", "event", 7)]
    # Written without spaces and not verbatim in the text: its bigrams find it.
    assert found(index.search("数据库迁移失败")) == [("c1", "event", 2)]
    # Not adjacent in any text: the OR over its bigrams finds 数据.
    assert found(index.search("数据迁")) == [("c1", "event", 2)]
    assert index.search("据数") == []


def test_rare_term_ranks_first(files: SessionFiles, index: RecallIndex) -> None:
    for n in range(20):
        extra = " the xylophone incident" if n == 7 else ""
        banana = f"banana bread batch {n} for the team" if n % 3 == 0 else ""  # as long as the xylophone event
        files.write(
            f"k{n:02d}",
            [ev(n * 2 + 1, f"deploy service number {n}{extra}"), ev(n * 2 + 2, banana)],
            summary=f"deploy round {n}",
        )
    # The event with both words first; then the turn next to it (no word of the query: half its
    # score, above the events k is full of), the matches around it (two seqs away: a share of its
    # score), then events with the common word, newest first.
    assert found(index.search("deploy xylophone", k=5)) == [
        ("k07", "event", 15),
        ("k06", "event", 14),
        ("k08", "event", 17),
        ("k06", "event", 13),
        ("k19", "event", 39),
    ]
    # No event has both words: OR ranking, the rare word's event first, then the banana event
    # next to it, the turn between that one and the first (matching neither word: shares of both),
    # then ties newest first.
    hits = index.search("xylophone banana", k=5)
    assert found(hits) == [
        ("k07", "event", 15),
        ("k06", "event", 14),
        ("k06", "event", 13),
        ("k18", "event", 38),
        ("k15", "event", 32),
    ]
    assert hits[0].score > hits[1].score > hits[2].score > hits[3].score == hits[4].score


def test_terms_may_match_in_different_events_of_a_chunk(files: SessionFiles, index: RecallIndex) -> None:
    files.write("a", [ev(1, "stripe webhook configured"), ev(2, "secret stored in vault")], summary="payments")
    files.write("b", [ev(3, "stripe webhook secret rotated")], summary="rotation")
    files.write("c", [ev(4, "stripe checkout page")], summary="checkout")
    hits = index.search("stripe webhook secret")
    # Each event is ranked on its own: both of a's events are found, below the event holding all three.
    assert found(hits) == [("b", "event", 3), ("a", "event", 1), ("a", "event", 2), ("c", "event", 4)]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len({h.score for h in hits}) == 4


def test_no_match_and_empty_queries(sample: SessionFiles, index: RecallIndex) -> None:
    assert index.search("nonexistentword") == []
    assert index.search("") == []
    assert index.search("   ") == []


def test_empty_session_and_missing_session(tmp_path: Path, config: Config) -> None:
    idx = RecallIndex(SessionFiles(tmp_path).layout, config)
    assert idx.search("anything") == []
    assert idx.lookup("c1") is None
    idx.close()
    bare = RecallIndex(SessionFiles(tmp_path / "elsewhere").layout, config)
    shutil.rmtree(tmp_path / "elsewhere" / "memory")
    assert bare.search("anything") == []
    assert bare.stats().chunks_indexed == 0
    bare.close()


HOSTILE_QUERIES = [
    '"',
    '""',
    '"unterminated',
    "*",
    "migrate*",
    "NEAR(",
    "NEAR(migrate postgresql, 2)",
    "AND",
    "OR OR",
    "NOT",
    "migrate NOT postgresql",
    "text:migrate",
    "{text}: migrate",
    "^migrate",
    "(",
    ")",
    "(migrate",
    "-migrate",
    "+",
    "\x00",
    "migrate\x00postgresql",
    "\ud800",
    "'; DROP TABLE chunks; --",
    "x" * 100_000,
    "migrate " * 5000,
    "\u200b\u200b",
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_queries_are_plain_text(sample: SessionFiles, index: RecallIndex, query: str) -> None:
    hits = index.search(query)
    assert isinstance(hits, list)
    # Whatever the syntax-looking text, words still search as words.
    if "migrate" in query:
        assert ids(hits) == ["c1"]
    assert index.stats().chunks_indexed == 3


def test_hostile_query_results_are_exact(sample: SessionFiles, index: RecallIndex) -> None:
    assert index.search('"') == []
    assert index.search("NEAR(") == []
    assert index.search("x" * 100_000) == []
    assert ids(index.search('"postgresql"')) == ["c1"]
    assert ids(index.search("text:staging")) == ["c2"]


def test_bad_arguments_raise_recall_error(sample: SessionFiles, index: RecallIndex) -> None:
    bad: list[dict[str, Any]] = [
        {"k": 0},
        {"k": -1},
        {"k": True},
        {"types": ["bogus"]},
        {"types": "user_input"},
        {"roles": [1]},
        {"since": float("nan")},
        {"until": "yesterday"},
    ]
    for kwargs in bad:
        with pytest.raises(RecallError):
            index.search("migrate", **kwargs)
    with pytest.raises(RecallError):
        index.search(b"migrate")  # type: ignore[arg-type]


# --- filters -------------------------------------------------------------------------

@pytest.fixture
def kiwi(files: SessionFiles) -> SessionFiles:
    files.write(
        "f1",
        [
            ev(1, "kiwi from the user", role="user", timestamp=100.0),
            ev(2, "kiwi reply", "assistant_output", role="assistant", timestamp=200.0),
            ev(3, "more kiwi reply", "assistant_output", role="assistant", timestamp=210.0),
            ev(4, "unrelated", "tool_call", role="assistant", tool_name="grep", timestamp=220.0),
            ev(5, "kiwi in output", "tool_result", role="tool", timestamp=300.0),
            ev(6, "kiwi again", "tool_result", role="tool", timestamp=310.0),
        ],
        summary="fruit talk",
    )
    files.write("f2", [ev(7, "nothing relevant", timestamp=400.0)], summary="kiwi only in this summary")
    return files


def test_each_matching_event_is_its_own_hit(kiwi: SessionFiles, index: RecallIndex) -> None:
    hits = index.search("kiwi", k=10)[:5]
    # No merging into spans: every matching event is a hit, best first: BM25 (here nearly nil: kiwi
    # is in most rows) plus shares of the matching events one and two seqs away.
    assert found(hits) == [
        ("f1", "event", 5),
        ("f1", "event", 3),
        ("f1", "event", 1),
        ("f1", "event", 6),
        ("f1", "event", 2),
    ]
    assert [h.text for h in hits] == ["kiwi in output", "more kiwi reply", "kiwi from the user", "kiwi again", "kiwi reply"]
    assert [(h.first_seq, h.last_seq) for h in hits] == [(5, 5), (3, 3), (1, 1), (6, 6), (2, 2)]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # f1's events matched: its summary is not a hit, and f2's summary only when events leave room.
    assert found(index.search("kiwi", k=5)) == found(hits)
    assert found(index.search("kiwi", k=10)) == [*found(hits), ("f2", "summary", 7)]


def test_filters_by_type_role_and_time(kiwi: SessionFiles, index: RecallIndex) -> None:
    assert found(index.search("kiwi", types=["tool_result"])) == [("f1", "event", 6), ("f1", "event", 5)]
    assert found(index.search("kiwi", roles=["assistant"])) == [("f1", "event", 2), ("f1", "event", 3)]
    assert found(index.search("kiwi", roles=["user", "tool"])) == [
        ("f1", "event", 6),
        ("f1", "event", 5),
        ("f1", "event", 1),
    ]
    assert index.search("kiwi", types=["user_input"], roles=["assistant"]) == []
    # f2's only event is after 205 but does not match; its summary does, and events leave room.
    assert found(index.search("kiwi", since=205.0)) == [
        ("f1", "event", 5),
        ("f1", "event", 6),
        ("f1", "event", 3),
        ("f2", "summary", 7),
    ]
    assert found(index.search("kiwi", until=150.0)) == [("f1", "event", 1)]
    assert index.search("kiwi", since=500.0) == []
    assert index.search("kiwi", since=300.0, until=100.0) == []
    assert found(index.search("kiwi", types=[])) == found(index.search("kiwi"))


def test_time_filter_keeps_summaries_of_overlapping_chunks(kiwi: SessionFiles, index: RecallIndex) -> None:
    hits = index.search("kiwi", since=350.0)
    assert found(hits) == [("f2", "summary", 7)]
    assert hits[0].text == "kiwi only in this summary"
    assert (hits[0].first_seq, hits[0].last_seq, hits[0].type, hits[0].role, hits[0].seq) == (7, 7, None, None, None)
    # A type or role filter never matches a summary.
    assert index.search("kiwi", types=["user_input"], since=350.0) == []


# --- output bounds -------------------------------------------------------------------------

def test_results_are_bounded(files: SessionFiles) -> None:
    for n in range(8):
        files.write(
            f"m{n}",
            [ev(n * 3 + i + 1, ("filler words " * 20) + f"mango {n} " + "tail " * 30) for i in range(3)],
            summary=("summary of mango talks " * 50) + str(n),
        )
    for budget, expected, cut in [
        (300, [("m7", "event", 24)], [True]),
        (1000, [("m7", "event", 24), ("m6", "event", 21)], [False, False]),
    ]:
        idx = RecallIndex(files.layout, Config(recall_max_results=3, recall_max_chars=budget))
        try:
            hits = idx.search("mango")
            # The three identical events of a chunk are shown once; the JSON answer fits the budget,
            # packed best first (whole while it fits, then cut around the match).
            assert found(hits) == expected
            assert len(encode_hits(hits)) <= budget
            assert [h.truncated for h in hits] == cut
            for hit in hits:
                if hit.truncated:
                    assert hit.text.startswith("…") or hit.text.endswith("…")
                assert f"mango {hit.chunk_id[1]}" in hit.text
                assert len(hit.text) >= 120
            assert len(idx.search("mango", k=100)) == len(expected)
        finally:
            idx.close()
    idx = RecallIndex(files.layout, Config(recall_max_results=3, recall_max_chars=1000))
    try:
        assert found(idx.search("mango", k=2)) == [("m7", "event", 24), ("m6", "event", 21)]
        assert found(idx.search("mango", k=1)) == [("m7", "event", 24)]
    finally:
        idx.close()
    # With room, texts are verbatim (not truncated) and each hit has its neighbour.
    idx = RecallIndex(files.layout, Config(recall_max_results=3))
    try:
        hits = idx.search("mango")
        assert [(h.truncated, h.text) for h in hits] == [
            (False, ("filler words " * 20) + f"mango {n} " + "tail " * 30) for n in (7, 6, 5)
        ]
        assert [h.context.seq if h.context else None for h in hits] == [23, 20, 17]
    finally:
        idx.close()


def test_tiny_budget_still_bounded(files: SessionFiles) -> None:
    files.write("t1", [ev(1, "grape grape grape")], summary="a long summary about grapes")
    files.write("t2", [ev(2, "grapefruit " * 40 + "grape" + " peel" * 80)], summary="more")
    # Not even one hit fits: no results (the bare envelope is always the answer).
    for budget in (7, 14, 60):
        idx = RecallIndex(files.layout, Config(recall_max_results=5, recall_max_chars=budget))
        try:
            hits = idx.search("grape")
            assert hits == []
            assert encode_hits(hits) == '{"results":[]}'
        finally:
            idx.close()
    idx = RecallIndex(files.layout, Config(recall_max_results=5, recall_max_chars=180))
    try:
        hits = idx.search("grape")
        assert len(encode_hits(hits)) <= 180
        assert found(hits) == [("t1", "event", 1)]
        assert (hits[0].text, hits[0].truncated) == ("grape grape grape", False)
        idx_wide = RecallIndex(files.layout, Config(recall_max_results=5, recall_max_chars=450))
        try:
            wide = idx_wide.search("grape")
            assert len(encode_hits(wide)) <= 450
            assert found(wide) == [("t1", "event", 1), ("t2", "event", 2)]
            assert wide[1].truncated is True
            assert "grape" in wide[1].text.replace("grapefruit", "")
        finally:
            idx_wide.close()
    finally:
        idx.close()


# --- pending vs active -------------------------------------------------------------------

def test_pending_chunk_then_committed(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "an ordinary chunk")], summary="ordinary")
    # Written by a compaction that has not committed index.yaml yet.
    entry = files.write("active-looking-id", [ev(2, "walrus sighting reported")], summary="walrus", commit=False)
    hits = index.search("walrus")
    assert [(h.chunk_id, h.source) for h in hits] == [("active-looking-id", "pending")]
    assert found(hits) == [("active-looking-id", "event", 2)]
    assert hits[0].text == "walrus sighting reported"
    assert index.stats() == RecallStats(
        recall_calls=1, results_returned=1, pending_chunks_recalled=1, rebuilds=1, chunks_indexed=2
    )
    lookup = index.lookup("active-looking-id")
    assert lookup is not None and (lookup.source, lookup.kind, lookup.text) == ("pending", "summary", "walrus")
    files.commit(entry)
    assert [(h.chunk_id, h.source) for h in index.search("walrus")] == [("active-looking-id", "active")]
    stats = index.stats()
    assert (stats.recall_calls, stats.results_returned, stats.pending_chunks_recalled) == (3, 3, 2)
    assert stats.rebuilds == 1


def test_pending_source_is_never_inferred_from_the_id(files: SessionFiles, index: RecallIndex) -> None:
    files.write("pending-0001", [ev(1, "committed narwhal")], summary="committed with a pending-looking id")
    files.write("chunk_0000000002_0000000002", [ev(2, "uncommitted narwhal")], commit=False)
    got = {h.chunk_id: h.source for h in index.search("narwhal")}
    assert got == {"pending-0001": "active", "chunk_0000000002_0000000002": "pending"}
    assert index.stats().pending_chunks_recalled == 1


def test_pending_chunk_that_disappears_is_removed(files: SessionFiles, index: RecallIndex) -> None:
    files.write("p1", [ev(1, "ephemeral ocelot")], commit=False)
    assert ids(index.search("ocelot")) == ["p1"]
    files.layout.chunk_file("p1").unlink()
    assert index.search("ocelot") == []
    assert index.lookup("p1") is None
    assert index.stats().chunks_indexed == 0


def test_rewritten_pending_file_is_reindexed(files: SessionFiles, index: RecallIndex) -> None:
    files.write("p1", [ev(1, "first draft gazelle")], commit=False)
    assert ids(index.search("gazelle")) == ["p1"]
    files.write("p1", [ev(1, "second draft antelope")], commit=False)
    assert index.search("gazelle") == []
    assert ids(index.search("antelope")) == ["p1"]


def test_temp_files_and_segments_are_not_chunks(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "real chunk")])
    (files.layout.chunks / ".aiden-tmp-c9.jsonl.1.abc").write_bytes(b"half written platypus")
    assert index.search("platypus") == []
    assert index.stats().chunks_indexed == 1


def test_segments_are_indexed_and_trusted(files: SessionFiles, index: RecallIndex) -> None:
    from aiden.storage.chunks import ChunkIndex, save_index, seal_segments

    entries = [files.write(f"s{n:02d}", [ev(n + 1, f"sealed event {n} lemur{n}")], commit=False) for n in range(40)]
    sealed = seal_segments(files.storage, files.layout, ChunkIndex(chunks=entries), keep_live=4)
    assert len(sealed.segments) == 1 and len(sealed.chunks) == 8
    save_index(files.storage, files.layout, sealed)
    assert ids(index.search("lemur3")) == ["s03"]
    assert index.search("lemur3")[0].source == "active"
    assert ids(index.search("lemur39")) == ["s39"]
    assert index.stats().chunks_indexed == 40


# --- sync cost, rebuilds ------------------------------------------------------------------------

class CountingFeed(FileChangeFeed):
    """The file feed, counting the answers that had to read the files (not just stat them)."""

    def __init__(self, layout: Layout) -> None:
        super().__init__(layout)
        self.reads = 0

    def chunks_since(self, token: ChangeToken | None) -> ChunkChanges:
        changes = super().chunks_since(token)
        self.reads += changes.pending is not None
        return changes


def test_sync_is_cheap_when_nothing_changed(sample: SessionFiles, config: Config) -> None:
    age_chunks_dir(sample)
    feed = CountingFeed(sample.layout)
    index = RecallIndex(feed, config, db_path=sample.layout.recall_db)
    index.sync()
    feed.reads = 0
    for _ in range(3):
        assert ids(index.search("staging")) == ["c2"]
    assert feed.reads == 0
    sample.write("c4", [ev(8, "staging again")], summary="more staging")
    assert sorted(ids(index.search("staging"))) == ["c2", "c4"]
    assert feed.reads == 1
    # The feed's token is stored in the database: a reopened index does no work either.
    age_chunks_dir(sample)
    index.sync()
    index.close()
    feed = CountingFeed(sample.layout)
    again = RecallIndex(feed, config, db_path=sample.layout.recall_db)
    try:
        assert sorted(ids(again.search("staging"))) == ["c2", "c4"]
        assert feed.reads == 0
        assert again.stats().rebuilds == 0
    finally:
        again.close()


def test_racy_directory_mtime_is_not_trusted(sample: SessionFiles, config: Config) -> None:
    feed = CountingFeed(sample.layout)
    index = RecallIndex(feed, config, db_path=sample.layout.recall_db)
    index.sync()
    os.utime(sample.layout.chunks)  # chunks/ modified just now
    feed.reads = 0
    index.search("staging")
    index.search("staging")
    assert feed.reads == 2  # a change within the same mtime tick could hide: checked each time
    index.close()


def test_rebuild_after_db_deleted_while_open(sample: SessionFiles, index: RecallIndex) -> None:
    assert ids(index.search("staging")) == ["c2"]
    assert index.stats().rebuilds == 1
    for suffix in ("", "-wal", "-shm"):
        Path(str(sample.layout.recall_db) + suffix).unlink(missing_ok=True)
    assert ids(index.search("staging")) == ["c2"]
    assert index.stats().rebuilds == 2
    assert index.last_rebuild_reason == "missing"
    assert sample.layout.recall_db.exists()


def test_rebuild_after_garbage_db(sample: SessionFiles, config: Config) -> None:
    first = RecallIndex(sample.layout, config)
    assert ids(first.search("staging")) == ["c2"]
    first.close()
    for suffix in ("-wal", "-shm"):
        Path(str(sample.layout.recall_db) + suffix).unlink(missing_ok=True)
    sample.layout.recall_db.write_bytes(os.urandom(3000))
    idx = RecallIndex(sample.layout, config)
    try:
        assert ids(idx.search("staging")) == ["c2"]
        assert idx.stats().rebuilds == 1
        assert idx.last_rebuild_reason == "corrupt"
    finally:
        idx.close()


def test_rebuild_after_corrupt_pages(sample: SessionFiles, config: Config) -> None:
    first = RecallIndex(sample.layout, config)
    first.search("staging")
    first.close()  # checkpoints the WAL into the main file
    db_path = sample.layout.recall_db
    data = bytearray(db_path.read_bytes())
    assert len(data) > 8192
    data[4096:] = os.urandom(len(data) - 4096)  # keep the header page, trash the rest
    db_path.write_bytes(bytes(data))
    idx = RecallIndex(sample.layout, config)
    try:
        assert ids(idx.search("staging")) == ["c2"]
        assert ids(idx.search("数据")) == ["c1"]
        assert idx.stats().rebuilds == 1
        assert idx.last_rebuild_reason == "corrupt"
    finally:
        idx.close()


def test_rebuild_on_other_schema_version(sample: SessionFiles, config: Config) -> None:
    first = RecallIndex(sample.layout, config)
    first.sync()
    first.close()
    db = sqlite3.connect(sample.layout.recall_db)
    db.execute("PRAGMA user_version = 999")
    db.close()
    idx = RecallIndex(sample.layout, config)
    try:
        assert ids(idx.search("staging")) == ["c2"]
        assert idx.last_rebuild_reason == "schema"
    finally:
        idx.close()


def test_out_of_date_db_rebuilt_when_index_changes(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "original giraffe text")], summary="giraffe")
    files.write("c2", [ev(2, "other chunk")], summary="other")
    assert ids(index.search("giraffe")) == ["c1"]
    # A new chunk is incremental work, not a rebuild.
    files.write("c3", [ev(3, "new hippo")], summary="hippo")
    assert ids(index.search("hippo")) == ["c3"]
    assert index.stats().rebuilds == 1
    # The same id now names different content (new sha256 in index.yaml).
    new = files.write("c1", [ev(1, "rewritten rhinoceros text")], summary="rhino", commit=False)
    files.committed = [new if e.chunk_id == "c1" else e for e in files.committed]
    files.save()
    assert ids(index.search("rhinoceros")) == ["c1"]
    assert index.search("giraffe") == []
    assert index.stats().rebuilds == 2
    assert index.last_rebuild_reason == "out_of_date"


def test_summary_change_is_reindexed(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "some text")], summary="old summary about otters")
    assert ids(index.search("otters")) == ["c1"]
    files.replace_entry("c1", summary="new summary about beavers")
    assert index.search("otters") == []
    assert ids(index.search("beavers")) == ["c1"]
    assert index.stats().rebuilds == 1


def test_removed_entries_leave_the_index(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "keep me")])
    files.write("c2", [ev(2, "drop me")])
    assert index.stats().chunks_indexed == 0
    index.sync()
    assert index.stats().chunks_indexed == 2
    files.committed = files.committed[:1]
    files.save()
    files.layout.chunk_file("c2").unlink()
    assert index.search("drop") == []
    assert index.stats().chunks_indexed == 1


def test_corrupt_chunk_files_are_skipped_and_reported(files: SessionFiles, index: RecallIndex) -> None:
    files.write("good", [ev(1, "healthy llama")], summary="llama")
    files.write("bad", [ev(2, "broken llama")], summary="broken")
    files.write("badpending", [ev(3, "pending llama")], commit=False)
    for name in ("bad", "badpending"):
        path = files.layout.chunk_file(name)
        raw = bytearray(path.read_bytes())
        raw[-5] ^= 0x20  # flip one bit in the last event line
        path.write_bytes(bytes(raw))
    assert ids(index.search("llama")) == ["good"]
    assert sorted(index.problems) == [
        "chunk file bad.jsonl: checksum mismatch",
        "pending chunk file badpending.jsonl: checksum mismatch",
    ]
    assert index.stats().problems == tuple(index.problems)


def test_corrupt_index_yaml_raises_recall_error(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "text")])
    files.layout.index.write_text("chunks: !!python/object:os.system {}\n")
    with pytest.raises(RecallError, match=r"index\.yaml"):
        index.search("text")


def test_rehydrate_verifies_and_filters(sample: SessionFiles, index: RecallIndex) -> None:
    events = index.rehydrate("c2")
    assert [e.seq for e in events] == [3, 4, 5]
    assert events[1] == SessionEvent(
        type="tool_call", seq=4, role="assistant", tool_name="bash", tool_args='{"cmd": "make deploy"}'
    )
    assert [e.content for e in index.rehydrate("c2", [5, 3, 99])] == [
        "Deploy the frontend to staging",
        "deploy finished: build 4711 ok",
    ]
    assert index.rehydrate("c2", []) == []
    with pytest.raises(RecallError, match="unknown chunk"):
        index.rehydrate("nope")
    with pytest.raises(RecallError):
        index.rehydrate("c2", ["5"])  # type: ignore[list-item]
    # Corrupted after indexing: verified on read, never returned.
    path = sample.layout.chunk_file("c2")
    path.write_bytes(path.read_bytes().replace(b"4711", b"4712"))
    with pytest.raises(CorruptionError):
        index.rehydrate("c2")


def test_lookup(sample: SessionFiles, index: RecallIndex) -> None:
    hit = index.lookup("c3")
    assert hit == RecallHit(
        chunk_id="c3", source="active", kind="summary", score=0.0, text="用户希望使用中文交流。", first_seq=6, last_seq=7
    )
    assert hit.seq is None
    assert index.lookup("unknown") is None
    assert index.stats().recall_calls == 2
    assert index.stats().results_returned == 1


HOSTILE_IDS = ["../x", "../../etc/passwd", "/etc/passwd", "a\x00b", "x" * 65, "", "a/b", "..", "c1.jsonl", " c1"]


@pytest.mark.parametrize("bad_id", HOSTILE_IDS)
def test_hostile_ids_are_rejected(sample: SessionFiles, index: RecallIndex, bad_id: str) -> None:
    with pytest.raises(InvalidIdError):
        index.lookup(bad_id)
    with pytest.raises(InvalidIdError):
        index.rehydrate(bad_id)


def test_symlink_out_of_root_is_rejected(sample: SessionFiles, index: RecallIndex, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.jsonl"
    real = sample.layout.chunk_file("c1").read_bytes()
    outside.write_bytes(real.replace(b'"c1"', b'"evil"'))
    os.symlink(outside, sample.layout.chunk_file("evil"))
    with pytest.raises(InvalidIdError):
        index.lookup("evil")
    with pytest.raises(InvalidIdError):
        index.rehydrate("evil")
    assert "evil" not in ids(index.search("postgresql"))
    assert any("evil" in p and "outside the memory root" in p for p in index.problems)


def test_archived_sessions_are_never_searched(files: SessionFiles, index: RecallIndex, tmp_path_factory: pytest.TempPathFactory) -> None:
    files.write("c1", [ev(1, "current session talk")])
    other = SessionFiles(tmp_path_factory.mktemp("old"))
    other.write("c1", [ev(1, "zanzibarquux archived secret")], summary="zanzibarquux")
    other.write("old2", [ev(2, "zanzibarquux pending in archive")], commit=False)
    files.layout.archive.mkdir(parents=True)
    shutil.move(str(other.layout.session), str(files.layout.archive / "old"))
    assert (files.layout.archive / "old" / "chunks" / "c1.jsonl").exists()
    assert index.search("zanzibarquux") == []
    assert index.lookup("old2") is None
    assert ids(index.search("current")) == ["c1"]


def test_rotation_reopens_the_new_session_db(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "before rotation pelican")])
    assert ids(index.search("pelican")) == ["c1"]
    files.layout.archive.mkdir(parents=True)
    os.rename(files.layout.session, files.layout.archive / "s1")
    files.layout.session.mkdir()
    assert index.search("pelican") == []
    fresh = SessionFiles(files.root)
    fresh.write("n1", [ev(1, "after rotation heron")])
    assert ids(index.search("heron")) == ["n1"]
    assert index.search("pelican") == []
    assert not list((files.layout.archive / "s1").glob("recall.sqlite3-journal"))


def test_closed_index_refuses_calls(sample: SessionFiles, index: RecallIndex) -> None:
    index.close()
    index.close()
    with pytest.raises(ClosedError):
        index.search("x")
    with pytest.raises(ClosedError):
        index.stats()


def test_calls_from_several_threads(sample: SessionFiles, index: RecallIndex) -> None:
    import threading

    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(20):
                assert ids(index.search("staging")) == ["c2"]
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert index.stats().recall_calls == 80


# --- large match sets: bounded work ------------------------------------------------------------

def bulk(n: int, common: str, rare_at: int) -> list[BulkChunk]:
    # Three seqs apart: no event lends its score to another (search.SPREAD reaches two).
    out = []
    for i in range(n):
        words = f"{common} filler{i}" + (" unicornword" if i == rare_at else "")
        out.append(
            BulkChunk(
                chunk_id=f"b{i:04d}",
                sha256="0" * 64,
                summary=f"bulk {i}",
                events=[SessionEvent(type="user_input", content=words, seq=i * 3 + 1, timestamp=float(i))],
            )
        )
    return out


@pytest.mark.parametrize("window", [10, 300])
def test_common_terms_use_windows_and_coverage_checks(
    files: SessionFiles, index: RecallIndex, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    # window=10: "commonword" (200 rows) is far beyond the exact budget; whether
    # the old event holding "unicornword" also has "commonword" takes a rowid
    # lookup. window=300: every row fits, everything is ranked with bm25().
    monkeypatch.setattr(recall_search, "EXACT_ROWS", window)
    monkeypatch.setattr(recall_search, "_WINDOW", window)
    monkeypatch.setattr(recall_search, "_CANDIDATES", min(window, 30))
    index.sync()
    assert index.bulk_load(bulk(200, "commonword", rare_at=3)) == 200
    newest = [("b0199", "event", 598), ("b0198", "event", 595), ("b0197", "event", 592), ("b0196", "event", 589)]
    # The rare word's event is old: far outside the common word's window of newest rows.
    assert found(index.search("commonword unicornword", k=5)) == [("b0003", "event", 10), *newest]
    assert found(index.search("unicornword commonword", k=5)) == [("b0003", "event", 10), *newest]
    # A common word alone: the newest events, bounded.
    assert found(index.search("commonword", k=3)) == newest[:3]
    # No event has all three: OR ranking over what the bounded windows saw.
    assert found(index.search("commonword filler5 unicornword", k=2)) == [("b0005", "event", 16), ("b0003", "event", 10)]
    # Filters apply to every path.
    assert found(index.search("commonword unicornword", types=["user_input"], k=5)) == [("b0003", "event", 10), *newest]
    assert index.search("commonword unicornword", types=["tool_result"]) == []
    assert found(index.search("commonword unicornword", since=2.0, until=4.0)) == [
        ("b0003", "event", 10),
        ("b0004", "event", 13),
        ("b0002", "event", 7),
    ]
    # b0003 is outside the range: the common word's newest events in it.
    assert found(index.search("commonword unicornword", since=197.0)) == newest[:3]


def test_bulk_rows_stay_until_the_next_rebuild(files: SessionFiles, index: RecallIndex) -> None:
    index.sync()
    index.bulk_load(bulk(5, "bulkword", rare_at=-1))
    assert len(index.search("bulkword")) == 5
    files.write("c1", [ev(1, "real")])
    # The feed only appended a chunk: derived rows without a store behind them stay...
    assert len(index.search("bulkword")) == 5
    assert ids(index.search("real")) == ["c1"]
    # ...until the database is built again from the feed.
    for suffix in ("", "-wal", "-shm"):
        Path(str(files.layout.recall_db) + suffix).unlink(missing_ok=True)
    assert index.search("bulkword") == []
    assert ids(index.search("real")) == ["c1"]
    assert list_chunk_files(files.layout) == ["c1"]


def test_stats_type(sample: SessionFiles, index: RecallIndex) -> None:
    index.search("staging")
    stats = index.stats()
    assert stats == RecallStats(
        recall_calls=1, results_returned=1, pending_chunks_recalled=0, rebuilds=1, chunks_indexed=3
    )


def test_split_turn_context_and_degraded_flag(files: SessionFiles, index: RecallIndex) -> None:
    files.write(
        "s1",
        [ev(1, "history part")],
        summary="History summary.",
        split_turn_context="Prefix summary mentions the zebu import.",
        degraded=True,
    )
    hits = index.search("zebu")
    assert found(hits) == [("s1", "summary", 1)]
    assert hits[0].text == (
        "History summary.\n\n---\n\nTurn Context (split turn):\nPrefix summary mentions the zebu import."
    )
    assert hits[0].degraded is True
    assert (hits[0].type, hits[0].context, hits[0].last_seq) == (None, None, 1)


def test_random_queries_never_fail(sample: SessionFiles, index: RecallIndex) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    alphabet = st.sampled_from(list('abcdeimgrtsAND OR NOT NEAR()"*^:-+{}数据库迁移中文\x00\u200b\ud800\t\n'))

    @settings(max_examples=150, deadline=None)
    @given(st.text(alphabet, max_size=40), st.integers(min_value=1, max_value=10))
    def run(query: str, k: int) -> None:
        hits = index.search(query, k=k)
        assert len(hits) <= min(k, 5)
        assert len(encode_hits(hits)) <= 4800
        assert all(h.source == "active" for h in hits)

    run()


def test_reopen_and_repeated_sync_change_nothing(sample: SessionFiles, index: RecallIndex) -> None:
    index.sync()
    before = index.search("staging")
    index.sync()
    index.reopen()
    assert index.search("staging") == before
    assert index.stats().rebuilds == 1
    assert index.stats().chunks_indexed == 3


def test_directory_where_the_database_goes_is_moved_aside(sample: SessionFiles, config: Config) -> None:
    # [Reliability] finding 9: this failed every recall forever ("cannot remove the recall database").
    db = sample.layout.recall_db
    db.mkdir()
    (db / "keep.txt").write_text("someone's file")
    idx = RecallIndex(sample.layout, config)
    try:
        assert ids(idx.search("staging")) == ["c2"]
        assert idx.last_rebuild_reason == "corrupt"
        (aside,) = [p for p in db.parent.iterdir() if p.name.startswith("recall.sqlite3.displaced-")]
        assert (aside / "keep.txt").read_text() == "someone's file"
        assert db.is_file()
    finally:
        idx.close()

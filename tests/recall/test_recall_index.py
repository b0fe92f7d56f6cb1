"""RecallIndex over real chunk files and index.yaml."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import aiden.recall.search as recall_search
import aiden.recall.sync as recall_sync
from aiden.config import Config
from aiden.errors import ClosedError, CorruptionError, InvalidIdError, RecallError
from aiden.events import SessionEvent
from aiden.recall import BulkChunk, RecallContext, RecallHit, RecallIndex, RecallStats
from aiden.storage.chunks import list_chunk_files, load_index
from tests.recall.recall_helpers import SessionFiles, ev

OLD_NS = 1_000_000_000_000_000_000  # 2001-09-09: a chunks/ mtime the index may trust


def ids(hits: list[RecallHit]) -> list[str]:
    """Chunk ids of the hits, in order of first appearance."""
    return list(dict.fromkeys(h.chunk_id for h in hits))


def found(hits: list[RecallHit]) -> list[tuple[str, str, int]]:
    """(chunk_id, kind, first_seq) of every hit, best first."""
    return [(h.chunk_id, h.kind, h.first_seq) for h in hits]


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

def test_english_search_returns_exact_spans(sample: SessionFiles, index: RecallIndex) -> None:
    hits = index.search("postgresql migrate")
    assert ids(hits) == ["c1"]
    hit = hits[0]
    assert hit.source == "active"
    assert hit.summary == "User asked for a database migration to PostgreSQL."
    assert (hit.first_seq, hit.last_seq) == (1, 2)
    assert hit.spans == (
        EventSpan(
            first_seq=1,
            last_seq=1,
            type="user_input",
            role="user",
            snippet="Please migrate the orders table to PostgreSQL",
        ),
    )
    assert hit.matched_events == 1
    assert hit.score > 0


def test_tool_name_and_args_are_searchable(sample: SessionFiles, index: RecallIndex) -> None:
    hits = index.search("make deploy bash")
    assert ids(hits) == ["c2"]
    assert [(s.first_seq, s.last_seq, s.type) for s in hits[0].spans] == [
        (3, 3, "user_input"),
        (4, 4, "tool_call"),
        (5, 5, "tool_result"),
    ]
    assert hits[0].spans[1].snippet == 'bash {"cmd": "make deploy"}'


def test_chinese_queries_including_two_characters(sample: SessionFiles, index: RecallIndex) -> None:
    # 数据 sits inside 数据库迁移: unicode61 alone would index the run as one token.
    assert ids(index.search("数据")) == ["c1"]
    assert ids(index.search("迁移")) == ["c1"]
    assert index.search("数据")[0].spans[0].snippet == "I will run the 数据库迁移 script now"
    assert ids(index.search("中文")) == ["c3"]
    assert ids(index.search("简洁")) == ["c3"]
    assert ids(index.search("偏好 中文")) == ["c3"]
    # Written without spaces and not verbatim in the text: the bigram fallback finds it.
    assert ids(index.search("数据库迁移失败")) == ["c1"]
    # Not adjacent in any text: the OR fallback over its bigrams finds 数据.
    assert ids(index.search("数据迁")) == ["c1"]
    assert ids(index.search("据数")) == []


def test_rare_term_ranks_first(files: SessionFiles, index: RecallIndex) -> None:
    for n in range(20):
        extra = " the xylophone incident" if n == 7 else ""
        files.write(
            f"k{n:02d}",
            [ev(n * 2 + 1, f"deploy service number {n}{extra}"), ev(n * 2 + 2, "banana " * (n % 3 == 0))],
            summary=f"deploy round {n}",
        )
    assert ids(index.search("deploy xylophone")) == ["k07"]
    # No chunk has both words: OR ranking, the rare word's chunk first.
    hits = index.search("xylophone banana", k=5)
    assert hits[0].chunk_id == "k07"
    assert len(hits) == 5
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_terms_may_match_in_different_events_of_a_chunk(files: SessionFiles, index: RecallIndex) -> None:
    files.write("a", [ev(1, "stripe webhook configured"), ev(2, "secret stored in vault")], summary="payments")
    files.write("b", [ev(3, "stripe webhook secret rotated")], summary="rotation")
    files.write("c", [ev(4, "stripe checkout page")], summary="checkout")
    assert sorted(ids(index.search("stripe webhook secret"))) == ["a", "b"]


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


def spans(hits: list[RecallHit]) -> list[tuple[str, int, int, str]]:
    return [(h.chunk_id, s.first_seq, s.last_seq, s.type) for h in hits for s in h.spans]


def test_consecutive_matches_merge_into_spans(kiwi: SessionFiles, index: RecallIndex) -> None:
    hits = index.search("kiwi")
    assert sorted(ids(hits)) == ["f1", "f2"]
    assert sorted(spans(hits)) == [
        ("f1", 1, 1, "user_input"),
        ("f1", 2, 3, "assistant_output"),
        ("f1", 5, 6, "tool_result"),
    ]
    assert {h.chunk_id: h.matched_events for h in hits} == {"f1": 5, "f2": 0}


def test_filters_by_type_role_and_time(kiwi: SessionFiles, index: RecallIndex) -> None:
    assert spans(index.search("kiwi", types=["tool_result"])) == [("f1", 5, 6, "tool_result")]
    assert spans(index.search("kiwi", roles=["assistant"])) == [("f1", 2, 3, "assistant_output")]
    assert spans(index.search("kiwi", roles=["user", "tool"])) == [
        ("f1", 1, 1, "user_input"),
        ("f1", 5, 6, "tool_result"),
    ]
    assert spans(index.search("kiwi", types=["user_input"], roles=["assistant"])) == []
    assert sorted(ids(index.search("kiwi", since=205.0))) == ["f1", "f2"]
    assert spans(index.search("kiwi", since=205.0)) == [
        ("f1", 3, 3, "assistant_output"),
        ("f1", 5, 6, "tool_result"),
    ]
    assert ids(index.search("kiwi", until=150.0)) == ["f1"]
    assert spans(index.search("kiwi", until=150.0)) == [("f1", 1, 1, "user_input")]
    assert index.search("kiwi", since=500.0) == []
    assert index.search("kiwi", since=300.0, until=100.0) == []
    assert ids(index.search("kiwi", types=[])) == ids(index.search("kiwi"))


def test_time_filter_keeps_summaries_of_overlapping_chunks(kiwi: SessionFiles, index: RecallIndex) -> None:
    hits = index.search("kiwi", since=350.0)
    assert ids(hits) == ["f2"]
    assert hits[0].spans == ()
    # A type or role filter never matches a summary.
    assert ids(index.search("kiwi", types=["user_input"], since=350.0)) == []


# --- output bounds -------------------------------------------------------------------------

def test_results_are_bounded(files: SessionFiles) -> None:
    cfg = Config(recall_max_results=3, recall_max_chars=300, recall_snippet_chars=40)
    for n in range(8):
        files.write(
            f"m{n}",
            [ev(n * 3 + i + 1, ("filler words " * 20) + f"mango {n} " + "tail " * 30) for i in range(3)],
            summary=("summary of mango talks " * 50) + str(n),
        )
    idx = RecallIndex(files.layout, cfg)
    try:
        hits = idx.search("mango")
        assert len(hits) == 3
        total = sum(len(h.summary) + sum(len(s.snippet) for s in h.spans) for h in hits)
        assert total <= 300
        assert all(len(s.snippet) <= 40 and "mango" in s.snippet for h in hits for s in h.spans)
        assert all(h.summary.endswith("…") for h in hits)
        assert len(idx.search("mango", k=100)) == 3
        assert len(idx.search("mango", k=2)) == 2
        assert len(idx.search("mango", k=1)) == 1
    finally:
        idx.close()


def test_tiny_budget_still_bounded(files: SessionFiles) -> None:
    cfg = Config(recall_max_results=5, recall_max_chars=7, recall_snippet_chars=3)
    files.write("t1", [ev(1, "grape grape grape")], summary="a long summary about grapes")
    idx = RecallIndex(files.layout, cfg)
    try:
        hits = idx.search("grape")
        assert ids(hits) == ["t1"]
        assert len(hits[0].summary) + sum(len(s.snippet) for s in hits[0].spans) <= 7
        assert hits[0].spans[0].snippet == "gr…"
    finally:
        idx.close()


# --- pending vs active -------------------------------------------------------------------

def test_pending_chunk_then_committed(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "an ordinary chunk")], summary="ordinary")
    # Written by a compaction that has not committed index.yaml yet.
    entry = files.write("active-looking-id", [ev(2, "walrus sighting reported")], summary="walrus", commit=False)
    hits = index.search("walrus")
    assert [(h.chunk_id, h.source) for h in hits] == [("active-looking-id", "pending")]
    assert hits[0].summary == "walrus"
    assert index.stats() == RecallStats(
        recall_calls=1, results_returned=1, pending_chunks_recalled=1, rebuilds=1, chunks_indexed=2
    )
    lookup = index.lookup("active-looking-id")
    assert lookup is not None and lookup.source == "pending"
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

class CountingLoad:
    def __init__(self) -> None:
        self.calls = 0
        self.real = load_index

    def __call__(self, layout: Any) -> Any:
        self.calls += 1
        return self.real(layout)


def test_sync_is_cheap_when_nothing_changed(
    sample: SessionFiles, index: RecallIndex, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    age_chunks_dir(sample)
    index.sync()
    counter = CountingLoad()
    monkeypatch.setattr(recall_sync, "load_index", counter)
    for _ in range(3):
        assert ids(index.search("staging")) == ["c2"]
    assert counter.calls == 0
    sample.write("c4", [ev(8, "staging again")], summary="more staging")
    assert sorted(ids(index.search("staging"))) == ["c2", "c4"]
    assert counter.calls == 1
    # The signature is stored in the database: a reopened index does no work either.
    age_chunks_dir(sample)
    index.sync()
    index.close()
    again = RecallIndex(sample.layout, config)
    try:
        counter.calls = 0
        assert sorted(ids(again.search("staging"))) == ["c2", "c4"]
        assert counter.calls == 0
        assert again.stats().rebuilds == 0
    finally:
        again.close()


def test_racy_directory_mtime_is_not_trusted(sample: SessionFiles, index: RecallIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    index.sync()
    os.utime(sample.layout.chunks)  # chunks/ modified just now
    counter = CountingLoad()
    monkeypatch.setattr(recall_sync, "load_index", counter)
    index.search("staging")
    index.search("staging")
    assert counter.calls == 2  # a change within the same mtime tick could hide: checked each time


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
        chunk_id="c3", source="active", score=0.0, summary="用户希望使用中文交流。", spans=(), first_seq=6, last_seq=7
    )
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
    out = []
    for i in range(n):
        words = f"{common} filler{i}" + (" unicornword" if i == rare_at else "")
        out.append(
            BulkChunk(
                chunk_id=f"b{i:04d}",
                sha256="0" * 64,
                summary=f"bulk {i}",
                events=[SessionEvent(type="user_input", content=words, seq=i * 2 + 1, timestamp=float(i))],
            )
        )
    return out


@pytest.mark.parametrize("window", [10, 300])
def test_common_terms_use_windows_and_coverage_checks(
    files: SessionFiles, index: RecallIndex, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    # window=10: "commonword" (200 rows) is far beyond it; whether the old
    # chunk holding "unicornword" also has "commonword" takes a per-chunk
    # query. window=300: every row fits, everything is ranked with bm25().
    monkeypatch.setattr(recall_index, "_ROW_BUDGET", window)
    monkeypatch.setattr(recall_index, "_MIN_WINDOW", window)
    index.sync()
    assert index.bulk_load(bulk(200, "commonword", rare_at=3)) == 200
    # The rare word's chunk is old: far outside the common word's window of newest rows.
    assert ids(index.search("commonword unicornword")) == ["b0003"]
    assert ids(index.search("unicornword commonword")) == ["b0003"]
    # A common word alone: the newest chunks, bounded.
    hits = index.search("commonword", k=3)
    assert ids(hits) == ["b0199", "b0198", "b0197"]
    # No chunk has all three: OR ranking over what the bounded windows saw.
    assert ids(index.search("commonword filler5 unicornword", k=2)) == ["b0005", "b0003"]
    # Filters force the coverage question to SQL.
    assert ids(index.search("commonword unicornword", types=["user_input"])) == ["b0003"]
    assert index.search("commonword unicornword", types=["tool_result"]) == []
    assert ids(index.search("commonword unicornword", since=2.0, until=4.0)) == ["b0003"]
    # b0003 is outside the range: no chunk has both words, the OR fallback ranks the rest.
    assert ids(index.search("commonword unicornword", since=197.0)) == ["b0199", "b0198", "b0197"]


def test_bulk_rows_vanish_at_next_full_sync(files: SessionFiles, index: RecallIndex) -> None:
    index.sync()
    index.bulk_load(bulk(5, "bulkword", rare_at=-1))
    assert len(index.search("bulkword")) == 5
    files.write("c1", [ev(1, "real")])
    assert index.search("bulkword") == []
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
    assert ids(hits) == ["s1"]
    assert hits[0].summary == (
        "History summary.\n\n---\n\nTurn Context (split turn):\nPrefix summary mentions the zebu import."
    )
    assert hits[0].degraded is True
    assert hits[0].spans == ()


def test_random_queries_never_fail(sample: SessionFiles, index: RecallIndex) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    alphabet = st.sampled_from(list('abcdeimgrtsAND OR NOT NEAR()"*^:-+{}数据库迁移中文\x00\u200b\ud800\t\n'))

    @settings(max_examples=150, deadline=None)
    @given(st.text(alphabet, max_size=40), st.integers(min_value=1, max_value=10))
    def run(query: str, k: int) -> None:
        hits = index.search(query, k=k)
        assert len(hits) <= min(k, 5)
        assert sum(len(h.summary) + sum(len(s.snippet) for s in h.spans) for h in hits) <= 4800
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

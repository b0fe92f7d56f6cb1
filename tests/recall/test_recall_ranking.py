"""Event-level recall quality: what the chunk-level index got wrong, and the one serialized answer budget.

Each test here fails on the chunk-level index (before 3c870a3): it ranked and
answered whole chunks (a chunk's score summed its events' matches, so terms
scattered over a long chunk beat one event holding them together), required
every word of a question, had no stemming or phrase terms, bounded only the
summaries and snippets it counted (not the JSON the model reads), and read a
chunk file once per requested seq.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.recall.index import BulkChunk, RecallIndex
from aiden.recall.tool import RecallHit, handle_recall_tool
from aiden.storage import chunks as cs
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.session import FileSessionStore
from tests.helpers import SMALL_MANUAL
from tests.recall.recall_helpers import Calls, SessionFiles, ev, found

ENVELOPE = '{"results":[]}'


def open_index(files: SessionFiles, **config: Any) -> RecallIndex:
    return RecallIndex(files.layout, Config(**config))


def tool_answer(index: RecallIndex, arguments: Any, max_chars: int) -> str:
    """The tool's answer text, as Memory.handle_recall_tool produces it (max_chars = recall_max_chars)."""
    calls = Calls(index)

    async def run() -> str:
        return await handle_recall_tool(
            arguments, search=calls.search, lookup=calls.lookup, rehydrate=calls.rehydrate, max_chars=max_chars
        )

    return anyio.run(run)


# --- co-occurrence ---------------------------------------------------------------------------


def test_event_holding_both_terms_ranks_first(files: SessionFiles) -> None:
    # A long chunk with the two words in many separate events: summed per chunk, it would win.
    files.write(
        "scattered",
        [ev(n + 1, f"redis restarted on node{n}" if n % 2 else f"timeout raised on node{n}") for n in range(20)],
        summary="ops log",
    )
    # A chunk of many events, one of which holds both words.
    files.write(
        "many",
        [ev(100 + n, f"unrelated chatter number{n} here") for n in range(15)]
        + [ev(115, "redis timeout raised on node99")],
        summary="chatter",
    )
    # The same chunk holds one word each in two events, and both in a third.
    files.write(
        "same",
        [ev(200, "redis restarted on node77"), ev(201, "redis timeout on node78"), ev(202, "timeout raised on node79")],
        summary="mixed",
    )
    idx = open_index(files, recall_max_results=5)
    try:
        hits = idx.search("redis timeout", k=5)
        assert found(hits)[:2] == [("same", "event", 201), ("many", "event", 115)]
        assert [h.text for h in hits[:2]] == ["redis timeout on node78", "redis timeout raised on node99"]
        # The other hits score below both: two that hold one of the words, then the turn before 115,
        # which holds neither (half of 115's score) and outranks the one-word events of "scattered".
        assert [h.text for h in hits[2:]] == [
            "timeout raised on node79",
            "redis restarted on node77",
            "unrelated chatter number14 here",
        ]
        assert found(hits)[4] == ("many", "event", 114)
        assert min(h.score for h in hits[:2]) > max(h.score for h in hits[2:])
    finally:
        idx.close()


# --- natural-language questions -----------------------------------------------------------------


@pytest.fixture
def chatty(files: SessionFiles) -> SessionFiles:
    # Many events full of function words, one with the topic words.
    filler = [
        "what was it that we said about it? it was what we had said before, was it not",
        "we said that it was about what they had been doing there, and that was that",
        "it is what it is, and we were there when it was said about them",
    ]
    files.write("talk", [ev(n + 1, filler[n % 3] + f" (round {n})", role="user") for n in range(12)], summary="talk")
    files.write("ops", [ev(20, "cache expiry set to 300 seconds for sessions", "assistant_output", role="assistant")])
    return files


def test_stopword_heavy_question_finds_the_topic_words(chatty: SessionFiles) -> None:
    idx = open_index(chatty)
    try:
        hits = idx.search("what was it that we said about the cache expiry?")
        # Only the event with the topic words: the function words are not searched.
        assert found(hits) == [("ops", "event", 20)]
        assert hits[0].text == "cache expiry set to 300 seconds for sessions"
        assert found(idx.search("Hey, could you tell me what the expiry was again, please?")) == [("ops", "event", 20)]
    finally:
        idx.close()


def test_question_of_only_stopwords_is_answered_sanely(chatty: SessionFiles) -> None:
    idx = open_index(chatty, recall_max_chars=1500)
    try:
        hits = idx.search("what was it that we said?")
        # Nothing but stopwords: they are searched after all, within the usual bounds.
        assert len(hits) >= 1
        assert {h.chunk_id for h in hits} == {"talk"}
        assert all(h.kind == "event" and "said" in h.text for h in hits)
        assert len({h.text for h in hits}) == len(hits)
        answer = tool_answer(idx, {"query": "what was it that we said?"}, 1500)
        assert len(answer) <= 1500
        assert [r["seq"] for r in json.loads(answer)["results"]] == [h.first_seq for h in hits]
        assert idx.search("whom ourselves") == []  # stopwords with no match anywhere: nothing, no error
    finally:
        idx.close()


# --- stemming and adjacent-word phrases -------------------------------------------------------------


def test_porter_stemming_finds_other_forms(files: SessionFiles) -> None:
    files.write("c1", [ev(1, "the cache layer was rebuilt"), ev(2, "deploying the new build")])
    files.write("c2", [ev(3, "nothing to see")])
    idx = open_index(files)
    try:
        assert found(idx.search("cached")) == [("c1", "event", 1)]
        assert found(idx.search("caching")) == [("c1", "event", 1)]
        assert found(idx.search("deployed builds")) == [("c1", "event", 2)]
    finally:
        idx.close()


def test_adjacent_query_words_outrank_the_same_words_apart(files: SessionFiles) -> None:
    # The same words, once side by side, once apart; the apart one is newer (it would win a tie).
    files.write("near", [ev(1, "please open src/app.py now")])
    files.write("apart", [ev(2, "src app.py please open now")])
    idx = open_index(files)
    try:
        hits = idx.search("open src")
        assert found(hits) == [("near", "event", 1), ("apart", "event", 2)]
        assert hits[0].score > hits[1].score
        # Without the pair (a single word), the tie goes to the newer event.
        assert found(idx.search("src")) == [("apart", "event", 2), ("near", "event", 1)]
    finally:
        idx.close()


# --- the answer budget, as serialized -------------------------------------------------------------------


def long_events(files: SessionFiles) -> dict[int, str]:
    texts: dict[int, str] = {}
    for n in range(12):
        # The match sits in the middle of a long text (with characters JSON escapes).
        text = 'lead-in "quoted" words ' * (20 + n) + f"needle no{n} found here\n" + "tail\twords " * (30 + n)
        texts[n + 1] = text
        files.write(f"l{n:02d}", [ev(n + 1, text, "tool_result", role="tool")], summary=f"long output {n}")
    return texts


@pytest.mark.parametrize("budget", [14, 40, 150, 300, 500, 1000, 2500, 4800, 20_000])
def test_serialized_answer_fits_the_budget_exactly(files: SessionFiles, budget: int) -> None:
    texts = long_events(files)
    idx = open_index(files, recall_max_chars=budget, recall_max_results=5)
    try:
        hits = idx.search("needle")
        answer = tool_answer(idx, {"query": "needle"}, budget)
        assert len(answer) <= budget
        out = json.loads(answer)
        # The tool answer is what the index measured: the same hits, cut the same way.
        assert [(r["chunk_id"], r["seq"], r["text"]) for r in out["results"]] == [
            (h.chunk_id, h.seq, h.text) for h in hits
        ]
        assert len(out["results"]) <= 5
        if budget >= 1000:
            assert len(out["results"]) >= 2
        if budget == 20_000:
            assert len(out["results"]) == 5
        for r in out["results"]:
            original = texts[r["seq"]]
            assert r.get("truncated", False) is (r["text"] != original)
            assert "needle" in r["text"]
            if r.get("truncated"):
                assert r["text"].startswith("…") or r["text"].endswith("…")
                assert len(r["text"]) >= 120
        if budget < 300:
            assert answer == ENVELOPE  # no hit fits in fewer than 120 characters of text
    finally:
        idx.close()


def test_lookup_of_a_summary_too_long_for_the_budget_is_cut(files: SessionFiles) -> None:
    files.write("c1", [ev(1, "x")], summary="summary sentence. " * 100)
    idx = open_index(files, recall_max_chars=400)
    try:
        hit = idx.lookup("c1")
        assert hit is not None and hit.truncated is True and hit.kind == "summary"
        assert hit.text == ("summary sentence. " * 100)[: len(hit.text) - 1] + "…"
        assert len(hit.text) >= 120
        assert len(tool_answer(idx, {"query": "", "chunk_id": "c1"}, 400)) <= 400
    finally:
        idx.close()


def test_lookup_with_a_budget_too_small_for_any_hit(files: SessionFiles) -> None:
    files.write("c1", [ev(1, "x")], summary="a short summary")
    idx = open_index(files, recall_max_chars=70)
    try:
        # The index still names the chunk and its range, with no room for its text.
        hit = idx.lookup("c1")
        assert hit is not None
        assert (hit.chunk_id, hit.kind, hit.first_seq, hit.last_seq, hit.text, hit.truncated) == (
            "c1", "summary", 1, 1, "", True
        )
        # The tool's JSON of that hit is over 70 characters: the answer is the bare envelope.
        answer = tool_answer(idx, {"query": "", "chunk_id": "c1"}, 70)
        assert json.loads(answer) == {"results": []}
    finally:
        idx.close()


_TEXT = st.text(st.sampled_from(list('ab needle"\\\n\t…数据\u2028x')), max_size=700)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(_TEXT, min_size=0, max_size=7),
    context=st.lists(st.one_of(st.none(), _TEXT), min_size=7, max_size=7),
    budget=st.integers(min_value=1, max_value=6000),
)
def test_fit_hits_never_exceeds_the_budget(texts: list[str], context: list[str | None], budget: int) -> None:
    from aiden.recall.query import content_terms
    from aiden.recall.tool import RecallContext, encode_hits, fit_hits

    hits = [
        RecallHit(
            chunk_id=f"c{i}", source="active", kind="event" if i % 3 else "summary", score=1.0 / (i + 1),
            text=t, first_seq=i, last_seq=i, type="tool_result" if i % 3 else None,
        )
        for i, t in enumerate(texts)
    ]
    contexts = {
        i: RecallContext(seq=100 + i, type="user_input", role="user", text=c)
        for i, c in enumerate(context[: len(hits)])
        if c is not None
    }
    fitted = fit_hits(hits, budget, content_terms("needle"), lambda: contexts)
    assert len(encode_hits(fitted)) <= max(budget, len(ENVELOPE))
    # Hits keep their order (one that cannot fit is left out), each is the original or a cut of it.
    ids = [h.chunk_id for h in fitted]
    assert ids == sorted(ids, key=lambda c: int(c[1:])) and len(set(ids)) == len(ids)
    if fitted:
        assert fitted[0].chunk_id == hits[0].chunk_id or len(encode_hits(hits[:1])) > budget
    for hit in fitted:
        original = hits[int(hit.chunk_id[1:])]
        assert hit.truncated is (hit.text != original.text)
        if hit.truncated:
            assert len(hit.text) >= 120 and "…" in hit.text
            if "needle" in original.text:
                assert "needle" in hit.text
        if hit.context is not None:
            assert hit.context.seq == 100 + int(hit.chunk_id[1:])


# --- context ------------------------------------------------------------------------------------------


def test_context_neighbour_when_room_and_not_otherwise(files: SessionFiles) -> None:
    files.write("a", [ev(1, "zzz before"), ev(2, "tool said marmot", "tool_result", role="tool")])
    files.write(
        "b",
        [
            ev(3, "assistant on marmot first", "assistant_output", role="assistant"),
            ev(4, "where is the marmot report?", role="user"),
            ev(5, "the report is in docs/", "assistant_output", role="assistant"),
        ],
    )
    idx = open_index(files)
    try:
        hits = {h.first_seq: h for h in idx.search("marmot")}
        # A user's words: the reply after them. Others: the event before, same chunk only.
        assert hits[4].context is not None and (hits[4].context.seq, hits[4].context.text) == (
            5,
            "the report is in docs/",
        )
        assert hits[2].context is not None and (hits[2].context.seq, hits[2].context.text) == (1, "zzz before")
        assert hits[3].context is None  # first event of its chunk: the event before lies in another chunk
    finally:
        idx.close()
    from aiden.recall.tool import encode_hits

    bare = without_context(hits[4])
    tight = len(encode_hits([bare])) + 10
    idx = open_index(files, recall_max_chars=tight, recall_max_results=1)
    try:
        only = idx.search("where marmot report", k=1)
        assert found(only) == [("b", "event", 4)]
        assert only[0].context is None
        assert only[0].text == "where is the marmot report?"
    finally:
        idx.close()


def without_context(hit: RecallHit) -> RecallHit:
    import msgspec

    return msgspec.structs.replace(hit, context=None)


# --- summaries ------------------------------------------------------------------------------------------


def test_summary_is_a_hit_only_when_no_event_of_its_chunk_matched(files: SessionFiles) -> None:
    files.write("both", [ev(1, "the quokka ate"), ev(2, "other")], summary="quokka chunk summary")
    files.write("only", [ev(3, "nothing here")], summary="summary mentions quokka")
    files.write("none", [ev(4, "quokka again later today")], summary="plain")
    idx = open_index(files)
    try:
        hits = idx.search("quokka")
        assert found(hits) == [("both", "event", 1), ("none", "event", 4), ("only", "summary", 3)]
        assert hits[2].text == "summary mentions quokka"
        assert hits[2].seq is None and (hits[2].first_seq, hits[2].last_seq) == (3, 3)
        # Events fill k: no summary.
        assert found(idx.search("quokka", k=2)) == [("both", "event", 1), ("none", "event", 4)]
        # A role filter: never a summary.
        assert found(idx.search("quokka", roles=["user"])) == []
    finally:
        idx.close()


def test_repeated_outputs_do_not_crowd_out_matching_events(files: SessionFiles) -> None:
    for n in range(8):
        # A command re-run six times per chunk: six identical outputs.
        files.write(f"r{n}", [ev(n * 10 + i + 1, f"apricot value {n}") for i in range(6)], summary="apricot " * 30)
    idx = open_index(files)
    try:
        hits = idx.search("apricot", k=5)
        assert [h.kind for h in hits] == ["event"] * 5
        assert sorted(h.chunk_id for h in hits) == ["r3", "r4", "r5", "r6", "r7"]
    finally:
        idx.close()


# --- CJK ------------------------------------------------------------------------------------------------


def test_cjk_two_characters_runs_and_mixed_queries(files: SessionFiles) -> None:
    files.write(
        "z1",
        [
            ev(1, "缓存过期时间设置为五分钟", role="user"),
            ev(2, "redis 缓存 已经清空", "assistant_output", role="assistant"),
            ev(3, "数据库的迁移失败了", "tool_result", role="tool"),
            ev(4, "redis restarted cleanly", "tool_result", role="tool"),
        ],
    )
    idx = open_index(files)
    try:
        assert found(idx.search("过期")) == [("z1", "event", 1)]
        assert found(idx.search("迁移")) == [("z1", "event", 3)]
        # Typed without spaces, not verbatim in any text: its bigrams match.
        assert found(idx.search("数据库迁移失败")) == [("z1", "event", 3)]
        # Mixed: the event with the English word and the Chinese one first, then the one next to it.
        assert found(idx.search("redis 缓存")) == [("z1", "event", 2), ("z1", "event", 1), ("z1", "event", 4)]
        assert idx.search("redis缓存")[0].first_seq == 2
        assert idx.search("存缓") == []
    finally:
        idx.close()


# --- hostile input ------------------------------------------------------------------------------------------

HOSTILE = [
    '"', 'open" OR "src', "NEAR(open src, 1)", "open NOT src", "text:open", "{text}: src", "^open", "open*",
    "(open) AND (src", "\x00", "open\x00src", "\ud800", "open \udfff src", "x" * 100_000, "open src " * 20_000,
    "\u200b", "'; DROP TABLE fts; --",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_stay_safe(files: SessionFiles, monkeypatch: pytest.MonkeyPatch, query: str) -> None:
    import aiden.recall.search as recall_search

    files.write("near", [ev(1, "please open src/app.py now")])
    files.write("apart", [ev(2, "src app.py please open now")])
    for small in (False, True):
        if small:  # the frequent-term path too
            monkeypatch.setattr(recall_search, "EXACT_ROWS", 1)
            monkeypatch.setattr(recall_search, "_WINDOW", 1)
            monkeypatch.setattr(recall_search, "_CANDIDATES", 1)
        idx = open_index(files, recall_max_chars=600)
        try:
            hits = idx.search(query)
            if "open" in query and "src" in query:
                # Words search as words (with one-row windows the bounded path must find at least the newest).
                got = {h.chunk_id for h in hits}
                assert ("apart" in got and got <= {"near", "apart"}) if small else (got == {"near", "apart"})
            answer = tool_answer(idx, {"query": query[:60_000]}, 600)
            assert len(answer) <= 600
            out = json.loads(answer)
            assert set(out) <= {"results", "error"}
            assert idx.stats().chunks_indexed == 2
        finally:
            idx.close()


# --- seqs without chunk_id (stubs) -------------------------------------------------------------------------


class CountingReadChunk:
    """Counts chunk file reads (a typed wrapper of aiden.storage.chunks.read_chunk)."""

    def __init__(self) -> None:
        self.real = cs.read_chunk
        self.ids: list[str] = []

    def __call__(self, layout: Layout, chunk_id: str, *, expect_sha256: str | None = None) -> cs.ChunkFile:
        self.ids.append(chunk_id)
        return self.real(layout, chunk_id, expect_sha256=expect_sha256)


class CountingStore(FileSessionStore):
    """A SessionStore that counts its hot-window reads."""

    hot_reads = 0

    def read_hot_window(self) -> list[SessionEvent]:
        self.hot_reads += 1
        return super().read_hot_window()


async def compacted_memory(root: Path) -> list[SessionEvent]:
    async with aiden.open_memory(root, config=SMALL_MANUAL) as memory:
        stored = await memory.append_many(
            [SessionEvent(type="user_input", role="user", content=f"message {i} " * 8) for i in range(40)]
        )
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted is True
    return stored


@pytest.mark.anyio
async def test_stub_seqs_are_read_from_chunks_and_hot_window_in_one_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = await compacted_memory(tmp_path)
    index = cs.load_index(Layout(tmp_path))
    assert index is not None
    chunk = index.chunks[0]
    by_seq = {e.seq: e for e in stored}
    old = [chunk.first_seq, chunk.first_seq + 1, chunk.last_seq]
    hot = [stored[-1].seq, stored[-2].seq]
    assert hot[0] > index.last_seq
    counter = CountingReadChunk()
    monkeypatch.setattr(cs, "read_chunk", counter)
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        counter.ids.clear()
        answer = await memory.handle_recall_tool(json.dumps({"query": "", "seqs": [*hot, 99_999, *old]}))
    out = json.loads(answer)
    assert out == {
        "chunk_id": "",
        "events": [json.loads(json.dumps(_builtins(by_seq[s]))) for s in sorted(old + hot)],
        "missing_seqs": [99_999],
    }
    assert counter.ids == [chunk.chunk_id]  # three seqs of one chunk: one read


def _builtins(event: SessionEvent) -> Any:
    import msgspec

    return msgspec.to_builtins(event)


@pytest.mark.anyio
async def test_read_events_reads_each_chunk_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stored = await compacted_memory(tmp_path)
    layout = Layout(tmp_path)
    index = cs.load_index(layout)
    assert index is not None
    chunked = [s for e in index.chunks for s in range(e.first_seq, e.last_seq + 1)]
    store = CountingStore(layout, Storage(), SMALL_MANUAL)
    try:
        counter = CountingReadChunk()
        monkeypatch.setattr(cs, "read_chunk", counter)
        wanted = [stored[-1].seq, *chunked, 10**9]
        events = store.read_events(wanted)
        assert [e.seq for e in events] == sorted(set(chunked) | {stored[-1].seq})
        assert events == [e for e in stored if e.seq in set(wanted)]
        assert sorted(counter.ids) == sorted(e.chunk_id for e in index.chunks)  # each chunk once
        assert store.hot_reads == 1
    finally:
        store.close()



# --- frequent terms: bounded work ------------------------------------------------------------------------


def bulk_events(n: int, rare_only: int = 3) -> list[BulkChunk]:
    # Events three seqs apart: none lends its score to another (search.SPREAD reaches two).
    out = []
    for i in range(n):
        words = f"frequentword filler{i}" + (" rareword" if i in (5, 250) else "") + (" loner" if i == 7 else "")
        types: Any = "tool_result" if i % 2 else "user_input"
        out.append(
            BulkChunk(
                chunk_id=f"q{i:04d}",
                sha256="0" * 64,
                summary=f"bulk {i}",
                events=[SessionEvent(type=types, content=words, seq=3 * i + 1, timestamp=float(i))],
            )
        )
    # Rare-word events without the frequent word (as long as those with it), newer than everything.
    for j in range(rare_only):
        out.append(
            BulkChunk(
                chunk_id=f"z{j}",
                sha256="0" * 64,
                summary="",
                events=[SessionEvent(type="user_input", content=f"rareword other{j} padding", seq=3000 + 3 * j, timestamp=1000.0 + j)],
            )
        )
    return out


def test_frequent_term_path_ranks_rare_and_frequent_together(files: SessionFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    import aiden.recall.search as recall_search

    monkeypatch.setattr(recall_search, "EXACT_ROWS", 20)
    monkeypatch.setattr(recall_search, "_WINDOW", 10)
    monkeypatch.setattr(recall_search, "_CANDIDATES", 5)
    idx = open_index(files)
    try:
        idx.sync()
        assert idx.bulk_load(bulk_events(400)) == 403
        # The old events holding both words (q0005 far outside the frequent word's window) first.
        hits = idx.search("frequentword rareword")
        assert found(hits)[:2] == [("q0250", "event", 751), ("q0005", "event", 16)]
        assert found(idx.search("rareword frequentword", k=2)) == found(hits)[:2]
        assert found(idx.search("loner frequentword", k=1)) == [("q0007", "event", 22)]
        # The frequent word alone: the newest events.
        assert found(idx.search("frequentword", k=3)) == [("q0399", "event", 1198), ("q0398", "event", 1195), ("q0397", "event", 1192)]
        # Filters still apply.
        assert found(idx.search("frequentword", k=2, types=["user_input"])) == [
            ("q0398", "event", 1195),
            ("q0396", "event", 1189),
        ]
        assert found(idx.search("frequentword rareword", k=1, since=100.0, until=300.0)) == [("q0250", "event", 751)]
        assert found(idx.search("frequentword rareword", k=1, types=["tool_result"])) == [("q0005", "event", 16)]
        assert idx.search("frequentword", types=["assistant_output"]) == []
    finally:
        idx.close()


def test_frequent_term_path_with_more_rare_holders_than_candidates(
    files: SessionFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aiden.recall.search as recall_search

    idx = open_index(files)
    try:
        idx.sync()
        idx.bulk_load(bulk_events(400, rare_only=8))
        # Ranked exactly (the default budget), the events holding both words come first.
        assert found(idx.search("frequentword rareword", k=2)) == [("q0250", "event", 751), ("q0005", "event", 16)]
        monkeypatch.setattr(recall_search, "EXACT_ROWS", 20)
        monkeypatch.setattr(recall_search, "_WINDOW", 10)
        monkeypatch.setattr(recall_search, "_CANDIDATES", 5)
        assert found(idx.search("frequentword rareword", k=2)) == [("q0250", "event", 751), ("q0005", "event", 16)]
    finally:
        idx.close()


def test_frequent_term_credit_with_more_exact_rows_than_are_read(
    files: SessionFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More exact rows than META_ROWS: only those that could still reach the top are credited,
    and the one old event holding the frequent word too still comes first."""
    import aiden.recall.search as recall_search

    monkeypatch.setattr(recall_search, "EXACT_ROWS", 200)
    texts = ["zeta omega marker"]  # old: far outside omega's window of newest rows
    texts += [f"zeta note {n}" for n in range(150)]
    texts += [f"omega filler {n}" for n in range(300)]
    # Three seqs apart: none lends its score to another (search.SPREAD reaches two).
    events = [ev(3 * i + 1, text) for i, text in enumerate(texts)]
    idx = open_index(files)
    try:
        idx.sync()
        idx.bulk_load([BulkChunk(chunk_id="big", sha256="0" * 64, summary="", events=events)])
        assert found(idx.search("zeta omega", k=3)) == [
            ("big", "event", 1),
            ("big", "event", 451),
            ("big", "event", 448),
        ]
    finally:
        idx.close()

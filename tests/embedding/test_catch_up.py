"""Embedding in the maintenance pass: a compaction embeds its chunk's events, a recall embeds its query only."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

import aiden
from aiden.errors import RecallError
from aiden.recall.db import IndexDB, text_hash
from aiden.recall.vectors import embed_missing
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.testing import HashingEmbedder
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio


async def feed(memory: aiden.Memory, words: str, n: int) -> None:
    await memory.append(aiden.SessionEvent(type="user_input", role="user", content=f"start {words}"))
    await memory.append(aiden.SessionEvent(type="user_input", role="user", content=f"the {words} cluster runs kubernetes"))
    for i in range(n):
        await memory.append(aiden.SessionEvent(type="assistant_output", role="assistant", content=f"{words} step {i} done"))


async def test_a_recall_after_a_compaction_embeds_only_its_query(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, embedder=embedder) as memory:
        await feed(memory, "staging", 12)
        await memory.maintain(manual=True)
        hot = {e.seq for e in await memory.hot_window()}
        embedded = list(embedder.seen)
        # The pass embedded every compacted event (no summary), before maintain() returned.
        assert embedded, "the compaction embedded nothing"
        assert len(embedded) == 14 - len(hot)
        assert "the staging cluster runs kubernetes" in embedded
        answer = json.loads(await memory.handle_recall_tool('{"query": "kubrenetes cluster"}'))
        assert embedder.seen == [*embedded, "kubrenetes cluster"]
        assert answer["results"][0]["seq"] == 2
        await memory.handle_recall_tool('{"query": "which step"}')
        assert embedder.seen == [*embedded, "kubrenetes cluster", "which step"]
        stats = memory.recall_stats()
        assert stats is not None and stats.embedding_failures == 0


async def test_an_embedder_failure_in_the_pass_is_counted_and_recall_stays_lexical(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    embedder.fail_with = RecallError("provider down")
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, embedder=embedder) as memory:
        await feed(memory, "staging", 12)
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted
        answer = json.loads(await memory.handle_recall_tool('{"query": "staging cluster kubernetes"}'))
        assert answer["results"][0]["seq"] == 2  # found by its words
        stats = memory.recall_stats()
        assert stats is not None and stats.embedding_failures == 1
        # The provider is back: the next pass embeds what the failed one left too.
        embedder.fail_with = None
        before = embedder.texts
        await feed(memory, "billing", 12)
        await memory.maintain(manual=True)
        hot = {e.seq for e in await memory.hot_window()}
        assert embedder.texts - before == 28 - len(hot)



class _Oversized(HashingEmbedder):
    """A third-party embedder breaking the protocol: a value no float32 holds."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[3.9e38, *vector[1:]] for vector in super().embed(texts)]


async def test_a_vector_no_float32_holds_is_an_embedding_failure_not_an_error(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, embedder=_Oversized()) as memory:
        await feed(memory, "staging", 12)
        assert (await memory.maintain(manual=True)).compacted
        answer = json.loads(await memory.handle_recall_tool('{"query": "staging cluster kubernetes"}'))
        assert answer["results"][0]["seq"] == 2  # found by its words
        stats = memory.recall_stats()
        assert stats is not None and stats.embedding_failures == 1

def test_events_are_embedded_by_length_and_summaries_are_not(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.session.mkdir(parents=True)
    db = IndexDB(layout.recall_db, Storage())
    db.create("test")
    conn: sqlite3.Connection = db.require()
    texts = {1: "a long chunk summary " * 20, 2: "medium length text", 3: "x", 4: "a much longer event text here", 5: "yy"}
    for doc, text in texts.items():
        seq = None if doc == 1 else doc
        conn.execute("INSERT INTO docs VALUES (?, 1, ?, 'user_input', 'user', 0, 0, ?)", (doc, seq, text_hash(text)))
        conn.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (doc, text))
    embedder = HashingEmbedder()
    try:
        assert embed_missing(conn, embedder, batch=2) == 4
        # Shortest first, two per call: each call's texts are of similar length.
        assert embedder.seen == ["x", "yy", "medium length text", "a much longer event text here"]
        assert embedder.calls == 2
        assert [d for (d,) in conn.execute("SELECT doc FROM vectors ORDER BY doc")] == [2, 3, 4, 5]
    finally:
        db.close()

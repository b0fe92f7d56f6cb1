"""Hybrid recall_experience: BM25 fused with the records' vector similarity when the memory has an embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden.errors import RecallError
from aiden.experience.records import ExperienceRecord, RecordKind, terms_of
from aiden.experience.recordstore import RecordStore, RecordVectors
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.testing import HashingEmbedder
from tests.experience.test_experience_runtime import QUIET, fail_then_fix

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ENV = "repo-acme"
NOW = 5.0
# Shares no term with the cache record ("configure", "redis", "caching"), only character trigrams.
FAR = "reconfiguring rediscaching"
# The same, plus a word of the deploy record: BM25 finds that one only.
FAR_AND_STAGING = "reconfiguring rediscaching on staging"


def record(rid: str, kind: RecordKind, title: str, body: str, t: float) -> ExperienceRecord:
    return ExperienceRecord(
        id=rid,
        kind=kind,
        status="active",
        title=title,
        body=body,
        environment=ENV,
        goal=title,
        step=f"shell {rid}",
        created_at=t,
        updated_at=t,
    )


RECORDS = [
    record("proc-cache", "procedure", "configure the redis caching layer", "run `redis-cli config set`", 1.0),
    record("proc-deploy", "procedure", "deploy the staging cluster", "run `./deploy.sh staging`", 2.0),
    record("navi-notes", "navigation", "find the release notes", "`NOTES.md` is at `docs/NOTES.md`", 3.0),
]


def ids(store: RecordStore, query: str) -> list[str]:
    return [r.id for r in store.search(terms_of(query), now=NOW, k=5, environment=ENV, query=query)]


def stores(root: Path, embedder: HashingEmbedder) -> tuple[RecordStore, RecordStore, RecordVectors]:
    """(without an embedder, with one, its vectors) over the same records."""
    plain = RecordStore(Layout(root), Storage())
    hybrid = RecordStore(Layout(root), Storage(), embedder=embedder)
    hybrid.apply(RECORDS)
    assert hybrid.vectors is not None
    return plain, hybrid, hybrid.vectors


def test_a_far_worded_probe_bm25_misses_is_found_by_the_hybrid(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    plain, hybrid, _ = stores(tmp_path, embedder)
    assert embedder.calls == 1 and embedder.texts == 3  # embedded when written, one call
    assert ids(plain, FAR) == []
    assert ids(hybrid, FAR) == ["proc-cache", "proc-deploy", "navi-notes"]
    # BM25 returns only the record sharing "staging"; the fusion keeps it first and adds the cache record second.
    assert ids(plain, FAR_AND_STAGING) == ["proc-deploy"]
    assert ids(hybrid, FAR_AND_STAGING) == ["proc-deploy", "proc-cache", "navi-notes"]
    # Each recall embeds its query only: the records' vectors are cached.
    assert embedder.texts == 5
    # Only the returned records' files are opened, never one to embed it.
    assert hybrid.files_read == [
        "proc-cache",
        "proc-deploy",
        "navi-notes",
        "proc-deploy",
        "proc-cache",
        "navi-notes",
    ]


def test_without_an_embedder_recall_is_bm25_and_computes_no_vector(tmp_path: Path) -> None:
    plain = RecordStore(Layout(tmp_path), Storage())
    plain.apply(RECORDS)
    assert plain.vectors is None
    assert ids(plain, "deploy the staging cluster again") == ["proc-deploy"]
    assert ids(plain, "redis caching layer for staging") == ["proc-cache", "proc-deploy"]


def test_a_damaged_vector_cache_falls_back_to_bm25_then_is_rebuilt(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    plain, hybrid, vectors = stores(tmp_path, embedder)
    key, _ = vectors.entries["proc-cache"]
    vectors.entries["proc-cache"] = (key, [0.5, 0.5, 0.5])  # another length than the query's
    assert ids(hybrid, FAR_AND_STAGING) == ids(plain, FAR_AND_STAGING) == ["proc-deploy"]
    assert vectors.entries == {}  # dropped, to be rebuilt
    assert ids(hybrid, FAR_AND_STAGING) == ["proc-deploy", "proc-cache", "navi-notes"]
    key, _ = vectors.entries["navi-notes"]
    vectors.entries["navi-notes"] = (key, [float("nan")] * 64)
    assert ids(hybrid, FAR) == ids(plain, FAR) == []
    assert ids(hybrid, FAR) == ["proc-cache", "proc-deploy", "navi-notes"]


def test_a_missing_cache_the_embedder_cannot_rebuild_falls_back_to_bm25(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    embedder.fail_with = RecallError("embedding provider unavailable")
    plain, hybrid, vectors = stores(tmp_path, embedder)  # writing the records does not fail for it
    assert vectors.entries == {}
    for query in (FAR, FAR_AND_STAGING, "redis caching layer for staging"):
        assert ids(hybrid, query) == ids(plain, query)
    assert ids(hybrid, FAR_AND_STAGING) == ["proc-deploy"]
    embedder.fail_with = None
    assert ids(hybrid, FAR_AND_STAGING) == ["proc-deploy", "proc-cache", "navi-notes"]


def test_an_updated_record_is_embedded_again_and_an_unchanged_one_not(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    _, hybrid, _ = stores(tmp_path, embedder)
    hybrid.apply([RECORDS[0]])
    assert embedder.texts == 3
    warm = record("proc-cache", "procedure", "warm the memcached pool", "run `warm.sh`", 4.0)
    hybrid.apply([warm])
    assert embedder.texts == 4 and embedder.seen[-1].startswith("warm the memcached pool\n")
    assert ids(hybrid, "prewarming memcache") == ["proc-cache", "navi-notes", "proc-deploy"]


async def test_open_memory_with_an_embedder_makes_recall_experience_hybrid(tmp_path: Path) -> None:
    async def recall(embedder: HashingEmbedder | None) -> list[str]:
        async with aiden.open_memory(tmp_path, config=QUIET, embedder=embedder) as memory:
            if embedder is None:
                await fail_then_fix(memory)
                assert (await memory.learn_experience()).episodes == 1
            # No word of "build the acme repo" / `make build WITH_SSL=1`: trigrams only.
            args = {"query": "rebuilding acmes", "environment": ENV}
            text = await memory.handle_tool_call("recall_experience", args)
            return [str(item["kind"]) for item in json.loads(text)["results"]]

    assert await recall(None) == []
    assert await recall(HashingEmbedder()) == ["procedure", "failure"]

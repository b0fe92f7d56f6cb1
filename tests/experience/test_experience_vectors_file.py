"""The experience records' vectors kept across opens in ``experience/vectors.msgpack``.

A store reopened on records embedded earlier reads their vectors from the file instead of embedding
them again at its first recall; a damaged file is ignored (recall as without it) and rewritten; a
record changed since the file was written is embedded again; the file is written through the
memory's Storage, once per learning pass or recall that embedded something.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

import aiden
from aiden.experience.recordstore import RecordStore, row_text, text_key
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.testing import HashingEmbedder
from tests.experience.test_experience_hybrid import FAR, FAR_AND_STAGING, RECORDS, ids, record
from tests.experience.test_experience_runtime import ENV, QUIET, fail_then_fix

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ALL = ["proc-cache", "proc-deploy", "navi-notes"]


class SeamStorage(Storage):
    """Records every mutation attempted through the seam; fails those on ``failing`` with EIO."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        self.failing: str | None = None

    def _fault(self, kind: str, path: str) -> None:
        self.calls.append((kind, path))
        if self.failing is not None and path == self.failing:
            raise OSError(errno.EIO, os.strerror(errno.EIO), path)

    def replaced(self, path: Path) -> int:
        """How many times ``path`` was replaced (written atomically)."""
        return self.calls.count(("replace", str(path)))


def written(root: Path) -> RecordStore:
    """A store with an embedder that wrote RECORDS and recalled once (which writes the file)."""
    store = RecordStore(Layout(root), Storage(), embedder=HashingEmbedder())
    store.apply(RECORDS)
    assert ids(store, FAR) == ALL
    assert Layout(root).experience_vectors.is_file()
    return store


def file_of(root: Path) -> dict[str, Any]:
    found = msgspec.msgpack.decode(Layout(root).experience_vectors.read_bytes())
    assert isinstance(found, dict)
    return found


def vectors_in(root: Path) -> dict[str, tuple[str, list[float]]]:
    return {rid: (key, vector) for rid, key, vector in file_of(root)["entries"]}


def test_a_reopened_store_recalls_from_the_file_without_embedding_a_record(tmp_path: Path) -> None:
    first = written(tmp_path)
    assert first.vectors is not None
    saved = file_of(tmp_path)
    assert (saved["version"], saved["model"], saved["dimensions"]) == (1, "hashing-64", 64)
    assert vectors_in(tmp_path) == first.vectors.entries
    embedder = HashingEmbedder()
    again = RecordStore(Layout(tmp_path), Storage(), embedder=embedder)
    assert ids(again, FAR) == ALL
    assert ids(again, FAR_AND_STAGING) == ["proc-deploy", "proc-cache", "navi-notes"]
    assert embedder.seen == [FAR, FAR_AND_STAGING]  # the queries only
    assert again.vectors is not None and again.vectors.entries == first.vectors.entries


def test_a_recall_that_embeds_nothing_does_not_rewrite_the_file(tmp_path: Path) -> None:
    written(tmp_path)
    storage = SeamStorage()
    again = RecordStore(Layout(tmp_path), storage, embedder=HashingEmbedder())
    assert ids(again, FAR) == ALL
    assert storage.calls == []


def _damaged(raw: bytes, damage: str) -> bytes:
    if damage == "truncated":
        return raw[: len(raw) // 2]
    if damage == "garbage":
        return b"\x93not msgpack at all" + raw[:7]
    found = msgspec.msgpack.decode(raw)
    if damage == "version":
        found["version"] = 2
    elif damage == "dimension":  # a consistent file, of vectors shorter than the embedder's
        found["dimensions"] = 32
        for entry in found["entries"]:
            entry[2] = entry[2][:32]
    elif damage == "one short vector":
        found["entries"][1][2] = found["entries"][1][2][:63]
    elif damage == "not finite":
        found["entries"][2][2][5] = math.nan
    return msgspec.msgpack.encode(found)


@pytest.mark.parametrize(
    "damage", ["truncated", "garbage", "version", "dimension", "one short vector", "not finite"]
)
def test_a_damaged_file_is_ignored_then_rewritten(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = written(tmp_path)
    assert first.vectors is not None
    path = Layout(tmp_path).experience_vectors
    path.write_bytes(_damaged(path.read_bytes(), damage))
    embedder = HashingEmbedder()
    again = RecordStore(Layout(tmp_path), Storage(), embedder=embedder)
    with caplog.at_level(logging.WARNING, logger="aiden.experience"):
        # The same results as without the file (a damaged vector used would have made them lexical).
        assert ids(again, FAR) == ALL
        assert ids(again, FAR_AND_STAGING) == ["proc-deploy", "proc-cache", "navi-notes"]
    assert embedder.texts == 3 + 2  # every record once, then the two queries
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [f"experience recall: ignored {path}"]
    assert vectors_in(tmp_path) == first.vectors.entries  # rewritten whole and valid
    assert file_of(tmp_path)["dimensions"] == 64


def test_a_file_of_another_embedder_is_not_used(tmp_path: Path) -> None:
    written(tmp_path)
    other = HashingEmbedder(name="another-model")
    store = RecordStore(Layout(tmp_path), Storage(), embedder=other)
    assert ids(store, FAR) == ALL
    assert other.texts == 4
    assert file_of(tmp_path)["model"] == "another-model"


def test_a_record_changed_or_retired_since_the_file_was_written_is_not_taken_from_it(tmp_path: Path) -> None:
    written(tmp_path)
    warm = record("proc-cache", "procedure", "warm the memcached pool", "run `warm.sh`", 4.0)
    retired = msgspec.structs.replace(RECORDS[2], status="disputed", updated_at=5.0)
    RecordStore(Layout(tmp_path), Storage()).apply([warm, retired])  # another process, no embedder
    embedder = HashingEmbedder()
    again = RecordStore(Layout(tmp_path), Storage(), embedder=embedder)
    assert ids(again, "prewarming memcache") == ["proc-cache", "proc-deploy"]
    assert embedder.seen == [row_text(warm.row()), "prewarming memcache"]
    # Rewritten with the live records' current vectors only: the disputed record's is gone.
    entries = vectors_in(tmp_path)
    assert sorted(entries) == ["proc-cache", "proc-deploy"]
    assert entries["proc-cache"][0] == text_key("hashing-64", row_text(warm.row()))


def test_a_failed_write_of_the_file_costs_the_recall_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = Layout(tmp_path).experience_vectors
    storage = SeamStorage()
    storage.failing = str(path)
    store = RecordStore(Layout(tmp_path), storage, embedder=HashingEmbedder())
    store.apply(RECORDS)
    with caplog.at_level(logging.WARNING, logger="aiden.experience"):
        assert ids(store, FAR) == ALL
    assert not path.exists()
    assert [
        r.getMessage().startswith(f"experience recall: could not write {path}") for r in caplog.records
    ] == [True]
    storage.failing = None
    assert ids(store, FAR) == ALL  # still unwritten vectors: the next recall writes them
    # The failed attempt, then the write.
    assert storage.replaced(path) == 2 and sorted(vectors_in(tmp_path)) == sorted(ALL)


async def test_open_memory_writes_the_file_through_its_storage_once_per_pass(tmp_path: Path) -> None:
    path = Layout(tmp_path).experience_vectors
    args = {"query": "rebuilding acmes", "environment": ENV}

    async def recall(memory: aiden.Memory) -> list[str]:
        text = await memory.handle_tool_call("recall_experience", args)
        return [f"{item['kind']}: {item['title']}" for item in json.loads(text)["results"]]

    storage = SeamStorage()
    async with aiden.open_memory(
        tmp_path, config=QUIET, embedder=HashingEmbedder(), storage=storage
    ) as memory:
        await fail_then_fix(memory)
        await fail_then_fix(memory, "build the acme repo for release")
        assert (await memory.learn_experience()).episodes == 2
        assert storage.replaced(path) == 1  # one write for the pass's two episodes
        found = await recall(memory)
        assert found == [
            "procedure: build the acme repo: `shell make build WITH_SSL=1`",
            "failure: build the acme repo: `shell make build` fails",
            "procedure: build the acme repo for release: `shell make build WITH_SSL=1`",
            "failure: build the acme repo for release: `shell make build` fails",
        ]
        assert storage.replaced(path) == 1  # the recall embedded only its query
    learned = sorted(vectors_in(tmp_path))
    assert len(learned) == 4
    reopened, embedder = SeamStorage(), HashingEmbedder()
    async with aiden.open_memory(tmp_path, config=QUIET, embedder=embedder, storage=reopened) as memory:
        assert await recall(memory) == found
    assert embedder.seen == [args["query"]]
    assert reopened.replaced(path) == 0 and sorted(vectors_in(tmp_path)) == learned

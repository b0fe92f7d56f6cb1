"""The long-term store: entries, index v2, expiry without reads, the bounded cache, tools, hostile input."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from pathlib import Path

import pytest

from aiden.errors import InvalidIdError, MemoryEntryError
from aiden.longterm.entries import parse_index_yaml
from aiden.longterm.store import LongTermMemoryStore
from aiden.longterm.tools import (
    FORGET_MEMORY_TOOL,
    SAVE_MEMORY_TOOL,
    LongTermTools,
    SaveRequest,
    forget_memory,
    save_memory,
)
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

pytestmark = pytest.mark.anyio

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@pytest.fixture
def store(layout: Layout, storage: Storage) -> LongTermMemoryStore:
    return LongTermMemoryStore(layout, storage)


async def test_save_get_search_forget_and_index_v2(store: LongTermMemoryStore) -> None:
    yarn = await store.save(type="preference", title="Package manager", content="Always use yarn, never npm.",
                            now=NOW, memory_id="pm")
    port = await store.save(type="fact", title="Staging port", content="The staging database port is 5433.",
                            now=NOW + 1, memory_id="port", expires_at=NOW + 100)
    assert (store.memories_dir / "pm.md").read_text() == (
        '<!-- aiden-memory {"id":"pm","type":"preference","created_at":1767225600.0,"expires_at":null} -->\n'
        "# Package manager\n\nAlways use yarn, never npm.\n"
    )
    assert store.index_path.read_text() == (
        "version: 2\nentries:\n"
        "- id: pm\n  type: preference\n  title: Package manager\n  created_at: 1767225600.0\n  expires_at: null\n"
        "- id: port\n  type: fact\n  title: Staging port\n  created_at: 1767225601.0\n  expires_at: 1767225700.0\n"
    )
    assert await store.get("pm", now=NOW) == yarn
    assert await store.search("which package manager, yarn?", now=NOW + 2) == [yarn]
    assert await store.search("staging port", now=NOW + 2) == [port]
    assert await store.search("", now=NOW + 2, k=1) == [port]
    assert await store.search("port", now=NOW + 2, types=["preference"]) == []
    assert await store.forget("pm") is True
    assert await store.forget("pm") is False
    assert not (store.memories_dir / "pm.md").exists()
    assert [e.id for e in parse_index_yaml(store.index_path.read_bytes()).entries] == ["port"]


async def test_invalid_entries_are_rejected_before_any_write(store: LongTermMemoryStore) -> None:
    for bad_id in ("../x", "/abs", "a\x00b", "x" * 65, "", "a/b", "a.md"):
        with pytest.raises(InvalidIdError):
            await store.save(type="fact", title="t", content="c", now=NOW, memory_id=bad_id)
        with pytest.raises(InvalidIdError):
            await store.forget(bad_id)
    with pytest.raises(MemoryEntryError, match="invalid memory type"):
        await store.save(type="secret", title="t", content="c", now=NOW)
    with pytest.raises(MemoryEntryError, match="expires_at must be later"):
        await store.save(type="fact", title="t", content="c", now=NOW, expires_at=NOW - 1)
    with pytest.raises(MemoryEntryError, match="title must not be empty"):
        await store.save(type="fact", title="  \n", content="c", now=NOW)
    assert not store.root.exists()


async def test_yaml_tags_in_the_index_are_refused_and_the_index_is_rebuilt(
    store: LongTermMemoryStore, tmp_path: Path
) -> None:
    await store.save(type="rule", title="Commits", content="Never commit directly to main.", now=NOW,
                     memory_id="r1")
    pwned = tmp_path / "pwned"
    store.index_path.write_text(
        f'version: 2\nentries: !!python/object/apply:os.system ["touch {pwned}"]\n', encoding="utf-8"
    )
    fresh = LongTermMemoryStore(store.layout, Storage())
    entries = await fresh.entries(now=NOW)
    assert [e.id for e in entries] == ["r1"]
    assert not pwned.exists()
    problems = fresh.stats().problems
    assert len(problems) == 1 and problems[0].startswith("index.yaml is not valid safe YAML")
    await fresh.save(type="fact", title="Port", content="API port is 8080.", now=NOW + 1, memory_id="f1")
    assert [e.id for e in parse_index_yaml(store.index_path.read_bytes()).entries] == ["r1", "f1"]
    for hostile in (b"version: 1\nentries: []\n", b"- just a list\n", b"version: 2\nentries:\n- id: ../x\n"
                    b"  type: fact\n  title: t\n  created_at: 1.0\n", b"version: 2\nentries: !!binary aGk=\n"):
        store.index_path.write_bytes(hostile)
        assert [e.id for e in await LongTermMemoryStore(store.layout, Storage()).entries(now=NOW)] == ["r1", "f1"]


async def test_expired_entries_are_skipped_without_reading_their_files(store: LongTermMemoryStore) -> None:
    await store.save(type="fact", title="Old", content="Temporary staging host is tmp.example.com.", now=NOW,
                     memory_id="old", expires_at=NOW + 10)
    keep = await store.save(type="fact", title="Host", content="The staging host is staging.example.com.",
                            now=NOW + 1, memory_id="keep")
    (store.memories_dir / "old.md").unlink()  # had the store opened it, this would show as a problem
    fresh = LongTermMemoryStore(store.layout, Storage())
    assert await fresh.search("staging host", now=NOW + 20) == [keep]
    assert await fresh.get("old", now=NOW + 20) is None
    assert await fresh.rebuild_profile(now=NOW + 20) is True
    profile = fresh.profile_path.read_text()
    assert profile == (
        "# PROFILE\n\nSynthesized from long-term memory (memories/); rebuilt automatically, do not edit.\n\n"
        "## Facts\n- **Host**: The staging host is staging.example.com. (keep)\n"
    )
    stats = fresh.stats()
    assert stats.problems == () and stats.files_read == 1
    assert await fresh.rebuild_profile(now=NOW + 30) is False  # unchanged content is not rewritten


async def test_parse_cache_admission_is_bounded(layout: Layout, storage: Storage) -> None:
    store = LongTermMemoryStore(layout, storage, cache_size=2)
    for i in range(4):
        await store.save(type="fact", title=f"Fact {i}", content=f"Fact number {i} holds.", now=NOW + i,
                         memory_id=f"f{i}")
    assert len(await store.entries(now=NOW + 10)) == 4
    s = store.stats()
    assert (s.cache_size, s.cache_admitted, s.cache_rejected, s.cache_evicted) == (2, 2, 2, 0)
    await store.entries(now=NOW + 10)  # a second scan neither grows nor churns the cache
    s = store.stats()
    assert (s.cache_size, s.cache_hits, s.cache_admitted, s.cache_rejected, s.cache_evicted) == (2, 2, 2, 4, 0)
    await store.get("f3", now=NOW + 10)  # a point read evicts the least recently used entry
    s = store.stats()
    assert (s.cache_size, s.cache_admitted, s.cache_evicted) == (2, 3, 1)
    assert await store.get("f3", now=NOW + 10) is not None
    assert store.stats().cache_hits == 3


class _OnStore:
    """The long-term actor's side of the tools, run on ``store`` directly."""

    def __init__(self, store: LongTermMemoryStore) -> None:
        self._store = store

    def save_memory(self, request: SaveRequest) -> Awaitable[str]:
        return save_memory(self._store, request, now=NOW)

    def forget_memory(self, memory_id: str) -> Awaitable[str]:
        return forget_memory(self._store, memory_id)


async def test_tools_answer_json_and_never_raise_on_bad_arguments(store: LongTermMemoryStore) -> None:
    assert SAVE_MEMORY_TOOL["function"]["name"] == "save_memory"
    assert FORGET_MEMORY_TOOL["function"]["parameters"]["required"] == ["id"]
    tools = LongTermTools(lambda: _OnStore(store))
    ok = json.loads(await tools.run(
        "save_memory",
        '{"type": "preference", "title": "PM", "content": "Use yarn.", "expires_at": "2026-02-01", "id": "pm"}',
    ))
    assert ok == {"saved": {"id": "pm", "type": "preference", "title": "PM", "expires_at": "2026-02-01T00:00:00Z"}}
    bad_calls = [
        "not json",
        '["a list"]',
        '{"type": "fact", "title": "t"}',
        '{"type": "fact", "title": "t", "content": "c", "extra": 1}',
        '{"type": "secret", "title": "t", "content": "c"}',
        '{"type": "fact", "title": "t", "content": "c", "id": "../../etc/passwd"}',
        '{"type": "fact", "title": "t", "content": "c", "expires_at": "next tuesday"}',
        '{"type": "fact", "title": "t", "content": 5}',
        "x" * 40_000,
    ]
    for call in bad_calls:
        answer = json.loads(await tools.run("save_memory", call))
        assert list(answer) == ["error"] and answer["error"].startswith("save_memory: ")
    assert json.loads(await tools.run("save_memory", 42)) == {  # type: ignore[arg-type]
        "error": "save_memory: arguments must be a JSON object, got int"
    }
    assert json.loads(await tools.run("forget_memory", {"id": "../x"}))["error"].startswith("forget_memory: invalid")
    assert json.loads(await tools.run("forget_memory", {"id": "nope"})) == {
        "error": "forget_memory: no memory with id 'nope'"
    }
    assert json.loads(await tools.run("forget_memory", '{"id": "pm"}')) == {"forgotten": "pm"}

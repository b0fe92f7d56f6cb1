"""AidenStore: a put or delete in ("memories",) never reaches another namespace's item."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

pytest.importorskip(
    "langgraph", reason="the langgraph extra is not installed (pip install 'aiden-memory[langgraph]')"
)

import aiden
from aiden.cli import list_memories
from aiden.errors import MemoryEntryError
from aiden.langgraph_store import NATIVE_NAMESPACE, AidenStore
from tests.helpers import SMALL_MANUAL

USER = ("users", "u1")


def test_a_native_write_cannot_delete_or_replace_another_namespaces_item(tmp_path: Path) -> None:
    store = AidenStore.for_root(str(tmp_path))
    store.put(USER, "k", {"secret": "pin-4417"})
    [item_id] = [e.id for e in list_memories(str(tmp_path))]  # the id anyone can compute from USER and "k"
    assert store.get(NATIVE_NAMESPACE, item_id) is None
    store.delete(NATIVE_NAMESPACE, item_id)
    kept = store.get(USER, "k")
    assert kept is not None
    assert kept.value == {"secret": "pin-4417"}
    with pytest.raises(MemoryEntryError):
        store.put(NATIVE_NAMESPACE, item_id, {"type": "fact", "title": "x", "content": "overwritten"})
    kept = store.get(USER, "k")
    assert kept is not None
    assert kept.value == {"secret": "pin-4417"}
    assert store.get(NATIVE_NAMESPACE, item_id) is None


@pytest.mark.anyio
async def test_an_agent_entry_under_any_id_stays_writable_from_the_native_namespace(tmp_path: Path) -> None:
    store = AidenStore.for_root(str(tmp_path))
    await store.aput(USER, "k", {"secret": "pin-4417"})
    [item_id] = [e.id for e in await anyio.to_thread.run_sync(list_memories, str(tmp_path))]
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        # The agent saves over the item under its id: the entry is the agent's own from then on.
        saved = await memory.handle_tool_call(
            "save_memory", {"type": "fact", "title": "Mine", "content": "the agent's note", "id": item_id}
        )
        assert json.loads(saved)["saved"]["id"] == item_id
    await store.aput(NATIVE_NAMESPACE, item_id, {"type": "fact", "title": "Mine", "content": "edited"})
    edited = await store.aget(NATIVE_NAMESPACE, item_id)
    assert edited is not None
    assert edited.value == {"type": "fact", "title": "Mine", "content": "edited"}
    await store.adelete(NATIVE_NAMESPACE, item_id)
    assert await store.aget(NATIVE_NAMESPACE, item_id) is None
    assert await anyio.to_thread.run_sync(list_memories, str(tmp_path)) == []

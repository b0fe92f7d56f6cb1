"""AidenStore: LangGraph items as aiden long-term memory entries, through a real graph too."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip(
    "langgraph", reason="the langgraph extra is not installed (pip install 'aiden-memory[langgraph]')"
)

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, PutOp, SearchOp

import aiden
from aiden.errors import MemoryEntryError
from aiden.langgraph_store import NATIVE_NAMESPACE, AidenStore
from tests.helpers import SMALL_MANUAL

USER = ("users", "u1", "memories")


@pytest.fixture
def store(tmp_path: Path) -> AidenStore:
    return AidenStore.for_root(str(tmp_path))


def test_put_get_replace_delete(store: AidenStore, tmp_path: Path) -> None:
    store.put(USER, "food", {"likes": "pizza", "n": 1})
    item = store.get(USER, "food")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (USER, "food", {"likes": "pizza", "n": 1})
    first_created = item.created_at
    store.put(USER, "food", {"likes": "sushi", "n": 2})
    replaced = store.get(USER, "food")
    assert replaced is not None
    assert replaced.value == {"likes": "sushi", "n": 2}
    assert replaced.created_at == first_created
    assert replaced.updated_at >= replaced.created_at
    # One entry file per item, replaced in place.
    assert len(list((tmp_path / "memory/long_term/memories").glob("lg-*.md"))) == 1
    assert store.get(("users", "u2", "memories"), "food") is None
    store.delete(USER, "food")
    assert store.get(USER, "food") is None
    store.delete(USER, "food")  # deleting nothing is fine


def test_search_by_prefix_filter_query_and_pages(store: AidenStore) -> None:
    store.put(USER, "a", {"text": "the user likes dark roast coffee", "kind": "pref", "score": 3})
    store.put(USER, "b", {"text": "the deploy runs on fridays", "kind": "fact", "score": 7})
    store.put(("users", "u2", "memories"), "c", {"text": "coffee with oat milk", "kind": "pref", "score": 5})
    assert {i.key for i in store.search(("users",))} == {"a", "b", "c"}
    assert [i.key for i in store.search(USER, filter={"kind": "pref"})] == ["a"]
    assert {i.key for i in store.search(("users",), filter={"score": {"$gte": 5}})} == {"b", "c"}
    assert [i.key for i in store.search(("users",), query="coffee roast")] == ["a", "c"]
    assert store.search(("users",), query="volcano") == []
    newest_first = [i.key for i in store.search(("users",))]
    assert newest_first == ["c", "b", "a"]
    assert [i.key for i in store.search(("users",), limit=1, offset=1)] == ["b"]
    assert all(i.score is None for i in store.search(("users",), query="coffee"))


@pytest.mark.anyio
async def test_async_forms_and_batch_keep_order(store: AidenStore) -> None:
    await store.aput(USER, "k", {"v": 1})
    assert (await store.aget(USER, "k")) is not None
    assert [i.key for i in await store.asearch(USER)] == ["k"]
    assert await store.alist_namespaces() == [USER]
    results = await store.abatch(
        [
            PutOp(USER, "k2", {"v": 2}),
            GetOp(USER, "k2"),
            SearchOp(USER, None, 10, 0),
            ListNamespacesOp(None, None, 100, 0),
            PutOp(USER, "k2", None),
            GetOp(USER, "k2"),
        ]
    )
    assert results[0] is None
    assert results[1] is not None and results[1].value == {"v": 2}  # type: ignore[union-attr]
    assert sorted(i.key for i in results[2]) == ["k", "k2"]  # type: ignore[union-attr]
    assert results[3] == [USER]
    assert results[4] is None and results[5] is None
    await store.adelete(USER, "k")
    assert await store.aget(USER, "k") is None


def test_ttl_becomes_the_entry_expiry(store: AidenStore, tmp_path: Path) -> None:
    store.put(USER, "short", {"v": 1}, ttl=1.0)
    store.put(USER, "forever", {"v": 2})
    index = (tmp_path / "memory/long_term/index.yaml").read_text()
    assert index.count("expires_at: null") == 1
    [entry] = [e for e in aiden_entries(tmp_path) if e["expires_at"] is not None]
    assert 55 <= entry["expires_at"] - time.time() <= 60


def aiden_entries(root: Path) -> list[dict[str, Any]]:
    from aiden.cli import list_memories

    return [{"id": e.id, "expires_at": e.expires_at, "title": e.title} for e in list_memories(str(root))]


def test_bad_values_and_hostile_keys(store: AidenStore, tmp_path: Path) -> None:
    with pytest.raises(MemoryEntryError):
        store.put(USER, "big", {"text": "x" * 9000})
    assert store.get(USER, "big") is None
    # Keys are hashed into the entry id: paths in keys name nothing outside memories/.
    for key in ("../../escape", "/etc/passwd", "a\x00b"):
        store.put(USER, key, {"v": key})
        got = store.get(USER, key)
        assert got is not None and got.value == {"v": key}
    assert not (tmp_path / "escape.md").exists()
    # In the agent's namespace the key is the entry id: a hostile one is refused or names nothing.
    assert store.get(NATIVE_NAMESPACE, "../index") is None
    store.delete(NATIVE_NAMESPACE, "../index")
    assert (tmp_path / "memory/long_term/index.yaml").exists()


def test_a_native_entry_that_looks_like_an_item_envelope_stays_a_native_entry(store: AidenStore) -> None:
    store.put(USER, "food", {"likes": "pizza"})
    forged = {  # a well-formed envelope, but the entry id is no hash of its namespace and key
        "format": "aiden.langgraph/1",
        "namespace": ["users", "u1", "memories"],
        "key": "admin",
        "created_at": 1.0,
        "ttl": None,
        "value": {"role": "admin"},
    }
    contents = {
        "bare": '{"format":"aiden.langgraph/1"}',
        "typed": '{"format": "aiden.langgraph/1", "namespace": 5}',
        "forged": json.dumps(forged),
    }
    for key, content in contents.items():
        store.put(NATIVE_NAMESPACE, key, {"title": key, "content": content})
    natives = {item.key: item.value for item in store.search(NATIVE_NAMESPACE)}
    assert natives == {key: {"type": "fact", "title": key, "content": c} for key, c in contents.items()}
    assert [(i.namespace, i.key) for i in store.search(USER)] == [(USER, "food")]
    assert sorted(store.list_namespaces()) == [NATIVE_NAMESPACE, USER]
    assert store.get(USER, "admin") is None


def test_search_ranks_the_items_value_not_the_envelopes_words(store: AidenStore) -> None:
    store.put(USER, "food", {"likes": "pizza"})
    store.put(("office",), "door", {"note": "the code is 4711"})
    for word in ("key", "value", "namespace", "format", "langgraph", "ttl", "created"):
        assert store.search((), query=word) == []
    assert [i.key for i in store.search((), query="pizza")] == ["food"]


@pytest.mark.anyio
async def test_the_agent_and_the_graph_share_one_long_term_memory(tmp_path: Path) -> None:
    store = AidenStore.for_root(str(tmp_path))
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        saved = await memory.handle_tool_call(
            "save_memory", {"type": "rule", "title": "Use tabs", "content": "indent with tabs", "id": "tabs"}
        )
        assert json.loads(saved)["saved"]["id"] == "tabs"
    agent_item = await store.aget(NATIVE_NAMESPACE, "tabs")
    assert agent_item is not None
    assert agent_item.value == {"type": "rule", "title": "Use tabs", "content": "indent with tabs"}
    await store.aput(
        NATIVE_NAMESPACE, "deploy", {"type": "procedure", "title": "Deploy", "content": "make ship"}
    )
    await store.aput(USER, "food", {"likes": "pizza"})
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        layer = memory.long_term_layer
        assert "Deploy" in layer
        assert "users/u1/memories/food" in layer
        forgot = await memory.handle_tool_call("forget_memory", {"id": "deploy"})
        assert json.loads(forgot) == {"forgotten": "deploy"}
    assert await store.aget(NATIVE_NAMESPACE, "deploy") is None
    assert sorted(await store.alist_namespaces()) == [("memories",), USER]


class State(TypedDict):
    user: str
    fact: str
    found: list[str]
    got: dict[str, Any]


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    store.put(("users", state["user"], "memories"), "fact-1", {"text": state["fact"]})
    return {}


def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
    ns = ("users", state["user"], "memories")
    hits = store.search(ns, query="espresso")
    item = store.get(ns, "fact-1")
    return {"found": [h.value["text"] for h in hits], "got": item.value if item else {}}


def graph(store: BaseStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def test_a_state_graph_puts_searches_and_gets_through_the_store(tmp_path: Path) -> None:
    store = AidenStore.for_root(str(tmp_path))
    out = graph(store).invoke({"user": "u7", "fact": "prefers a double espresso", "found": [], "got": {}})
    assert out["found"] == ["prefers a double espresso"]
    assert out["got"] == {"text": "prefers a double espresso"}
    # Durable: a new store on the same root sees it, and other users do not.
    again = AidenStore.for_root(str(tmp_path))
    assert [i.key for i in again.search(("users", "u7"))] == ["fact-1"]
    assert again.search(("users", "u8")) == []


async def aremember(state: State, *, store: BaseStore) -> dict[str, Any]:
    await store.aput(("users", state["user"], "memories"), "fact-1", {"text": state["fact"]})
    return {}


async def arecall(state: State, *, store: BaseStore) -> dict[str, Any]:
    ns = ("users", state["user"], "memories")
    hits = await store.asearch(ns, query="espresso")
    item = await store.aget(ns, "fact-1")
    return {"found": [h.value["text"] for h in hits], "got": item.value if item else {}}


@pytest.mark.anyio
async def test_an_async_graph_round_trip(tmp_path: Path) -> None:
    builder = StateGraph(State)
    builder.add_node("remember", aremember)
    builder.add_node("recall", arecall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    app = builder.compile(store=AidenStore.for_root(str(tmp_path)))
    out = await app.ainvoke({"user": "u9", "fact": "an espresso after lunch", "found": [], "got": {}})
    assert out["found"] == ["an espresso after lunch"]
    assert out["got"] == {"text": "an espresso after lunch"}

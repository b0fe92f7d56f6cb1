"""LangGraph's store checks, run on LangGraph's own InMemoryStore and on AidenStore alike.

No store conformance suite ships in the installed langgraph packages (its store
tests live in the repository's libs/checkpoint/tests/test_store.py, not in a
wheel; langgraph-checkpoint-conformance covers checkpointers only), so these
are those tests' namespace, pagination and validation checks written against
the BaseStore API, with the reference store as the baseline they must agree with.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip(
    "langgraph", reason="the langgraph extra is not installed (pip install 'aiden-memory[langgraph]')"
)

from langgraph.store.base import BaseStore, InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore

from aiden.langgraph_store import AidenStore

StoreFactory = Callable[[], BaseStore]


@pytest.fixture(params=["in_memory", "aiden"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if request.param == "in_memory":
        return InMemoryStore
    return lambda: AidenStore.for_root(str(tmp_path / "root"))


def fill(store: BaseStore, namespaces: list[tuple[str, ...]]) -> None:
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})


def test_list_namespaces_basic(make_store: StoreFactory) -> None:
    store = make_store()
    fill(
        store,
        [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("b", "a", "f"),
            ("users", "123"),
            ("users", "456", "settings"),
            ("admin", "users", "789"),
        ],
    )
    assert store.list_namespaces(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(make_store: StoreFactory) -> None:
    store = make_store()
    fill(
        store,
        [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ],
    )
    assert store.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []


def test_list_namespaces_pagination(make_store: StoreFactory) -> None:
    store = make_store()
    fill(store, [("namespace", f"sub_{i:02d}") for i in range(20)])
    assert store.list_namespaces(prefix=("namespace",), limit=5, offset=0) == [
        ("namespace", f"sub_{i:02d}") for i in range(5)
    ]
    assert store.list_namespaces(prefix=("namespace",), limit=5, offset=15) == [
        ("namespace", f"sub_{i:02d}") for i in range(15, 20)
    ]


def test_list_namespaces_max_depth_no_conditions_and_empty(make_store: StoreFactory) -> None:
    store = make_store()
    assert store.list_namespaces() == []
    fill(
        store, [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"), ("h", "i", "j", "k")]
    )
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i")]
    assert len(store.list_namespaces()) == 5


@pytest.mark.anyio
async def test_invalid_namespaces_are_refused_and_langgraph_below_the_root_is_fine(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            await store.aput(bad, "foo", doc)
    ns = ("foo", "langgraph", "foo")
    await store.aput(ns, "bar", doc)
    got = await store.aget(ns, "bar")
    assert got is not None
    assert got.value == doc
    assert (await store.asearch(ns))[0].value == doc
    await store.adelete(ns, "bar")
    assert await store.aget(ns, "bar") is None
    # Past the public put, as LangGraph's own test does: batch does not check the root label.
    await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
    again = await store.aget(("langgraph", "foo"), "bar")
    assert again is not None
    assert again.value == doc


_labels = st.sampled_from(["a", "b", "users", "u1"])
_namespaces = st.lists(_labels, min_size=1, max_size=3).map(tuple)
_keys = st.sampled_from(["k1", "k2", "../k", "k 3"])
_values = st.dictionaries(st.sampled_from(["x", "y"]), st.integers(-5, 5) | st.text(max_size=8), max_size=2)
_ops = st.lists(st.tuples(_namespaces, _keys, st.none() | _values), min_size=1, max_size=8)


@settings(max_examples=15, deadline=None)
@given(ops=_ops, prefix=_namespaces, depth=st.none() | st.integers(1, 3))
def test_aiden_store_agrees_with_the_in_memory_store(
    ops: list[tuple[tuple[str, ...], str, dict[str, Any] | None]], prefix: tuple[str, ...], depth: int | None
) -> None:
    reference = InMemoryStore()
    with tempfile.TemporaryDirectory() as root:
        store = AidenStore.for_root(root)
        for namespace, key, value in ops:
            for s in (reference, store):
                if value is None:
                    s.delete(namespace, key)
                else:
                    s.put(namespace, key, value)
        for namespace, key, _ in ops:
            expected, got = reference.get(namespace, key), store.get(namespace, key)
            assert (got.value if got else None) == (expected.value if expected else None)
        # InMemoryStore keeps a namespace listed once its last item is deleted (or after deleting
        # a missing key); a namespace here is one that holds items, as on LangGraph's PostgresStore.
        live = {i.namespace for i in reference.search((), limit=1000)}
        assert store.list_namespaces(max_depth=depth) == sorted({ns[:depth] if depth else ns for ns in live})
        assert store.list_namespaces(prefix=prefix) == sorted(
            ns for ns in live if ns[: len(prefix)] == prefix
        )
        # Values compared as JSON with sorted keys: equal dicts, whatever order their keys come back in.
        found = {(i.namespace, i.key, json.dumps(i.value, sort_keys=True)) for i in store.search(prefix, limit=100)}
        assert found == {
            (i.namespace, i.key, json.dumps(i.value, sort_keys=True)) for i in reference.search(prefix, limit=100)
        }

"""AidenStore over PostgreSQL's long-term memory: the same items, one namespace per long-term namespace."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

pytest.importorskip(
    "langgraph", reason="the langgraph extra is not installed (pip install 'aiden-memory[langgraph]')"
)

from aiden.config import Config
from aiden.langgraph_store import AidenStore
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from tests.postgres.conftest import SessionIds, pg_dsn, pg_server, session_ids

__all__ = ["pg_dsn", "pg_server", "session_ids"]  # the PostgreSQL fixtures, used by name

StoreOf = Callable[[str], AidenStore]


@pytest.fixture
def store_of(pg_dsn: str) -> Iterator[StoreOf]:
    """An AidenStore on the long-term memory of a session id (its own pool, closed after the test)."""
    from aiden.longterm.postgres.backend import PostgresLongTermBackend
    from aiden.storage.postgres import PostgresSessionStore

    opened: list[PostgresSessionStore] = []

    def make(session_id: str) -> AidenStore:
        store = PostgresSessionStore(pg_dsn, session_id, config=Config())
        store.recover()  # as the runtime opens a store
        opened.append(store)
        return AidenStore(PostgresLongTermBackend(store, Config(), ExtractiveSummarizer()).entries)

    yield make
    for store in opened:
        store.close()


def test_items_round_trip_and_stay_in_their_long_term_namespace(
    store_of: StoreOf, session_ids: SessionIds
) -> None:
    alice_id, bob_id = session_ids(), session_ids()
    alice, bob = store_of(alice_id), store_of(bob_id)
    alice.put(("users", "u1"), "coffee", {"text": "a double espresso", "n": 2})
    bob.put(("users", "u1"), "coffee", {"text": "green tea"})
    got = alice.get(("users", "u1"), "coffee")
    assert got is not None
    assert got.value == {"text": "a double espresso", "n": 2}
    assert [i.value["text"] for i in alice.search(("users",), query="espresso")] == ["a double espresso"]
    assert [i.value["text"] for i in bob.search(("users",))] == ["green tea"]
    assert alice.list_namespaces() == [("users", "u1")]
    # Another worker on alice's namespace sees her item; deleting it there deletes it for her.
    again = store_of(alice_id)
    assert [i.key for i in again.search(("users", "u1"))] == ["coffee"]
    again.delete(("users", "u1"), "coffee")
    assert alice.get(("users", "u1"), "coffee") is None
    assert bob.get(("users", "u1"), "coffee") is not None

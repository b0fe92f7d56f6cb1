"""The SessionStore conformance suite and the change feed checks on the PostgreSQL store (a real server)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from aiden.config import Config
from aiden.storage.protocol import SessionStore
from aiden.testing import conformance, conformance_changes
from aiden.testing.storekit import Reopen, StoreFactory

pytestmark = pytest.mark.timeout(180)

Backend = tuple[StoreFactory, Reopen]
SessionIds = Callable[[], str]


@pytest.fixture
def backend(pg_dsn: str, session_ids: SessionIds) -> Iterator[Backend]:
    """Fresh stores (each a new session id) sharing one pool, and a reopen: a new store object on the same id."""
    from aiden.storage.postgres import PostgresSessionStore, open_pool

    pool = open_pool(pg_dsn, max_size=8)

    def open_store(session_id: str) -> PostgresSessionStore:
        store = PostgresSessionStore(session_id=session_id, config=Config(), pool=pool)
        store.recover()  # as the runtime opens a store
        return store

    def make() -> SessionStore:
        return open_store(session_ids())

    def reopen(old: SessionStore) -> SessionStore:
        assert isinstance(old, PostgresSessionStore)
        return open_store(old.session_id)

    try:
        yield make, reopen
    finally:
        pool.close()


@pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_conformance(backend: Backend, check: Callable[[StoreFactory], None]) -> None:
    check(backend[0])


def test_reopen_keeps_everything(backend: Backend) -> None:
    conformance.check_reopen_keeps_everything(*backend)


def test_random_appends_and_commits(backend: Backend) -> None:
    # As many examples as the in-process backends: about 1.5 s against a local server.
    conformance.check_random_appends_and_commits(backend[0])


@pytest.mark.parametrize("check", conformance_changes.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_change_feed_conformance(backend: Backend, check: Callable[[StoreFactory], None]) -> None:
    check(backend[0])


def test_stale_token_after_reopen(backend: Backend) -> None:
    conformance_changes.check_stale_token_after_reopen(*backend)

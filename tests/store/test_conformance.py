"""The SessionStore conformance suite (aiden.testing.conformance) on every backend: files and memory."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from aiden.config import Config
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore
from aiden.storage.session import FileSessionStore
from aiden.testing import MemorySessionStore, conformance
from aiden.testing.storekit import Reopen, StoreFactory

pytestmark = pytest.mark.timeout(120)

Backend = tuple[StoreFactory, Reopen | None]


def _file_store(root: Path) -> FileSessionStore:
    store = FileSessionStore(Layout(root), Storage(), Config())
    store.recover()  # as the runtime opens a store
    return store


@pytest.fixture(params=["file", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A factory of fresh stores of one backend, and how to reopen a closed one (None: nothing persists)."""
    if request.param == "memory":
        return MemorySessionStore, None
    counter = itertools.count()

    def make() -> SessionStore:
        return _file_store(tmp_path / f"store{next(counter)}")

    def reopen(old: SessionStore) -> SessionStore:
        assert isinstance(old, FileSessionStore)
        return _file_store(old.layout.root)

    return make, reopen


@pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_conformance(backend: Backend, check: Callable[[StoreFactory], None]) -> None:
    check(backend[0])


def test_reopen_keeps_everything(backend: Backend) -> None:
    conformance.check_reopen_keeps_everything(*backend)


def test_random_appends_and_commits(backend: Backend) -> None:
    conformance.check_random_appends_and_commits(backend[0])

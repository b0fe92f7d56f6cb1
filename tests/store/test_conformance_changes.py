"""The change feed checks (aiden.testing.conformance_changes) on every backend: files and memory."""

from __future__ import annotations

import errno
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from aiden.config import Config
from aiden.errors import StorageError
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore
from aiden.storage.session import FileSessionStore
from aiden.testing import MemorySessionStore, conformance_changes
from aiden.testing.storekit import Reopen, StoreFactory, compact, fill

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


@pytest.mark.parametrize("check", conformance_changes.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_change_feed_conformance(backend: Backend, check: Callable[[StoreFactory], None]) -> None:
    check(backend[0])


def test_stale_token_after_reopen(backend: Backend) -> None:
    conformance_changes.check_stale_token_after_reopen(*backend)


def test_stale_token_after_the_index_was_rebuilt_by_recovery(tmp_path: Path) -> None:
    """A crash that lost index.yaml: recovery rebuilds it from the chunk files; the token still holds."""
    store = _file_store(tmp_path)
    fill(store, 6)
    compact(store, 2)
    stale = store.chunks_since(None).token
    later = compact(store, 4)[0]
    store.close()
    store.layout.index.unlink()
    store = _file_store(tmp_path)
    try:
        changes = store.chunks_since(stale)
        got = [c.chunk_id for c in changes.chunks]
        assert got == (
            [c.chunk_id for c in store.chunks_since(None).chunks] if changes.reset else [later.chunk_id]
        )
    finally:
        store.close()


def test_pending_chunk_file_is_reported_until_committed(tmp_path: Path) -> None:
    """A chunk file index.yaml does not list yet is pending; once committed it is a chunk, delivered once."""
    from aiden.storage.chunks import ChunkEntry, write_chunk

    store = _file_store(tmp_path)
    try:
        events = fill(store, 3)
        token = store.chunks_since(None).token
        entry = ChunkEntry(chunk_id="not-yet", first_seq=1, last_seq=2, count=0, sha256="", summary="s")
        full = write_chunk(store.storage, store.layout, entry, events[:2])
        changes = store.chunks_since(token)
        assert changes.chunks == []
        assert changes.pending is not None
        assert [(c.entry, c.events) for c in changes.pending.chunks] == [(full, events[:2])]
        committed = compact(store, 2)[0]
        after = store.chunks_since(changes.token)
        assert [c.chunk_id for c in after.chunks] == [committed.chunk_id]
        assert after.pending is not None
        assert [c.chunk_id for c in after.pending.chunks] == ["not-yet"]  # never committed: still pending
    finally:
        store.close()


def test_an_index_that_cannot_be_stated_is_a_storage_error_with_its_errno(tmp_path: Path) -> None:
    store = _file_store(tmp_path)
    index = store.layout.index
    index.parent.mkdir(parents=True, exist_ok=True)
    index.symlink_to(index.name)  # a link to itself: stat fails with ELOOP, not "not found"
    for read in (store.load_index, store.snapshot, lambda: store.change_token()):
        with pytest.raises(StorageError) as caught:
            read()
        assert caught.value.errno == errno.ELOOP

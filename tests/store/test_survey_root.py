"""SessionStore.survey_root: which stores offer the helper process their hot window, and from what size."""

from __future__ import annotations

import os
from pathlib import Path

from aiden.config import Config
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.session import FileSessionStore
from aiden.testing import MemorySessionStore
from aiden.testing.storekit import fill


class _OtherStorage(Storage):
    """A Storage subclass, as a fault-injecting one is: the helper process would run a plain Storage."""


class _SubclassedStore(FileSessionStore):
    """A FileSessionStore subclass: the helper process would run the plain class."""


def _filled(store: FileSessionStore) -> FileSessionStore:
    store.recover()
    fill(store, 5)
    return store


def test_a_plain_file_store_offers_its_root_once_the_hot_window_holds_min_bytes(tmp_path: Path) -> None:
    store = _filled(FileSessionStore(Layout(tmp_path), Storage(), Config()))
    try:
        size = os.stat(store.layout.events).st_size
        assert size > 0
        assert store.survey_root(size) == str(tmp_path)
        assert store.survey_root(size + 1) is None
    finally:
        store.close()


def test_a_store_subclass_or_another_storage_offers_no_root(tmp_path: Path) -> None:
    for store in (
        FileSessionStore(Layout(tmp_path / "other-storage"), _OtherStorage(), Config()),
        _SubclassedStore(Layout(tmp_path / "subclass"), Storage(), Config()),
    ):
        try:
            assert _filled(store).survey_root(0) is None
        finally:
            store.close()


def test_a_file_store_without_its_events_file_offers_no_root(tmp_path: Path) -> None:
    store = _filled(FileSessionStore(Layout(tmp_path), Storage(), Config()))
    try:
        assert store.survey_root(0) == str(tmp_path)
        store.layout.events.unlink()
        assert store.survey_root(0) is None  # the stat fails: this process surveys
    finally:
        store.close()


def test_the_memory_store_offers_no_root() -> None:
    store = MemorySessionStore()
    try:
        fill(store, 5)
        assert store.survey_root(0) is None
    finally:
        store.close()

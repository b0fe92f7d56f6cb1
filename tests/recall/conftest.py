"""Fixtures for the recall tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aiden.config import Config
from aiden.recall.index import RecallIndex
from tests.recall.recall_helpers import SessionFiles


@pytest.fixture
def files(tmp_path: Path) -> SessionFiles:
    return SessionFiles(tmp_path)


@pytest.fixture
def config() -> Config:
    return Config()


@pytest.fixture
def index(files: SessionFiles, config: Config) -> Iterator[RecallIndex]:
    idx = RecallIndex(files.layout, config)
    yield idx
    idx.close()

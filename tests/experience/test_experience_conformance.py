"""The experience conformance suite on the file backend (the same checks run on PostgreSQL in tests/postgres)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiden.experience.episodestore import EpisodeBackend, EpisodeStore
from aiden.experience.recordstore import RecordBackend, RecordStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.testing.conformance_experience import CHECKS, ExperienceFactory

pytestmark = [pytest.mark.timeout(60)]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_conformance(tmp_path: Path, check: Callable[[ExperienceFactory], None]) -> None:
    def make() -> tuple[EpisodeBackend, RecordBackend]:
        layout = Layout(tmp_path)
        return EpisodeStore(layout, Storage()), RecordStore(layout, Storage())

    check(make)

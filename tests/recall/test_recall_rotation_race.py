"""A rotation landing while recall opens the session's database answers "no active session"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aiden.config import Config
from aiden.recall.index import RecallIndex
from aiden.storage.session import FileChangeFeed
from tests.recall.recall_helpers import NoSyncStorage, SessionFiles, ev


class RotatingStorage(NoSyncStorage):
    """Moves the session directory away (as rotate() does) at the first unlink: recall's database creation."""

    def __init__(self, session: Path) -> None:
        super().__init__()
        self.session = session
        self.rotated = False

    def unlink(self, path: str | os.PathLike[str], *, missing_ok: bool = True) -> None:
        if not self.rotated:
            self.rotated = True
            os.rename(self.session, self.session.with_name("session-moving"))
        super().unlink(path, missing_ok=missing_ok)


@pytest.mark.parametrize("over_feed", [False, True])
def test_rotation_between_the_directory_check_and_the_open_finds_nothing(
    files: SessionFiles, config: Config, over_feed: bool
) -> None:
    files.write("c1", [ev(1, "before rotation pelican")])
    storage = RotatingStorage(files.layout.session)
    layout = files.layout
    source = FileChangeFeed(layout) if over_feed else layout
    index = RecallIndex(source, config, storage=storage, db_path=layout.recall_db)
    try:
        assert index.search("pelican") == []
        assert storage.rotated
        os.rename(files.layout.session.with_name("session-moving"), files.layout.session)
        assert [h.chunk_id for h in index.search("pelican")] == ["c1"]
    finally:
        index.close()

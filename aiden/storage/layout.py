"""Where everything lives under ``<root>/memory/`` (seed 000 and DESIGN section 3).

All paths are built here from the resolved root and validated ids, so no
caller ever joins user text onto a path.
"""

from __future__ import annotations

import os
from pathlib import Path

from aiden.events import validate_id

__all__ = ["Layout"]


class Layout:
    """Paths of one memory root.

    ::

        <root>/memory/
          session.lock            the session lock (never deleted or renamed)
          last_recovery.json      the last recovery on open that found something
          session/                the active session
            events.jsonl          hot window
            events.quarantine     bytes of torn tails / corrupt lines (never acknowledged data)
            summary.md, summary_archive.md
            chunks/index.yaml, chunks/<chunk_id>.jsonl
            recall.sqlite3        derived recall index
          session_archive/<closed_session_id>/
          long_term/
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.realpath(os.fspath(root)))
        self.memory = self.root / "memory"
        self.lock_file = self.memory / "session.lock"
        self.session = self.memory / "session"
        self.events = self.session / "events.jsonl"
        self.quarantine = self.session / "events.quarantine"
        self.summary = self.session / "summary.md"
        self.summary_archive = self.session / "summary_archive.md"
        self.chunks = self.session / "chunks"
        self.index = self.chunks / "index.yaml"
        self.recall_db = self.session / "recall.sqlite3"
        self.session_meta = self.session / "session.json"
        self.archive = self.memory / "session_archive"
        self.long_term = self.memory / "long_term"
        self.last_recovery = self.memory / "last_recovery.json"

    def chunk_file(self, chunk_id: str) -> Path:
        """Path of ``chunks/<chunk_id>.jsonl``; the id is validated first."""
        return self.chunks / f"{validate_id(chunk_id, what='chunk id')}.jsonl"

    def archived_session(self, session_id: str) -> Path:
        """Path of ``session_archive/<session_id>``; the id is validated first."""
        return self.archive / validate_id(session_id, what="session id")

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True if ``path`` resolves (symlinks followed) inside the memory root."""
        real = os.path.realpath(os.fspath(path))
        return real == str(self.memory) or real.startswith(str(self.memory) + os.sep)

"""Where everything lives under ``<root>/memory/`` (seed 000 and DESIGN section 3).

All paths are built here from the resolved root and validated ids, so no
caller ever joins user text onto a path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, Literal

from aiden.events import validate_id

__all__ = [
    "DREAM_LOCK_NAME",
    "EPISODE_FILE_NAME",
    "LONG_TERM_FILES",
    "PROCESSED_FILE_NAME",
    "PROFILES_DIR_NAME",
    "SUMMARIES_LOCK_NAME",
    "Layout",
    "LongTermFileName",
]

# The names of every file aiden keeps live here, so recovery's list of them (see
# aiden.storage.displaced) and the modules that write them cannot drift apart.
LongTermFileName = Literal["SOUL.md", "USER.md", "MEMORY.md"]
LONG_TERM_FILES: Final[tuple[LongTermFileName, ...]] = ("SOUL.md", "USER.md", "MEMORY.md")
"""The long-term files Dream edits and versions in ``long_term/.git``."""
SUMMARIES_LOCK_NAME: Final = ".summaries.lock"
"""``long_term/.summaries.lock``: held around each running-summary merge and session-file write."""
DREAM_LOCK_NAME: Final = ".dream.lock"
"""``long_term/.dream.lock``: held by the one process running Dream (or a restore) on a root."""
EPISODE_FILE_NAME: Final = "episode.json"
"""``episodes/<yyyy>/<episode_id>/episode.json``."""
PROCESSED_FILE_NAME: Final = "processed"
"""``episodes/<yyyy>/<episode_id>/processed``: the episode has been learned from."""
PROFILES_DIR_NAME: Final = "profiles"
"""``experience/profiles/<sha>.json`` (every other folder of ``experience/`` holds ``<id>.md`` records)."""


class Layout:
    """Paths of one memory root.

    ::

        <root>/memory/
          session.lock            the session lock (never deleted or renamed)
          compaction.lock         held by the one compaction pass on a root
          last_recovery.json      the last recovery on open that found something
          window.json             the context window of the last open (aiden inspect)
          session/                the active session
            events.jsonl          hot window
            events.quarantine     bytes of torn tails / corrupt lines (never acknowledged data)
            summary.md, summary_archive.md
            chunks/index.yaml, chunks/<chunk_id>.jsonl
            recall.sqlite3        derived recall index
            running_summary.md, seq_high_water, session.json
          session_archive/<closed_session_id>/
          long_term/
            index.yaml, profile.md, memories/<id>.md     saved memory entries
            history.jsonl, .cursor, .dream_cursor       Dream's source material
            SOUL.md, USER.md, MEMORY.md, .git/          Dream's files and their versions
            sessions/<stamp>-<session_id>.md, digest.md  durable summaries
            .entries.lock, .history.lock, .summaries.lock, .dream.lock
          episodes/index.yaml, episodes/.episodes.lock, episodes/<yyyy>/<episode_id>/
          experience/index.yaml, experience/.records.lock, experience/<kind>/<id>.md
          experience/vectors.msgpack  derived: the records' vectors (with an embedder)
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.realpath(os.fspath(root)))
        self.memory = self.root / "memory"
        self.lock_file = self.memory / "session.lock"
        self.compaction_lock = self.memory / "compaction.lock"
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
        self.window = self.memory / "window.json"
        lt = self.long_term
        self.entries_index = lt / "index.yaml"
        self.profile = lt / "profile.md"
        self.memories = lt / "memories"
        self.history = lt / "history.jsonl"
        self.history_cursor = lt / ".cursor"
        self.dream_cursor = lt / ".dream_cursor"
        self.sessions = lt / "sessions"
        self.digest = lt / "digest.md"
        self.entries_lock = lt / ".entries.lock"
        """Held around each save / forget of a memory entry."""
        self.history_lock = lt / ".history.lock"
        """Held around each append to ``history.jsonl``."""
        self.summaries_lock = lt / SUMMARIES_LOCK_NAME
        self.dream_lock = lt / DREAM_LOCK_NAME
        self.episodes = self.memory / "episodes"
        self.episodes_index = self.episodes / "index.yaml"
        self.episodes_lock = self.episodes / ".episodes.lock"
        self.experience = self.memory / "experience"
        self.experience_index = self.experience / "index.yaml"
        self.records_lock = self.experience / ".records.lock"
        self.experience_vectors = self.experience / "vectors.msgpack"

    @property
    def running_summary(self) -> Path:
        """``session/running_summary.md`` (inside the session dir, so rotation archives it)."""
        return self.session / "running_summary.md"

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

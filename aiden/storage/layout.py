"""Where everything lives under ``<root>/memory/``: every path is built here from the resolved root and validated ids.

No caller ever joins user text onto a path.
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

# Every file name lives here, so recovery's list (recovery.file_paths) and the writers cannot drift apart.
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


class _Under:
    """A path under the layout's ``memory`` or ``session`` folder, made at each use.

    An idle session keeps no Path per file, and a copy with another ``session`` moves every session path.
    """

    __slots__ = ("_folder", "_parts")

    def __init__(self, folder: Literal["memory", "session"], *parts: str) -> None:
        self._folder = folder
        self._parts = parts

    def __get__(self, layout: Layout, owner: object = None) -> Path:
        base: Path = getattr(layout, self._folder)
        return base.joinpath(*self._parts)


class Layout:
    """Paths of one memory root (the tree: README, "On disk")."""

    __slots__ = ("memory", "root", "session")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.realpath(os.fspath(root)))
        self.memory = self.root / "memory"
        self.session = self.memory / "session"
        """The active session's folder (an archived one's, in :func:`~aiden.storage.recovery.archived_layout`)."""

    lock_file = _Under("memory", "session.lock")
    compaction_lock = _Under("memory", "compaction.lock")
    events = _Under("session", "events.jsonl")
    quarantine = _Under("session", "events.quarantine")
    summary = _Under("session", "summary.md")
    summary_archive = _Under("session", "summary_archive.md")
    chunks = _Under("session", "chunks")
    index = _Under("session", "chunks", "index.yaml")
    recall_db = _Under("session", "recall.sqlite3")
    session_meta = _Under("session", "session.json")
    archive = _Under("memory", "session_archive")
    long_term = _Under("memory", "long_term")
    last_recovery = _Under("memory", "last_recovery.json")
    window = _Under("memory", "window.json")
    entries_index = _Under("memory", "long_term", "index.yaml")
    profile = _Under("memory", "long_term", "profile.md")
    memories = _Under("memory", "long_term", "memories")
    history = _Under("memory", "long_term", "history.jsonl")
    history_cursor = _Under("memory", "long_term", ".cursor")
    dream_cursor = _Under("memory", "long_term", ".dream_cursor")
    sessions = _Under("memory", "long_term", "sessions")
    digest = _Under("memory", "long_term", "digest.md")
    entries_lock = _Under("memory", "long_term", ".entries.lock")
    """Held around each save / forget of a memory entry."""
    history_lock = _Under("memory", "long_term", ".history.lock")
    """Held around each append to ``history.jsonl``."""
    summaries_lock = _Under("memory", "long_term", SUMMARIES_LOCK_NAME)
    dream_lock = _Under("memory", "long_term", DREAM_LOCK_NAME)
    episodes = _Under("memory", "episodes")
    episodes_index = _Under("memory", "episodes", "index.yaml")
    episodes_lock = _Under("memory", "episodes", ".episodes.lock")
    experience = _Under("memory", "experience")
    experience_index = _Under("memory", "experience", "index.yaml")
    records_lock = _Under("memory", "experience", ".records.lock")
    experience_vectors = _Under("memory", "experience", "vectors.msgpack")
    running_summary = _Under("session", "running_summary.md")
    """``session/running_summary.md`` (inside the session dir, so rotation archives it)."""

    def chunk_file(self, chunk_id: str) -> Path:
        """Path of ``chunks/<chunk_id>.jsonl``; the id is validated first."""
        return self.chunks / f"{validate_id(chunk_id, what='chunk id')}.jsonl"

    def recall_cache(self, session_id: str) -> Path:
        """Path of ``recall/<session_id>.sqlite3``: the recall index of a session stored elsewhere (PostgreSQL),
        one file per session as a worker's root serves many; the id is validated first."""
        return self.memory / "recall" / f"{validate_id(session_id, what='session id')}.sqlite3"

    def archived_session(self, session_id: str) -> Path:
        """Path of ``session_archive/<session_id>``; the id is validated first."""
        return self.archive / validate_id(session_id, what="session id")

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True if ``path`` resolves (symlinks followed) inside the memory root."""
        real = os.path.realpath(os.fspath(path))
        return real == str(self.memory) or real.startswith(str(self.memory) + os.sep)

"""Committed episodes on disk (seed 002's storage map)::

    memory/episodes/
      .episodes.lock              flock, never deleted: commits of two runtimes never drop rows
      index.yaml                  id, year, goal, environment, outcome, committed_at — the commit point
      <yyyy>/<episode_id>/
        episode.json              the finished episode
        processed                 written by the worker after the episode's records are committed

Commit order: ``episode.json`` (atomic), then ``index.yaml`` (atomic): the
index row is the commit point. A commit retried with an episode id already in
the index changes nothing, so a caller that lost the acknowledgement may
simply commit again. A commit that fails before the row landed removes its
file; a crash in between leaves an unindexed file that the next commit of the
same id overwrites. A corrupt index is rebuilt from the episode files that
parse. The worker leaves ``processed`` only after the records an episode
taught are committed, so a crash before it repeats the (idempotent) learning
and a crash after it never processes the episode again.

The experience service (:mod:`aiden.experience.service`) runs on two storage
seams only: :class:`EpisodeBackend` (committed episodes) and
:class:`~aiden.experience.recordstore.RecordBackend` (the records and
profiles they taught). So experience memory follows the session store: files
under the memory's root by default (:class:`EpisodeStore`,
:class:`~aiden.experience.recordstore.RecordStore`), rows in PostgreSQL for a
memory opened on a PostgreSQL store (:mod:`aiden.experience.postgres`),
where every worker sharing the long-term namespace learns from and recalls the
same records. :mod:`aiden.testing.conformance_experience` is the suite every
backend passes. Every method blocks: the experience actor calls them from a
worker thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec

from aiden.errors import AidenError, CorruptionError
from aiden.events import validate_id
from aiden.experience.episodes import Episode
from aiden.experience.records import parse_yaml_index, render_yaml_index
from aiden.lifecycle import Outcome
from aiden.longterm.files import ensure_dir, read_bounded
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import EPISODE_FILE_NAME, PROCESSED_FILE_NAME, Layout
from aiden.storage.locks import SessionLock
from aiden.storage.recovery import remove_stale_temps, subdirs

__all__ = ["EpisodeBackend", "EpisodeRow", "EpisodeStore", "episode_row", "episode_year"]

log = logging.getLogger("aiden.experience")

_MAX_EPISODE_BYTES: Final = 8 * 1024 * 1024
_INDEX_VERSION: Final = 1
_episode_decoder: Final = msgspec.json.Decoder(Episode)
_encoder: Final = msgspec.json.Encoder()


class EpisodeRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An episode's line in ``episodes/index.yaml``."""

    id: str
    year: str
    goal: str
    environment: str = ""
    outcome: Outcome = "unknown"
    committed_at: float


class _Index(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    version: int = _INDEX_VERSION
    episodes: tuple[EpisodeRow, ...] = ()


def episode_year(stamp: float) -> str:
    """The year folder of an episode started at ``stamp`` (UTC)."""
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y")


def _parse_index(data: bytes) -> _Index:
    index = parse_yaml_index(
        data, _Index, name="episodes/index.yaml", version=_INDEX_VERSION, ids=_ids, what="episode id"
    )
    for row in index.episodes:
        if not (len(row.year) == 4 and row.year.isdigit()):
            raise CorruptionError(f"episodes/index.yaml: bad year {row.year!r}")
    return index


def _ids(index: _Index) -> list[str]:
    return [row.id for row in index.episodes]


class EpisodeBackend(Protocol):
    """Committed episodes and which of them learning has processed."""

    def commit(self, episode: Episode, *, now: float) -> bool:
        """Persist ``episode``; False (and nothing written) when its id is already committed."""
        ...

    def rows(self) -> list[EpisodeRow]:
        """Every committed episode's row, in commit order."""
        ...

    def load(self, row: EpisodeRow) -> Episode | None:
        """The committed episode of ``row`` (None, reported, when it cannot be read)."""
        ...

    def get(self, episode_id: str) -> Episode | None:
        """The committed episode ``episode_id`` (None if unknown)."""
        ...

    def pending(self) -> list[EpisodeRow]:
        """Committed episodes not processed yet, in commit order."""
        ...

    def mark_processed(self, row: EpisodeRow, summary: dict[str, Any]) -> None:
        """Record that what ``row``'s episode taught is committed (``summary``: what, for inspection)."""
        ...


class EpisodeStore:
    """``memory/episodes/``; blocking methods, called from a worker thread."""

    def __init__(self, layout: Layout, storage: Storage, *, lock_timeout_s: float = 30.0) -> None:
        self.root = layout.episodes
        self._index_path = layout.episodes_index
        self._storage = storage
        self._lock = threading.Lock()
        self._flock = SessionLock(storage, layout.episodes_lock)
        self._lock_timeout_s = lock_timeout_s
        self.problems: list[str] = []
        self._cleaned = False

    def _clean_once(self) -> None:
        """Remove crash-left temp files (of the index, episode files, markers), once per store, under ``_lock``.

        At the first operation after the memory opened, on its worker thread: the walk
        visits every episode directory, so it stays off the open and the event loop.
        """
        if not self._cleaned:
            self._cleaned = True
            removed = remove_stale_temps(self._storage, subdirs(self.root, 2))
            if removed:
                log.warning("episode store: removed %d temp files of interrupted writes", removed)

    @property
    def index_path(self) -> Path:
        """``episodes/index.yaml``."""
        return self._index_path

    def episode_dir(self, episode_id: str, year: str) -> Path:
        """``episodes/<yyyy>/<episode_id>/``; the id is validated."""
        return self.root / year / validate_id(episode_id, what="episode id")

    def _problem(self, text: str) -> None:
        log.error("episode store: %s", text)
        if len(self.problems) < 50:
            self.problems.append(text)

    def _load_index(self) -> _Index:
        data = read_bytes(self.index_path) if self.index_path.exists() else b""
        try:
            return _parse_index(data) if data else _Index()
        except CorruptionError as exc:
            self._problem(f"{exc}; rebuilt the index from the episode files")
            return self._rebuild()

    def _rebuild(self) -> _Index:
        rows: list[EpisodeRow] = []
        for year in sorted(os.listdir(self.root)) if self.root.is_dir() else []:
            if not (len(year) == 4 and year.isdigit()):
                continue
            for name in sorted(os.listdir(self.root / year)):
                episode = self._read(self.root / year / name / EPISODE_FILE_NAME)
                if episode is not None and episode.id == name:
                    rows.append(episode_row(episode, year, episode.finished_at))
        rows.sort(key=lambda r: (r.committed_at, r.id))
        return _Index(episodes=tuple(rows))

    def _read(self, path: Path) -> Episode | None:
        text = read_bounded(path, _MAX_EPISODE_BYTES)
        if text is None:
            return None
        try:
            return _episode_decoder.decode(text.encode("utf-8"))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._problem(f"{path.name} of {path.parent.name}: {exc}")
            return None

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        with self._lock:
            ensure_dir(self._storage, self.root)
            self._flock.acquire(self._lock_timeout_s)
            try:
                self._clean_once()
                yield
            finally:
                self._flock.release()

    # --- operations (blocking) -------------------------------------------------------------
    def commit(self, episode: Episode, *, now: float) -> bool:
        """Persist ``episode``; False (and nothing written) when its id is already committed."""
        validate_id(episode.id, what="episode id")
        with self._exclusive():
            index = self._load_index()
            if any(row.id == episode.id for row in index.episodes):
                return False
            year = episode_year(episode.started_at)
            folder = self.episode_dir(episode.id, year)
            ensure_dir(self._storage, folder)
            path = folder / EPISODE_FILE_NAME
            self._storage.checkpoint("experience.commit.before_file")
            self._storage.write_atomic(path, _encoder.encode(episode))
            self._storage.checkpoint("experience.commit.after_file")
            new = _Index(episodes=(*index.episodes, episode_row(episode, year, now)))
            try:
                self._storage.write_atomic(self.index_path, render_yaml_index(new))
            except (AidenError, OSError):
                self._undo(index, new, path)
                raise
            self._storage.checkpoint("experience.commit.after_index")
            return True

    def _undo(self, old: _Index, new: _Index, path: Path) -> None:
        # The caller is told the commit failed: leave neither a row nor a file a rebuild would adopt.
        try:
            if read_bytes(self.index_path) == render_yaml_index(new):
                self._storage.write_atomic(self.index_path, render_yaml_index(old))
        except (AidenError, OSError) as exc:
            log.error("could not restore episodes/index.yaml after a failed commit: %s", exc)
        try:
            self._storage.unlink(path)
        except (AidenError, OSError) as exc:
            log.error("could not remove %s after a failed commit: %s", path, exc)

    def rows(self) -> list[EpisodeRow]:
        """Every committed episode's row, in commit order."""
        with self._lock:
            self._clean_once()
            return list(self._load_index().episodes)

    def load(self, row: EpisodeRow) -> Episode | None:
        """The committed episode of ``row`` (None, reported, if its file is missing or damaged)."""
        episode = self._read(self.episode_dir(row.id, row.year) / EPISODE_FILE_NAME)
        if episode is None:
            self._problem(f"episode {row.id} is missing or unreadable")
        return episode

    def get(self, episode_id: str) -> Episode | None:
        """The committed episode ``episode_id`` (None if unknown)."""
        validate_id(episode_id, what="episode id")
        row = next((r for r in self.rows() if r.id == episode_id), None)
        return None if row is None else self.load(row)

    def is_processed(self, row: EpisodeRow) -> bool:
        """True once the worker committed what this episode taught."""
        return (self.episode_dir(row.id, row.year) / PROCESSED_FILE_NAME).is_file()

    def pending(self) -> list[EpisodeRow]:
        """Committed episodes the worker has not processed yet, in commit order."""
        return [row for row in self.rows() if not self.is_processed(row)]

    def mark_processed(self, row: EpisodeRow, summary: dict[str, Any]) -> None:
        """Leave the ``processed`` marker (what was learned, as JSON, for inspection)."""
        path = self.episode_dir(row.id, row.year) / PROCESSED_FILE_NAME
        self._storage.write_atomic(path, _encoder.encode(summary))


def episode_row(episode: Episode, year: str, committed_at: float) -> EpisodeRow:
    """The index row of ``episode`` committed at ``committed_at`` (``year``: of its start)."""
    return EpisodeRow(
        id=episode.id,
        year=year,
        goal=episode.goal[:200],
        environment=episode.environment,
        outcome=episode.outcome,
        committed_at=committed_at,
    )

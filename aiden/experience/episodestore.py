"""Committed episodes on disk, the worker's ``processed`` markers, and the episodes' seam::

    memory/episodes/index.yaml                       the commit point
    memory/episodes/<yyyy>/<episode_id>/episode.json
    memory/episodes/<yyyy>/<episode_id>/processed    written once the episode's records are committed

``episode.json`` is written before its index row; a commit retried with a committed id changes
nothing, so a caller that lost the acknowledgement may commit again. A commit that fails before
its row landed removes its file; a corrupt index is rebuilt from the episode files that parse.
The service runs on :class:`EpisodeBackend` and
:class:`~aiden.experience.recordstore.RecordBackend`: these files by default, PostgreSQL rows for
a memory on a PostgreSQL store. Every method blocks (called from a worker thread).
"""

from __future__ import annotations

import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar

import msgspec

from aiden.errors import AidenError, CorruptionError
from aiden.events import validate_id
from aiden.experience.episodes import MAX_EVENTS_BYTES, Episode
from aiden.experience.records import parse_yaml_index, render_yaml_index
from aiden.lifecycle import Outcome
from aiden.longterm.files import ensure_dir, read_regular
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import EPISODE_FILE_NAME, PROCESSED_FILE_NAME, Layout
from aiden.storage.locks import SessionLock
from aiden.storage.recovery import remove_stale_temps, subdirs

__all__ = ["EpisodeBackend", "EpisodeRow", "EpisodeStore", "IndexedFiles", "episode_row", "episode_year"]

log = logging.getLogger("aiden.experience")

_MAX_EPISODE_BYTES: Final = MAX_EVENTS_BYTES + 2 * 1024 * 1024
"""The read limit: the recorder keeps an episode's events under MAX_EVENTS_BYTES; the rest is
room for its goal, note and recalled ids."""
_INDEX_VERSION: Final = 1
_episode_decoder: Final = msgspec.json.Decoder(Episode)
_encoder: Final = msgspec.json.Encoder()
Ix = TypeVar("Ix")


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


class EpisodeBackend(Protocol):
    """Committed episodes and which of them learning has processed."""

    def commit(self, episode: Episode, *, now: float) -> bool:
        """Persist ``episode``; False (and nothing written) when its id is already committed."""
        ...

    def rows(self) -> list[EpisodeRow]:
        """Every committed episode's row, in commit order."""
        ...

    def load(self, row: EpisodeRow) -> Episode | None:
        """The committed episode of ``row``: None, reported, when it cannot be read now (missing, too
        large); :class:`~aiden.errors.CorruptionError` when it will never be (it does not decode)."""
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


class IndexedFiles(ABC, Generic[Ix]):
    """A directory of files whose YAML index (``Ix``) is the commit point: what both file stores share.

    Writers hold a thread lock and a file lock (two runtimes on one root); a corrupt
    index is reported in :attr:`problems` and rebuilt from the files by :meth:`_rebuild`.
    """

    _name: str
    _depth: int
    """The directory levels that may hold temps."""

    def __init__(
        self, storage: Storage, root: Path, index_path: Path, lock_path: Path, lock_timeout_s: float
    ) -> None:
        self.root = root
        self.index_path = index_path
        self.problems: list[str] = []
        self._storage = storage
        self._lock = threading.Lock()
        self._flock = SessionLock(storage, lock_path)
        self._lock_timeout_s = lock_timeout_s
        self._cleaned = False
        self._parsed: tuple[tuple[int, int, int], Ix] | None = None

    def _clean_once(self) -> None:
        # Crash-left temp files, at the first operation (under _lock, on the worker thread): the
        # walk visits every directory of the store, so it stays off the open and the event loop.
        if not self._cleaned:
            self._cleaned = True
            removed = remove_stale_temps(self._storage, subdirs(self.root, self._depth))
            if removed:
                log.warning("%s: removed %d temp files of interrupted writes", self._name, removed)

    def _problem(self, text: str) -> None:
        log.error("%s: %s", self._name, text)
        if len(self.problems) < 50:
            self.problems.append(text)

    def _load_index(self) -> Ix:
        # Parsed again only when the file changed: every write is an atomic replace (a new inode),
        # and parsing a long-lived agent's index took seconds per recall.
        try:
            with open(self.index_path, "rb") as f:
                st = os.fstat(f.fileno())
                key = (st.st_ino, st.st_mtime_ns, st.st_size)
                if self._parsed is not None and self._parsed[0] == key:
                    return self._parsed[1]
                data = f.read()
        except FileNotFoundError:
            return self._parse(b"")  # a missing index reads as empty
        try:
            index = self._parse(data)
        except CorruptionError as exc:
            self._problem(f"{exc}; rebuilt the index from the files")
            index = self._rebuild()
        self._parsed = (key, index)
        return index

    @abstractmethod
    def _parse(self, data: bytes) -> Ix:
        """``data`` as the index (empty data: an empty index); :class:`CorruptionError` for anything else."""

    @abstractmethod
    def _rebuild(self) -> Ix:
        """The index made again from the files that parse."""

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        with self._lock:
            ensure_dir(self._storage, self.root)
            with self._flock.held(self._lock_timeout_s):
                self._clean_once()
                yield

    def _index(self) -> Ix:
        """The index, read under the thread lock (no file lock: every index write is an atomic replace)."""
        with self._lock:
            self._clean_once()
            return self._load_index()


class EpisodeStore(IndexedFiles[_Index]):
    """``memory/episodes/``; blocking methods, called from a worker thread."""

    _name = "episode store"
    _depth = 2

    def __init__(self, layout: Layout, storage: Storage, *, lock_timeout_s: float = 30.0) -> None:
        super().__init__(
            storage, layout.episodes, layout.episodes_index, layout.episodes_lock, lock_timeout_s
        )

    def _parse(self, data: bytes) -> _Index:
        index = parse_yaml_index(
            data,
            _Index,
            name="episodes/index.yaml",
            version=_INDEX_VERSION,
            ids=lambda index: [row.id for row in index.episodes],
            what="episode id",
        )
        for row in index.episodes:
            if not (len(row.year) == 4 and row.year.isdigit()):
                raise CorruptionError(f"episodes/index.yaml: bad year {row.year!r}")
        return index

    def episode_dir(self, episode_id: str, year: str) -> Path:
        """``episodes/<yyyy>/<episode_id>/``; the id is validated."""
        return self.root / year / validate_id(episode_id, what="episode id")

    def _rebuild(self) -> _Index:
        rows: list[EpisodeRow] = []
        for year in sorted(os.listdir(self.root)) if self.root.is_dir() else []:
            if not (len(year) == 4 and year.isdigit() and (self.root / year).is_dir()):
                continue  # not a year folder (a stray file of that name must not stop the rebuild)
            for name in sorted(os.listdir(self.root / year)):
                episode = self._read(self.root / year / name / EPISODE_FILE_NAME)
                if episode is not None and episode.id == name:
                    rows.append(episode_row(episode, year, episode.finished_at))
        rows.sort(key=lambda r: (r.committed_at, r.id))
        return _Index(episodes=tuple(rows))

    def _read(self, path: Path) -> Episode | None:
        try:
            return self._decoded(path)
        except CorruptionError as exc:
            self._problem(str(exc))
            return None

    def _decoded(self, path: Path) -> Episode | None:
        """The episode in ``path``: None if missing, CorruptionError if over the read limit or it does not decode."""
        data = read_regular(path, _MAX_EPISODE_BYTES + 1)
        if data is None:
            return None
        if len(data) > _MAX_EPISODE_BYTES:
            # Recorded episodes are bounded below the limit: one past it (an older aiden's, or damage)
            # will never be read, so it is set aside like an undecodable one rather than retried forever.
            raise CorruptionError(f"{path.name} of {path.parent.name} is larger than {_MAX_EPISODE_BYTES} bytes")
        try:
            return _episode_decoder.decode(data.decode("utf-8", errors="replace").encode("utf-8"))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptionError(f"{path.name} of {path.parent.name}: {exc}") from exc

    def commit(self, episode: Episode, *, now: float) -> bool:
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
        return list(self._index().episodes)

    def load(self, row: EpisodeRow) -> Episode | None:
        """The committed episode of ``row``: None, reported, if its file is missing;
        :class:`CorruptionError` if it is past the read limit or does not decode."""
        episode = self._decoded(self.episode_dir(row.id, row.year) / EPISODE_FILE_NAME)
        if episode is None:
            self._problem(f"episode {row.id} is missing")
        return episode

    def get(self, episode_id: str) -> Episode | None:
        """The committed episode ``episode_id`` (None if unknown or unreadable)."""
        validate_id(episode_id, what="episode id")
        row = next((r for r in self.rows() if r.id == episode_id), None)
        return None if row is None else self._read(self.episode_dir(row.id, row.year) / EPISODE_FILE_NAME)

    def pending(self) -> list[EpisodeRow]:
        """Committed episodes the worker has not processed yet (no ``processed`` marker), in commit order."""
        rows = self.rows()
        return [r for r in rows if not (self.episode_dir(r.id, r.year) / PROCESSED_FILE_NAME).is_file()]

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

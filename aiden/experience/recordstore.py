"""Experience records and environment profiles on disk (``memory/experience/``), and the records' seam.

:meth:`RecordStore.apply` writes every changed record file (atomic), then ``index.yaml`` once: the
index is the commit point, and a crash before it leaves files the worker's retry rewrites under the
same ids. Recall ranks index rows only and opens the files of the few it returns, so expired,
disputed and legacy records are never opened by a normal recall.
"""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Final

import msgspec

from aiden.errors import CorruptionError, InvalidIdError, RecallError, StorageError
from aiden.events import validate_id
from aiden.experience.episodes import environment_name
from aiden.experience.episodestore import IndexedFiles
from aiden.experience.ranking import RecordVectors, rank
from aiden.experience.records import (
    EnvironmentProfile,
    ExperienceRecord,
    RecordIndex,
    RecordRow,
    parse_index_yaml,
    parse_record_md,
    render_record_md,
    render_yaml_index,
)
from aiden.longterm.files import ensure_dir, read_bounded
from aiden.recall.embedding import Embedder
from aiden.storage.fs import Storage
from aiden.storage.layout import PROFILES_DIR_NAME, Layout
from aiden.storage.locks import SessionLock

__all__ = ["RecordBackend", "RecordStore", "merged_profile"]

log = logging.getLogger("aiden.experience")

_MAX_RECORD_BYTES: Final = 64 * 1024
_LEARN_LOCK_NAME: Final = ".learn.lock"
_MAX_PROFILE_OBSERVATIONS: Final = 200
_profile_decoder: Final = msgspec.json.Decoder(EnvironmentProfile)
_encoder: Final = msgspec.json.Encoder()


class RecordBackend(ABC):
    """Experience records (created or replaced by id) and environment profiles; recall over them is
    the same for every backend (BM25 over the index rows, fused with the records' vectors)."""

    vectors: RecordVectors | None
    """With an embedder, the records' vectors for hybrid recall."""

    @abstractmethod
    def apply(self, records: Sequence[ExperienceRecord]) -> None:
        """Create or replace ``records`` by id, all at once; a replaced record keeps its place in :meth:`rows`."""

    @abstractmethod
    def rows(self) -> list[RecordRow]:
        """Every record's row, oldest first."""

    @abstractmethod
    def learning(self) -> AbstractContextManager[bool]:
        """The learning lock, held around a whole learning pass: True when this pass holds it, False
        (at once) when another worker's pass does. Records read and applied under it are one pass's."""

    @abstractmethod
    def load(self, row: RecordRow) -> ExperienceRecord | None:
        """The record of ``row`` (None, reported, if it is missing or damaged)."""

    def records(self, *, environment: str | None = None, now: float | None = None) -> list[ExperienceRecord]:
        """Every record (any status) of ``environment`` (None: all); unexpired ones only when ``now`` is given."""
        # Compared normalized: a record stored before names were normalized keeps "acme  prod".
        asked = None if environment is None else environment_name(environment)
        rows = [
            row
            for row in self.rows()
            if (asked is None or environment_name(row.environment) == asked)
            and (now is None or not row.expired(now))
        ]
        return [record for row in rows if (record := self.load(row)) is not None]

    @abstractmethod
    def save_profile(self, profile: EnvironmentProfile) -> EnvironmentProfile:
        """Merge ``profile``'s observations into its environment's stored profile (newest value wins)."""

    @abstractmethod
    def profile(self, environment: str) -> EnvironmentProfile | None:
        """The stored profile of ``environment`` (None if none)."""

    def _embed(self, records: Sequence[ExperienceRecord]) -> None:
        """Embed the active ``records`` just written, in the learning pass: recall finds them ready."""
        if self.vectors is not None:
            try:
                self.vectors.update([r.row() for r in records if r.status == "active"])
            except RecallError as exc:
                _lexical(exc)

    def search(
        self,
        terms: Sequence[str],
        *,
        now: float,
        k: int,
        environment: str | None = None,
        kinds: Sequence[str] | None = None,
        query: str = "",
    ) -> list[ExperienceRecord]:
        """The ``k`` best active, unexpired, applicable records for ``terms``; only those are opened.

        Applicable: same ``environment`` or a record for every environment (""), of ``kinds`` when
        given. With vectors and a ``query`` (the text ``terms`` came from), a record sharing no term
        may be returned; BM25 alone if the vectors fail.
        """
        active = [r for r in self.rows() if r.status == "active"]
        asked = None if environment is None else environment_name(environment)
        candidates = [
            r
            for r in active
            if not r.expired(now)
            and (asked is None or environment_name(r.environment) in (asked, ""))
            and (kinds is None or r.kind in kinds)
        ]
        near = None
        if self.vectors is not None and query.strip() and candidates:
            try:
                near = self.vectors.near(candidates, query)
            except RecallError as exc:
                _lexical(exc)
            _save_vectors(self.vectors, active)
        out: list[ExperienceRecord] = []
        for row in rank(candidates, terms, near):
            if len(out) >= k:
                break
            record = self.load(row)
            if record is not None and record.status == "active" and not record.expired(now):
                out.append(record)
        return out

    def save_vectors(self) -> bool:
        """Write the vectors file if vectors were computed since it was last written (a learning pass
        calls it once at its end); whether it was. Never raises for it: the file is derived."""
        if self.vectors is None or not self.vectors.dirty:
            return False  # nothing to write: spare the index read
        return _save_vectors(self.vectors, [r for r in self.rows() if r.status == "active"])


class RecordStore(IndexedFiles[RecordIndex], RecordBackend):
    """``memory/experience/``; blocking methods, called from a worker thread."""

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        *,
        lock_timeout_s: float = 30.0,
        embedder: Embedder | None = None,
    ) -> None:
        super().__init__(
            storage,
            layout.experience,
            layout.experience_index,
            layout.records_lock,
            lock_timeout_s,
            parse=parse_index_yaml,
            depth=1,
            name="experience store",
        )
        self.files_read: list[str] = []
        """Ids of the record files opened, in order (tests check what recall never touches)."""
        # Records whose file was found ahead of its index row (a crash between the two): the next
        # apply commits their rows, since the learner, reading the file, sees nothing to write.
        self._ahead: set[str] = set()
        self.vectors = (
            RecordVectors(embedder, layout.experience_vectors, storage) if embedder is not None else None
        )

    def record_path(self, kind: str, record_id: str) -> Path:
        """``experience/<kind>/<id>.md``; the id is validated."""
        return self.root / kind / f"{validate_id(record_id, what='record id')}.md"

    def profile_path(self, environment: str) -> Path:
        """``experience/profiles/<sha>.json`` (hashed: an environment name is free text)."""
        digest = hashlib.sha256(environment.encode("utf-8")).hexdigest()[:24]
        return self.root / PROFILES_DIR_NAME / f"{digest}.json"

    def _rebuild(self) -> RecordIndex:
        rows: list[RecordRow] = []
        for folder in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            if not folder.is_dir() or folder.name == PROFILES_DIR_NAME:
                continue
            for path in sorted(folder.glob("*.md")):
                record = self._read(path, path.stem)
                if record is not None and record.kind == folder.name:
                    rows.append(record.row())
        rows.sort(key=lambda r: (r.created_at, r.id))
        return RecordIndex(records=tuple(rows))

    def _read(self, path: Path, record_id: str) -> ExperienceRecord | None:
        text = read_bounded(path, _MAX_RECORD_BYTES)
        if text is None:
            return None
        self.files_read.append(record_id)
        try:
            record = parse_record_md(text)
        except CorruptionError as exc:
            self._problem(f"{path.name}: {exc}")
            return None
        return record if record.id == record_id else None

    @contextmanager
    def learning(self) -> Iterator[bool]:
        """``experience/.learn.lock`` (flock), held for the block if it was free."""
        lock = SessionLock(self._storage, self.root / _LEARN_LOCK_NAME)
        held = lock.try_acquire()
        try:
            yield held
        finally:
            lock.close()

    def apply(self, records: Sequence[ExperienceRecord]) -> None:
        """Create or replace ``records`` (by id): their files, then one index write (the commit point).

        Rows found behind their files (an earlier apply's crash) are committed with them.
        """
        if not records and not self._ahead:
            return
        # Every file rendered first: a record that cannot be written leaves nothing half-applied.
        files = [
            (self.record_path(r.kind, r.id), render_record_md(r).encode("utf-8")) for r in records
        ]
        with self._exclusive():
            index = self._load_index()
            for path, data in files:
                ensure_dir(self._storage, path.parent)
                self._storage.write_atomic(path, data)
            self._storage.checkpoint("experience.records.after_files")
            changed = {r.id: r.row() for r in records}
            ahead, self._ahead = self._ahead, set()
            for row in index.records:
                if row.id in ahead and row.id not in changed:
                    record = self._read(self.record_path(row.kind, row.id), row.id)
                    if record is not None and _behind(row, record):
                        changed[row.id] = _as_indexed(record, row).row()
            if not changed:
                return
            rows = [changed.pop(row.id, row) for row in index.records]
            rows.extend(changed.values())
            self._storage.write_atomic(self.index_path, render_yaml_index(RecordIndex(records=tuple(rows))))
            self._storage.checkpoint("experience.records.after_index")
        self._embed(records)  # outside the file lock

    def rows(self) -> list[RecordRow]:
        """Every record's index row, oldest first."""
        return list(self._index().records)

    def load(self, row: RecordRow) -> ExperienceRecord | None:
        """The record of ``row``, its status and expiry as the index (the commit point) says."""
        try:
            record = self._read(self.record_path(row.kind, row.id), row.id)
        except InvalidIdError:  # a row a caller built: no record has that id
            return None
        if record is None:
            self._problem(f"record {row.id} is missing or unreadable")
            return None
        if _behind(row, record):
            self._ahead.add(row.id)
        return _as_indexed(record, row)

    # --- environment profiles -----------------------------------------------------------------
    def save_profile(self, profile: EnvironmentProfile) -> EnvironmentProfile:
        """Merge ``profile``'s observations into the stored profile of its environment (newest value wins)."""
        with self._exclusive():
            new = merged_profile(self.profile(profile.environment), profile)
            path = self.profile_path(profile.environment)
            ensure_dir(self._storage, path.parent)
            self._storage.write_atomic(path, _encoder.encode(new))
            return new

    def profile(self, environment: str) -> EnvironmentProfile | None:
        """The stored profile of ``environment`` (None if none or unreadable)."""
        text = read_bounded(self.profile_path(environment), _MAX_RECORD_BYTES)
        if text is None:
            return None
        try:
            found = _profile_decoder.decode(text.encode("utf-8"))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._problem(f"profile of {environment!r}: {exc}")
            return None
        return found if found.environment == environment else None


def _as_indexed(record: ExperienceRecord, row: RecordRow) -> ExperienceRecord:
    """``record`` with the status and expiry of its index row (the commit point)."""
    if record.status != row.status or record.expires_at != row.expires_at:
        return msgspec.structs.replace(record, status=row.status, expires_at=row.expires_at)
    return record


def _behind(row: RecordRow, record: ExperienceRecord) -> bool:
    """``row`` misses a change its record file has (the apply that wrote the file crashed before the index).

    Compared on what the file and the YAML index keep exactly (terms ignore spacing and line breaks).
    """
    fresh = record.row()
    return (fresh.updated_at, fresh.terms, fresh.task_terms) != (row.updated_at, row.terms, row.task_terms)


def merged_profile(old: EnvironmentProfile | None, profile: EnvironmentProfile) -> EnvironmentProfile:
    """``profile`` with ``old``'s observations under its own (newest value wins, the newest 200 kept)."""
    merged = dict(old.observations) if old is not None else {}
    for key in profile.observations:
        merged.pop(key, None)  # a re-observed key moves to the newest end, so the trim keeps it
    merged.update(profile.observations)
    keep = dict(list(merged.items())[-_MAX_PROFILE_OBSERVATIONS:])
    return msgspec.structs.replace(profile, observations=keep)


def _lexical(exc: RecallError) -> None:
    """The embedder or the cache failed: logged, and recall stays lexical."""
    log.warning("experience recall: vectors unavailable, ranking by BM25 only: %s", exc)


def _save_vectors(vectors: RecordVectors, active: Sequence[RecordRow]) -> bool:
    """Write the vectors file for ``active``; False, logged, when it cannot be (the file is derived)."""
    # Not under the records lock: an atomic replace lets a concurrent writer's file win whole, and
    # a recall never waits on another process's learning pass for a derived file.
    try:
        return vectors.save(active)
    except StorageError as exc:
        log.warning("experience recall: could not write %s, kept in memory: %s", vectors.path, exc)
        return False

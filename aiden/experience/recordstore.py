"""Experience records and environment profiles on disk::

    memory/experience/
      .records.lock               flock, never deleted
      index.yaml                  every record's row (status, environment, terms, expires_at) — the commit point
      <kind>/<record_id>.md       one small Markdown file per record
      profiles/<sha>.json         deterministic observations per environment, apart from the lessons
      vectors.msgpack             with an embedder: the active records' vectors (derived, see ranking.py)

:meth:`RecordStore.apply` writes every changed record file (atomic), then the
index once: a crash before the index leaves files the index does not point
to yet (or files one step ahead of their row), which the worker's retry of
the same episode rewrites with the same ids. Recall ranks index rows only (and,
with an embedder, vectors of the rows' text, kept across opens) and opens the
files of the few it returns, so expired, disputed and legacy records are
never opened by a normal recall.

:class:`RecordBackend` is the seam the experience service uses for records
and profiles: :class:`RecordStore` on files, and
:class:`~aiden.experience.postgres.PgRecordStore` (see
:mod:`aiden.experience.episodestore` for both seams).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final, Protocol, TypeVar

import msgspec

from aiden.errors import CorruptionError, InvalidIdError, RecallError, StorageError
from aiden.events import validate_id
from aiden.experience.ranking import RecordVectors, rank
from aiden.experience.records import (
    EnvironmentProfile,
    ExperienceRecord,
    RecordIndex,
    RecordRow,
    parse_index_yaml,
    parse_record_md,
    render_index_yaml,
    render_record_md,
)
from aiden.longterm.files import ensure_dir, read_bounded
from aiden.recall.embedding import Embedder
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import PROFILES_DIR_NAME, Layout
from aiden.storage.locks import SessionLock
from aiden.storage.recovery import remove_stale_temps, subdirs

__all__ = [
    "RecordBackend",
    "RecordStore",
    "best_records",
    "embed_quietly",
    "merged_profile",
    "save_vectors_quietly",
]

log = logging.getLogger("aiden.experience")

_MAX_RECORD_BYTES: Final = 64 * 1024
_MAX_PROFILE_OBSERVATIONS: Final = 200
_profile_decoder: Final = msgspec.json.Decoder(EnvironmentProfile)
_encoder: Final = msgspec.json.Encoder()
R = TypeVar("R")


class RecordBackend(Protocol):
    """Experience records (created or replaced by id) and environment profiles."""

    def apply(self, records: Sequence[ExperienceRecord]) -> None:
        """Create or replace ``records`` by id, all at once; a replaced record keeps its place in :meth:`rows`."""
        ...

    def rows(self) -> list[RecordRow]:
        """Every record's row, oldest first."""
        ...

    def records(self, *, environment: str | None = None, now: float | None = None) -> list[ExperienceRecord]:
        """Every record (any status) of ``environment`` (None: all); unexpired ones only when ``now`` is given."""
        ...

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
        """The ``k`` best active, unexpired records of ``environment`` (or for every one) for ``terms``."""
        ...

    def save_vectors(self) -> bool:
        """Persist vectors computed since the last call, if the backend keeps any; whether it wrote."""
        ...

    def save_profile(self, profile: EnvironmentProfile) -> EnvironmentProfile:
        """Merge ``profile``'s observations into its environment's stored profile (newest value wins)."""
        ...

    def profile(self, environment: str) -> EnvironmentProfile | None:
        """The stored profile of ``environment`` (None if none)."""
        ...


class RecordStore:
    """``memory/experience/``; blocking methods, called from a worker thread."""

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        *,
        lock_timeout_s: float = 30.0,
        embedder: Embedder | None = None,
    ) -> None:
        self.root = layout.experience
        self._index_path = layout.experience_index
        self._storage = storage
        self._lock = threading.Lock()
        self._flock = SessionLock(storage, layout.records_lock)
        self._lock_timeout_s = lock_timeout_s
        self.files_read: list[str] = []
        """Ids of the record files opened, in order (tests check what recall never touches)."""
        self.problems: list[str] = []
        self._cleaned = False
        self.vectors = (
            RecordVectors(embedder, layout.experience_vectors, storage) if embedder is not None else None
        )
        """With an embedder, the records' vectors for hybrid recall."""

    def _clean_once(self) -> None:
        """Remove crash-left temp files (index, record files, profiles), once per store, under ``_lock``."""
        if not self._cleaned:
            self._cleaned = True
            removed = remove_stale_temps(self._storage, subdirs(self.root, 1))
            if removed:
                log.warning("experience store: removed %d temp files of interrupted writes", removed)

    @property
    def index_path(self) -> Path:
        """``experience/index.yaml``."""
        return self._index_path

    def record_path(self, kind: str, record_id: str) -> Path:
        """``experience/<kind>/<id>.md``; the id is validated."""
        return self.root / kind / f"{validate_id(record_id, what='record id')}.md"

    def profile_path(self, environment: str) -> Path:
        """``experience/profiles/<sha>.json`` (hashed: an environment name is free text)."""
        digest = hashlib.sha256(environment.encode("utf-8")).hexdigest()[:24]
        return self.root / PROFILES_DIR_NAME / f"{digest}.json"

    def _problem(self, text: str) -> None:
        log.error("experience store: %s", text)
        if len(self.problems) < 50:
            self.problems.append(text)

    def _load_index(self) -> RecordIndex:
        data = read_bytes(self.index_path) if self.index_path.exists() else b""
        try:
            return parse_index_yaml(data) if data else RecordIndex()
        except CorruptionError as exc:
            self._problem(f"{exc}; rebuilt the index from the record files")
            return self._rebuild()

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
    def apply(self, records: Sequence[ExperienceRecord]) -> None:
        """Create or replace ``records`` (by id): their files, then one index write (the commit point)."""
        if not records:
            return
        with self._exclusive():
            index = self._load_index()
            for record in records:
                path = self.record_path(record.kind, record.id)
                ensure_dir(self._storage, path.parent)
                self._storage.write_atomic(path, render_record_md(record).encode("utf-8"))
            self._storage.checkpoint("experience.records.after_files")
            changed = {r.id: r.row() for r in records}
            rows = [changed.pop(row.id, row) for row in index.records]
            rows.extend(changed.values())
            self._storage.write_atomic(
                self.index_path, render_index_yaml(RecordIndex(records=tuple(rows))).encode()
            )
            self._storage.checkpoint("experience.records.after_index")
        if self.vectors is not None:
            # Embedded now, in the learning pass, so that recall finds them ready (outside the file lock).
            embed_quietly(
                self.vectors, lambda v: v.update([r.row() for r in records if r.status == "active"])
            )

    def rows(self) -> list[RecordRow]:
        """Every record's index row, oldest first."""
        with self._lock:
            self._clean_once()
            return list(self._load_index().records)

    def load(self, row: RecordRow) -> ExperienceRecord | None:
        """The record of ``row``, its status and expiry as the index (the commit point) says."""
        try:
            record = self._read(self.record_path(row.kind, row.id), row.id)
        except InvalidIdError:
            return None
        if record is None:
            self._problem(f"record {row.id} is missing or unreadable")
            return None
        if record.status != row.status or record.expires_at != row.expires_at:
            record = msgspec.structs.replace(record, status=row.status, expires_at=row.expires_at)
        return record

    def records(self, *, environment: str | None = None, now: float | None = None) -> list[ExperienceRecord]:
        """Every record (any status) of ``environment`` (None: all); unexpired ones only when ``now`` is given."""
        out: list[ExperienceRecord] = []
        for row in self.rows():
            if environment is not None and row.environment != environment:
                continue
            if now is not None and row.expired(now):
                continue
            record = self.load(row)
            if record is not None:
                out.append(record)
        return out

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
        """The ``k`` best active, unexpired, applicable records for ``terms`` (see :func:`best_records`).

        Only the returned records' files are opened.
        """
        return best_records(
            self.rows(),
            terms,
            now=now,
            k=k,
            environment=environment,
            kinds=kinds,
            query=query,
            vectors=self.vectors,
            load=self.load,
        )

    def save_vectors(self) -> bool:
        """Write the vectors file if vectors were computed since it was last written (a learning pass
        calls it once at its end); whether it was. Never raises for it: the file is derived."""
        if self.vectors is None or not self.vectors.dirty:
            return False  # nothing to write: spare the index read
        return save_vectors_quietly(self.vectors, [r for r in self.rows() if r.status == "active"])

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


def merged_profile(old: EnvironmentProfile | None, profile: EnvironmentProfile) -> EnvironmentProfile:
    """``profile`` with ``old``'s observations under its own (newest value wins, the newest 200 kept)."""
    merged = dict(old.observations) if old is not None else {}
    merged.update(profile.observations)
    keep = dict(list(merged.items())[-_MAX_PROFILE_OBSERVATIONS:])
    return msgspec.structs.replace(profile, observations=keep)


def best_records(
    rows: Sequence[RecordRow],
    terms: Sequence[str],
    *,
    now: float,
    k: int,
    environment: str | None,
    kinds: Sequence[str] | None,
    query: str,
    vectors: RecordVectors | None,
    load: Callable[[RecordRow], ExperienceRecord | None],
) -> list[ExperienceRecord]:
    """The ``k`` best active, unexpired, applicable records for ``terms`` among ``rows`` (BM25 over the rows).

    Applicable: same ``environment`` or a record for every environment ("");
    of ``kinds`` when given; sharing at least one term. With ``vectors`` and
    a ``query`` (the text ``terms`` came from), BM25 fused with the rows'
    similarity to the query (:mod:`aiden.experience.ranking`), so a record
    sharing no term may be returned; BM25 alone if that fails. ``load`` opens
    a row's record; only the returned ones are opened.
    """
    active = [r for r in rows if r.status == "active"]
    candidates = [
        r
        for r in active
        if not r.expired(now)
        and (environment is None or r.environment in (environment, ""))
        and (kinds is None or r.kind in kinds)
    ]
    near = None
    if vectors is not None and query.strip() and candidates:
        near = embed_quietly(vectors, lambda v: v.near(candidates, query))
        save_vectors_quietly(vectors, active)
    out: list[ExperienceRecord] = []
    for row in rank(candidates, terms, near):
        if len(out) >= k:
            break
        record = load(row)
        if record is not None and record.status == "active" and not record.expired(now):
            out.append(record)
    return out


def embed_quietly(vectors: RecordVectors, work: Callable[[RecordVectors], R]) -> R | None:
    """``work`` on the vectors; None, logged, if the embedder or the cache fails (recall stays lexical)."""
    try:
        return work(vectors)
    except RecallError as exc:
        log.warning("experience recall: vectors unavailable, ranking by BM25 only: %s", exc)
        return None


def save_vectors_quietly(vectors: RecordVectors, active: Sequence[RecordRow]) -> bool:
    """Write the vectors file for ``active``; False, logged, when it cannot be (the file is derived)."""
    # Not under any records lock: the write is an atomic replace with a unique temp file, so a
    # concurrent writer's file wins whole (a reader never sees a torn one), and a recall never
    # waits on another process's learning pass for a derived file.
    try:
        return vectors.save(active)
    except StorageError as exc:
        log.warning("experience recall: could not write %s, kept in memory: %s", vectors.path, exc)
        return False

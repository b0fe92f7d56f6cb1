"""Experience records and environment profiles on disk (``memory/experience/``), and the records' seam.

:meth:`RecordStore.apply` writes every changed record file (atomic), then ``index.yaml`` once: the
index is the commit point, and a crash before it leaves files the worker's retry rewrites under the
same ids. Recall ranks index rows only and opens the files of the few it returns, so expired,
disputed and legacy records are never opened by a normal recall.

Recall (:func:`rank`) orders the rows by BM25 over their terms, fused with vector similarity by
reciprocal rank when there is an embedder (the chunk recall's fusion and parameters); then each
task's working step before its failures. The vectors are keyed by record id and :func:`text_key`, so
a changed record or model is embedded again without opening a record file; kept in
``experience/vectors.msgpack`` (on a PostgreSQL root, ``experience/vectors/<namespace>.msgpack``) so
a reopened memory does not embed every record again. A bad file is ignored (one warning) and
rewritten; the last of two writers wins whole (atomic replace). Any fault in the vectors or the
embedder is a :class:`~aiden.errors.RecallError`, on which recall stays lexical.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Final

import msgspec

from aiden.errors import CorruptionError, InvalidIdError, RecallError, StorageError
from aiden.events import validate_id
from aiden.experience.episodes import environment_name
from aiden.experience.episodestore import IndexedFiles
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
from aiden.recall.search import META_ROWS, reciprocal_rank_fusion
from aiden.storage.fs import Storage
from aiden.storage.layout import PROFILES_DIR_NAME, Layout
from aiden.storage.locks import SessionLock

__all__ = [
    "VECTORS_VERSION",
    "RecordBackend",
    "RecordStore",
    "RecordVectors",
    "bm25",
    "merged_profile",
    "nearest",
    "rank",
    "row_text",
    "text_key",
]

log = logging.getLogger("aiden.experience")


def nearest(vectors: Sequence[Sequence[float]], query: Sequence[float], limit: int = META_ROWS) -> list[int]:
    """Positions in ``vectors`` (unit length, as the query) most similar to ``query``, best first.

    Cosines are rounded to 6 places (equally similar vectors differ in the last
    bits), ties go to the higher position: the more recent row, as in the fusion.
    """
    scored = [
        (round(math.fsum(a * b for a, b in zip(v, query, strict=True)), 6), i) for i, v in enumerate(vectors)
    ]
    scored.sort(reverse=True)
    return [i for _, i in scored[:limit]]


def rank(
    rows: Sequence[RecordRow], terms: Sequence[str], near: Sequence[int] | None = None
) -> list[RecordRow]:
    """``rows`` to return for ``terms``, best first: the rows sharing a term, by BM25, or with ``near``
    (positions in ``rows``, most similar to the query first) BM25 and vector ranks fused, so a row
    sharing no word with the query can come first. Either way grouped by task, working steps first.
    """
    lexical = bm25(rows, list(dict.fromkeys(terms)))
    if near is None:
        return _procedures_first(lexical)
    position = {row.id: i for i, row in enumerate(rows)}
    fused = reciprocal_rank_fusion([[position[row.id] for row in lexical], list(near)])
    return _procedures_first([rows[i] for i, _ in fused[:META_ROWS]])


def _procedures_first(ranked: list[RecordRow]) -> list[RecordRow]:
    """``ranked`` grouped by task (environment, goal), groups in the order of their best row; in
    each group the working steps (procedures, calibrations) first. A failure record names what
    worked instead, so the working step is the answer and the failure the warning beside it."""
    groups: dict[tuple[str, str], list[RecordRow]] = {}
    for row in ranked:
        groups.setdefault((row.environment, row.goal), []).append(row)
    return [
        row
        for rows in groups.values()
        for row in sorted(rows, key=lambda r: r.kind not in ("procedure", "calibration"))
    ]


def bm25(rows: Sequence[RecordRow], terms: Sequence[str]) -> list[RecordRow]:
    """``rows`` sharing a term with ``terms``, best first (ties: newest first)."""
    if not rows or not terms:
        return []
    k1, b = 1.2, 0.75  # BM25's usual term saturation and length normalization
    n = len(rows)
    avg = sum(len(r.terms) for r in rows) / n or 1.0
    # Only the rows sharing a query term are scored (recall runs on every row of a long-lived index).
    wanted = frozenset(terms)
    df = Counter(t for r in rows for t in wanted.intersection(r.terms))
    scored: list[tuple[float, float, RecordRow]] = []
    for row in rows:
        if wanted.isdisjoint(row.terms) and wanted.isdisjoint(row.task_terms):
            continue
        score = 0.0
        for term in terms:
            # BM25F-like: a term of the task the record serves counts twice (its step and output once).
            f = row.terms.count(term) + row.task_terms.count(term)
            if f:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(row.terms) / avg))
        if score > 0:
            scored.append((score, row.updated_at, row))
    scored.sort(key=lambda t: (-t[0], -t[1], t[2].id))
    return [row for _, _, row in scored]


VECTORS_VERSION: Final = 1
"""The version of the vectors file's format; a file of another version is ignored."""
# Thousands of records of 1,536 dimensions fit; a larger file is not one aiden wrote.
_MAX_FILE_BYTES: Final = 256 * 1024 * 1024


class _Entry(msgspec.Struct, frozen=True, array_like=True):
    id: str
    key: str
    vector: list[float]


class _VectorsFile(msgspec.Struct, frozen=True):
    version: int
    model: str
    dimensions: int
    entries: list[_Entry]


_vectors_encoder: Final = msgspec.msgpack.Encoder()
_vectors_decoder: Final = msgspec.msgpack.Decoder(_VectorsFile)


def row_text(row: RecordRow) -> str:
    """The text embedded for ``row``: its title, then its search terms (task, step and body words)."""
    return f"{row.title}\n{' '.join(row.terms)}"


def text_key(model: str, text: str) -> str:
    """The cache key of ``text`` embedded by ``model``: a changed record or model is embedded again."""
    return hashlib.sha256(f"{model}\x1f{text}".encode("utf-8", "replace")).hexdigest()[:32]


class RecordVectors:
    """Record id -> (text key, unit vector) for one embedder, persisted in ``path``; thread-safe."""

    def __init__(self, embedder: Embedder, path: Path, storage: Storage) -> None:
        self.embedder = embedder
        self.path = path
        self._storage = storage
        self.entries: dict[str, tuple[str, list[float]]] = {}
        """The cache (tests damage it to check that recall stays lexical)."""
        self.dirty = False
        """Vectors were computed since the file was last read or written."""
        self._loaded = False
        self._lock = threading.RLock()  # near() updates under it

    def update(self, rows: Sequence[RecordRow]) -> int:
        """Embed the ``rows`` without a current vector, in one call; how many were embedded."""
        with self._lock:
            self._load_once()
            model = self.embedder.name
            todo: dict[str, tuple[str, str]] = {}
            for row in {row.id: row for row in rows}.values():  # a record written twice: its last version
                text = row_text(row)
                key = text_key(model, text)
                entry = self.entries.get(row.id)
                if entry is None or entry[0] != key:
                    todo[row.id] = (key, text)
            if not todo:
                return 0
            vectors = self.embedder.embed([text for _, text in todo.values()])
            if len(vectors) != len(todo):
                raise RecallError(f"embedder {model!r} returned {len(vectors)} vectors for {len(todo)} texts")
            for (rid, (key, _)), vector in zip(todo.items(), vectors, strict=True):
                self.entries[rid] = (key, [float(x) for x in vector])
            self.dirty = True
            return len(todo)

    def near(self, rows: Sequence[RecordRow], query: str) -> list[int]:
        """Positions in ``rows`` most similar to ``query``, best first (missing vectors embedded first).

        :class:`RecallError` if the embedder fails or a cached vector does not fit the query's: the
        cache is then dropped, to be rebuilt by the next recall.
        """
        with self._lock:
            self.update(rows)
            out = self.embedder.embed([query.encode("utf-8", "replace").decode("utf-8")])
            if len(out) != 1:
                raise RecallError(f"embedder {self.embedder.name!r} returned {len(out)} vectors for 1 text")
            vector = out[0]
            width = len(vector)
            found = [self.entries[row.id][1] for row in rows]
            if not all(len(v) == width and all(math.isfinite(x) for x in v) for v in [vector, *found]):
                self.entries.clear()
                raise RecallError(f"cached record vectors do not fit the {width}-dimension query vector")
            return nearest(found, vector)

    # --- the file ---------------------------------------------------------------------------
    def _load_once(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        problem = self._read()
        if problem is not None:
            # The vectors are computed as without the file, which the next save replaces.
            log.warning(
                "experience recall: ignored %s (%s); its vectors are computed again", self.path, problem
            )
            self.dirty = True

    def _read(self) -> str | None:
        """Fill the cache from the file; what is wrong with it, None if it is fine or absent."""
        try:
            with open(self.path, "rb") as f:
                data = f.read(_MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"unreadable: {exc.strerror}"
        if len(data) > _MAX_FILE_BYTES:
            return f"larger than {_MAX_FILE_BYTES} bytes"
        try:
            found = _vectors_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return f"does not decode: {exc}"
        if found.version != VECTORS_VERSION:
            return f"version {found.version}, not {VECTORS_VERSION}"
        if found.model != self.embedder.name:
            # Written with another embedder: none of its keys can match. Not damage, so no warning.
            log.info(
                "experience recall: %s holds vectors of %r, not of %r",
                self.path,
                found.model,
                self.embedder.name,
            )
            return None
        expected = self.embedder.dimensions
        if found.dimensions < 1 or (expected is not None and found.dimensions != expected):
            return f"{found.dimensions} dimensions, the embedder's are {expected}"
        for entry in found.entries:
            if len(entry.vector) != found.dimensions or not all(math.isfinite(x) for x in entry.vector):
                return f"the vector of {entry.id!r} is not {found.dimensions} finite numbers"
        for entry in found.entries:
            self.entries.setdefault(entry.id, (entry.key, entry.vector))
        return None

    def save(self, live: Sequence[RecordRow]) -> bool:
        """Write the file if vectors were computed since it was read or written; whether it was.

        Only the current vectors of ``live`` (the records recall may rank) are written. A
        :class:`~aiden.errors.StorageError` leaves the cache to be written by the next save.
        """
        with self._lock:
            if not self.dirty:
                return False
            model = self.embedder.name
            entries = [
                _Entry(row.id, entry[0], entry[1])
                for row in {row.id: row for row in live}.values()
                if (entry := self.entries.get(row.id)) is not None
                and entry[0] == text_key(model, row_text(row))
            ]
            widths = {len(e.vector) for e in entries}
            if len(widths) > 1:
                # Mixed lengths (an embedder that changed size): the next recall drops and rebuilds them.
                return False
            dimensions = widths.pop() if widths else self.embedder.dimensions or 0
            if dimensions < 1:
                return False
            data = _vectors_encoder.encode(_VectorsFile(VECTORS_VERSION, model, dimensions, entries))
            # A PostgreSQL memory's root has no experience folder of records to put it in.
            self._storage.mkdir(self.path.parent)
            self._storage.write_atomic(self.path, data)
            self.dirty = False
            return True


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
        asked = None if environment is None else environment_name(environment)

        def keep(item: RecordRow | ExperienceRecord) -> bool:
            # Compared normalized: a record stored before names were normalized keeps "acme  prod".
            env_ok = asked is None or environment_name(item.environment) == asked
            return env_ok and (now is None or not item.expired(now))

        return self._kept(keep)

    def _kept(self, keep: Callable[[RecordRow | ExperienceRecord], bool]) -> list[ExperienceRecord]:
        """The records ``keep`` accepts, judged by their rows: the others are never opened."""
        return [record for row in self.rows() if keep(row) and (record := self.load(row)) is not None]

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

    _name = "experience store"
    _depth = 1

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        *,
        lock_timeout_s: float = 30.0,
        embedder: Embedder | None = None,
    ) -> None:
        super().__init__(
            storage, layout.experience, layout.experience_index, layout.records_lock, lock_timeout_s
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

    def _parse(self, data: bytes) -> RecordIndex:
        return parse_index_yaml(data)

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

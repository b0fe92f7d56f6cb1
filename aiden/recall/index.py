"""The recall index: SQLite FTS5 over the active session's chunks (``recall.sqlite3``).

The database is derived data. Its sources of truth are ``chunks/index.yaml``
(with its sealed segments) and the chunk files; deleting the database is always
allowed, and it is rebuilt from scratch when it is missing, corrupt, of another
schema version, or out of date.

**What is indexed.** One FTS5 row (a *doc*) per chunk summary and per event of
a chunk (content, tool name and tool arguments). ``docs`` keeps, per row, the
chunk, the event's seq, type, role and timestamp, so a hit names exact seq
spans. The docs of one chunk get consecutive rowids, which lets a query ask
FTS5 about one chunk only (``rowid BETWEEN doc_lo AND doc_hi``).

**Sources.** Chunks listed in index.yaml have ``source == "active"`` whatever
their id looks like. A chunk file that exists with a valid header but is not in
the index (a compaction between writing the file and committing index.yaml, or
a crash in that window) is indexed with ``source == "pending"``; when a later
index.yaml commits it, it switches to ``"active"``; when the file disappears,
it is removed. Chunk ids are opaque: state is never inferred from their text.
Archived sessions are never opened: every path comes from :class:`Layout`.

**Ranking.** BM25 (FTS5's ``bm25()``) is additive over query terms, so each
term is queried on its own and a chunk scores the sum, over terms, of the best
contribution of any of its docs. Each contribution is ``idf`` times BM25's
tf/length factor scaled into ``[1/2, 1]``: unscaled, a common word in a
one-word event outranks a rare word in a long tool output, and recall is for
the rare word. A chunk matches when it contains every term
(in any of its docs); when no chunk does, the OR ranking is returned (with CJK
runs split into bigrams).

**Bounded work.** ``bm25()`` counts every row of a phrase to get its IDF and
costs about 2 µs per ranked row, so a common word would make a query slow.
Each term is probed first: its newest rowids, one more than its window
(:data:`_ROW_BUDGET` shared by the query's terms), without ``bm25()`` (cheap:
FTS5 stops early). A term with at most its window of rows is ranked exactly
with ``bm25()`` over the rowid range the probe found. A more frequent term is
looked at only in its newest window of rows, each chunk credited the value of
one occurrence in an average-length row (IDF extrapolated from the probe).
Whether a candidate chunk also contains such a term is answered from the
probed rowids when they reach back far enough, else by one query for that
chunk (``rowid BETWEEN``), best candidates first, until ``k`` chunks with
every term are known and no other can beat them, or after
:data:`_MAX_CHECKS` queries. Rare terms, the ones recall is for, are always
ranked exactly; ties (common words only) go to the newest chunks. Docs are
mapped to chunks in memory (:class:`_Ranges`), rebuilt after any change.

The class is synchronous and thread-safe (one lock): the recall actor calls it
from worker threads.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Literal, TypeVar

import msgspec

from aiden.config import Config
from aiden.errors import ClosedError, CorruptionError, InvalidIdError, RecallError, StorageError
from aiden.events import EVENT_TYPES, SessionEvent, validate_id
from aiden.recall.query import (
    Term,
    display_text,
    fallback_terms,
    index_text,
    match_finder,
    or_expression,
    query_terms,
    snippet,
    truncate,
)
from aiden.recall.types import EventSpan, RecallHit, RecallStats
from aiden.storage.chunks import (
    ChunkEntry,
    ChunkIndex,
    load_index,
    read_chunk,
    read_segment,
)
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

__all__ = [
    "SCHEMA_VERSION",
    "BulkChunk",
    "EventSpan",
    "RecallHit",
    "RecallIndex",
    "RecallStats",
    "event_text",
]

SCHEMA_VERSION: Final = 1
"""Bump when the schema or :func:`~aiden.recall.query.index_text` changes: old databases are rebuilt."""
_APPLICATION_ID: Final = 0x41494452  # "AIDR": marks the file as ours

# Ranking work bounds (see the module docstring). ~2 µs per bm25() row.
_ROW_BUDGET: Final = 500
"""Newest matching rows fetched per query, shared by its terms."""
_MIN_WINDOW: Final = 100
"""Newest rows fetched per term at least."""
_MAX_CHECKS: Final = 16
"""Most per-chunk coverage queries of one search (terms beyond their probes)."""
_MAX_SPANS_PER_HIT: Final = 4
_MAX_FILTER_VALUES: Final = 32
_RACY_NS: Final = 2_000_000_000
"""A directory modified this recently may change again within the same mtime tick: not trusted."""
_MAX_PROBLEMS: Final = 100
_K1: Final = 1.2  # FTS5's bm25 k1: one occurrence in an average-length row has factor 1


class BulkChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A chunk handed to :meth:`RecallIndex.bulk_load` (benchmarks, tools)."""

    chunk_id: str
    sha256: str
    summary: str
    events: Sequence[SessionEvent]
    source: Literal["active", "pending"] = "active"
    degraded: bool = False


class _Rebuild(Exception):
    """Internal: the database must be rebuilt from scratch."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _ChunkRow(msgspec.Struct, frozen=True, array_like=True):
    id: int
    chunk_id: str
    source: str
    sha256: str
    segment: str
    file_sig: str
    summary: str
    degraded: int
    first_seq: int
    last_seq: int
    doc_lo: int
    doc_hi: int


_CHUNK_COLS: Final = (
    "id, chunk_id, source, sha256, segment, file_sig, summary, degraded, first_seq, last_seq, doc_lo, doc_hi"
)

_SCHEMA: Final = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE segments(file TEXT PRIMARY KEY, sha256 TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE chunks(
    id INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL CHECK (source IN ('active', 'pending')),
    sha256 TEXT NOT NULL,
    segment TEXT NOT NULL DEFAULT '',
    file_sig TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL,
    degraded INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    doc_lo INTEGER NOT NULL,
    doc_hi INTEGER NOT NULL
);
CREATE TABLE docs(
    id INTEGER PRIMARY KEY,
    chunk INTEGER NOT NULL,
    seq INTEGER,
    type TEXT,
    role TEXT,
    ts_min REAL,
    ts_max REAL
);
CREATE VIRTUAL TABLE fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
PRAGMA user_version = {SCHEMA_VERSION};
PRAGMA application_id = {_APPLICATION_ID};
"""
_TABLES: Final = frozenset({"meta", "segments", "chunks", "docs", "fts"})
_CORRUPT_CODES: Final = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes)

_T = TypeVar("_T")


def event_text(event: SessionEvent) -> str:
    """The searchable text of an event: content, tool name and tool arguments."""
    parts = [event.content]
    if event.tool_name:
        parts.append(event.tool_name)
    if event.tool_args:
        parts.append(event.tool_args)
    return "\n".join(p for p in parts if p)


def _display_summary(entry: ChunkEntry) -> str:
    # The seed stores the split-turn context inside the summary; older entries
    # may carry it separately, and it is worth finding either way.
    ctx = entry.split_turn_context
    if ctx and ctx not in entry.summary:
        return f"{entry.summary}\n\n---\n\nTurn Context (split turn):\n{ctx}"
    return entry.summary


def _stat_sig(path: os.PathLike[str] | str, *, with_size: bool) -> list[int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RecallError(f"cannot stat {os.fspath(path)}: {exc.strerror}") from exc
    sig = [st.st_dev, st.st_ino, st.st_mtime_ns]
    if with_size:
        sig.append(st.st_size)
    return sig


def _chunk_file_stems(layout: Layout) -> set[str]:
    """Stems of ``chunks/*.jsonl`` except segments (unvalidated: see ``list_chunk_files``)."""
    try:
        names = os.listdir(layout.chunks)
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise RecallError(f"cannot list {layout.chunks}: {exc.strerror}") from exc
    return {n[:-6] for n in names if n.endswith(".jsonl") and not n.startswith("segment-")}


def _is_corruption(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _CORRUPT_CODES


def _idf(total: int, rows: float) -> float:
    # FTS5's bm25 IDF, including its clamp for terms in more than half the rows.
    value = math.log((total - rows + 0.5) / (rows + 0.5))
    return value if value > 0 else 1e-6


def _damped(idf: float, factor: float) -> float:
    # BM25's tf/length factor ranges over (0, k1 + 1): a common word in a
    # one-word event would outscore a rare word in a long one. Scaled into
    # [1/2, 1] it still orders equal terms by tf and length, but the term's
    # rarity (idf) dominates, so the chunk holding the rare term comes first.
    return idf * (0.5 + 0.5 * min(max(factor, 0.0), _K1 + 1) / (_K1 + 1))


class _Term(msgspec.Struct):
    """Per-query state of one term."""

    term: Term
    window: int
    complete: bool = False
    """Every (filtered) row of the term is among the candidates."""
    estimate: float = 0.0
    """Contribution credited to a chunk found to contain the term beyond the window."""
    probed: list[int] = msgspec.field(default_factory=list)
    """The newest rowids of the term (unfiltered), ascending."""
    all_probed: bool = True
    """``probed`` holds every rowid of the term."""

    def known_in(self, lo: int, hi: int) -> tuple[bool, int | None]:
        """``(True, rowid or None)``: whether the term has a row in ``[lo, hi]``; ``(False, None)``: the probe cannot tell."""
        if not self.all_probed and (not self.probed or lo < self.probed[0]):
            return False, None
        i = bisect.bisect_left(self.probed, lo)
        return True, (self.probed[i] if i < len(self.probed) and self.probed[i] <= hi else None)


class _Ranges:
    """The doc-id range of every chunk with docs, to map docs to chunks without SQL."""

    def __init__(self, rows: Sequence[tuple[int, int, int]]) -> None:
        # rows: (chunk, doc_lo, doc_hi) ordered by doc_lo. Doc ids are handed
        # out in insertion order, so the ranges are disjoint and ascending.
        self.chunks = array.array("q", (r[0] for r in rows))
        self.lo = array.array("q", (r[1] for r in rows))
        self.hi = array.array("q", (r[2] for r in rows))
        self._by_chunk: dict[int, int] | None = None
        if any(a >= b for a, b in zip(self.chunks, self.chunks[1:], strict=False)):
            # Chunk rowids not in doc order (never written so; tolerate it).
            self._by_chunk = {c: i for i, c in enumerate(self.chunks)}

    def newest_per_chunk(self, docs_desc: Sequence[int]) -> list[tuple[int, int]]:
        """``(chunk, first doc seen)`` for docs given newest first, chunks in order of appearance."""
        out: list[tuple[int, int]] = []
        lo = self.lo
        current_lo = -1
        for doc in docs_desc:
            if doc >= current_lo >= 0:
                continue  # same chunk as the previous doc (a chunk's docs are consecutive)
            i = bisect.bisect_right(lo, doc) - 1
            if i >= 0 and doc <= self.hi[i]:
                out.append((self.chunks[i], doc))
                current_lo = lo[i]
            else:
                current_lo = -1
        return out

    def range_of(self, chunk: int) -> tuple[int, int] | None:
        """``(doc_lo, doc_hi)`` of ``chunk``."""
        if self._by_chunk is not None:
            j = self._by_chunk.get(chunk)
        else:
            i = bisect.bisect_left(self.chunks, chunk)
            j = i if i < len(self.chunks) and self.chunks[i] == chunk else None
        return None if j is None else (self.lo[j], self.hi[j])


class _Cand(msgspec.Struct):
    """A candidate chunk of one query."""

    chunk: int
    best: dict[int, float] = msgspec.field(default_factory=dict)
    """term index -> best contribution of any doc of the chunk (set once per term, via :meth:`credit`)."""
    best_doc: dict[int, int] = msgspec.field(default_factory=dict)
    """term index -> the doc giving that contribution (its span is shown first)."""

    def doc_scores(self) -> dict[int, float]:
        """doc id -> summed contributions of the terms whose best doc it is."""
        out: dict[int, float] = {}
        for i, doc in self.best_doc.items():
            out[doc] = out.get(doc, 0.0) + self.best[i]
        return out

    score: float = 0.0
    """Sum of ``best``."""

    def credit(self, term: int, value: float, doc: int) -> None:
        """Record the best contribution of ``term`` (once per term)."""
        self.best[term] = value
        self.best_doc[term] = doc
        self.score += value


class RecallIndex:
    """Full-text recall over the active session's chunks, backed by ``layout.recall_db``.

    Every public method takes the instance lock, so calls from different worker
    threads are serialized. :meth:`search`, :meth:`lookup` and :meth:`rehydrate`
    call :meth:`sync` first. sqlite3 errors are raised as
    :class:`~aiden.errors.RecallError`; a corrupt database is rebuilt (once per
    call) instead.
    """

    def __init__(self, layout: Layout, config: Config, *, storage: Storage | None = None) -> None:
        self._layout = layout
        self._config = config
        self._storage = storage if storage is not None else Storage()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._db_ident: tuple[int, int] | None = None
        self._sig: str | None = None
        self._next_doc = 1
        self._ndocs = 0
        self._chunk_ranges: _Ranges | None = None
        self._active_ids: set[str] | None = None
        self._closed = False
        self._recall_calls = 0
        self._results_returned = 0
        self._pending_recalled = 0
        self._rebuilds = 0
        self.problems: list[str] = []
        """What could not be indexed at the last full sync (corrupt or missing chunk files, segments)."""
        self.last_rebuild_reason: str | None = None
        """``missing``, ``corrupt``, ``schema`` or ``out_of_date`` for the latest from-scratch build."""

    # --- public API -------------------------------------------------------------
    def sync(self) -> None:
        """Bring the database up to date with index.yaml, its segments and the pending chunk files.

        Cheap when nothing changed: a stat of index.yaml, of ``chunks/`` and of
        the database file. Otherwise the changed chunks are (re)indexed; the
        database is rebuilt from scratch when it is missing, corrupt, of another
        schema version, or when an indexed chunk's sha256 differs from the index.
        Raises :class:`RecallError` when index.yaml itself is unreadable.
        """
        self._locked(self._sync)

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        types: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[RecallHit]:
        """The chunks best matching ``query``, best first.

        At most ``k`` results (default and cap: ``config.recall_max_results``);
        summaries plus snippets total at most ``config.recall_max_chars``
        characters. ``types``/``roles`` keep only matches in events of those
        types/roles (summaries then do not match); ``since``/``until`` (Unix
        seconds, inclusive) keep events in that time range and summaries of
        chunks overlapping it. An empty filter list means no filter. A query
        without searchable words returns ``[]``; any ``str`` is safe.
        """
        limit = self._check_k(k)
        filters = _Filters.build(types, roles, since, until)
        if not isinstance(query, str):
            raise RecallError(f"query must be a string, got {type(query).__name__}")

        def run() -> list[RecallHit]:
            self._sync()
            hits = self._search(query, limit, filters)
            self._count(hits)
            return hits

        return self._locked(run)

    def lookup(self, chunk_id: str) -> RecallHit | None:
        """The chunk named ``chunk_id`` (summary, seq range, source), or ``None`` if unknown.

        Raises :class:`InvalidIdError` for an id that is not a safe identifier or
        whose chunk file resolves outside the memory root.
        """
        self._check_id(chunk_id)

        def run() -> RecallHit | None:
            self._sync()
            row = self._chunk_by_id(chunk_id)
            hit = None
            if row is not None:
                hit = RecallHit(
                    chunk_id=row.chunk_id,
                    source="pending" if row.source == "pending" else "active",
                    score=0.0,
                    summary=truncate(row.summary, self._config.recall_max_chars),
                    spans=(),
                    first_seq=row.first_seq,
                    last_seq=row.last_seq,
                    degraded=bool(row.degraded),
                )
            self._count([hit] if hit is not None else [])
            return hit

        return self._locked(run)

    def rehydrate(self, chunk_id: str, seqs: Sequence[int] | None = None) -> list[SessionEvent]:
        """The verbatim events of a chunk (only those whose seq is in ``seqs`` when given), in file order.

        The chunk file is read and verified against the indexed checksum.
        Raises :class:`InvalidIdError` for a hostile id, :class:`RecallError`
        for a chunk the index does not know, :class:`CorruptionError` when the
        file fails verification.
        """
        self._check_id(chunk_id)
        wanted: set[int] | None = None
        if seqs is not None:
            if isinstance(seqs, (str, bytes)) or not all(
                isinstance(s, int) and not isinstance(s, bool) for s in seqs
            ):
                raise RecallError("seqs must be a sequence of integers")
            wanted = set(seqs)

        def run() -> list[SessionEvent]:
            self._sync()
            row = self._chunk_by_id(chunk_id)
            if row is None:
                raise RecallError(f"unknown chunk {chunk_id!r}")
            chunk = read_chunk(self._layout, chunk_id, expect_sha256=row.sha256)
            if wanted is None:
                return list(chunk.events)
            return [e for e in chunk.events if e.seq in wanted]

        return self._locked(run)

    def stats(self) -> RecallStats:
        """Counters since this instance was created, and the current number of indexed chunks."""

        def run() -> RecallStats:
            chunks = 0
            if self._db is not None:
                chunks = int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])
            return RecallStats(
                recall_calls=self._recall_calls,
                results_returned=self._results_returned,
                pending_chunks_recalled=self._pending_recalled,
                rebuilds=self._rebuilds,
                chunks_indexed=chunks,
                problems=tuple(self.problems),
            )

        return self._locked(run, retry=False)

    def reopen(self) -> None:
        """Close the database connection; the next call reopens ``layout.recall_db`` (after a rotation)."""
        self._locked(self._close_db, retry=False)

    def close(self) -> None:
        """Close the database; later calls raise :class:`~aiden.errors.ClosedError`. Idempotent."""
        with self._lock:
            self._close_db()
            self._closed = True

    def bulk_load(self, chunks: Iterable[BulkChunk], *, batch: int = 2000) -> int:
        """Insert chunks straight into the database, without chunk files; returns how many.

        For benchmarks and tools. The rows are derived data like any other: the
        next full sync (after index.yaml or ``chunks/`` changes) removes chunks
        that index.yaml and the chunk files do not back, and :meth:`rehydrate`
        cannot read them.
        """

        def run() -> int:
            self._sync()
            db = self._require_db()
            n = 0
            pending: list[BulkChunk] = []

            def flush() -> None:
                with self._transaction(db):
                    for c in pending:
                        validate_id(c.chunk_id, what="chunk id")
                        self._insert_chunk(
                            db,
                            chunk_id=c.chunk_id,
                            source=c.source,
                            sha256=c.sha256,
                            segment="",
                            file_sig="",
                            summary=c.summary,
                            degraded=c.degraded,
                            first_seq=c.events[0].seq if c.events else 0,
                            last_seq=c.events[-1].seq if c.events else 0,
                            events=c.events,
                        )
                pending.clear()

            for c in chunks:
                pending.append(c)
                n += 1
                if len(pending) >= batch:
                    flush()
            flush()
            return n

        return self._locked(run)

    def optimize(self) -> None:
        """Merge the FTS5 index's segments (faster queries after big loads)."""

        def run() -> None:
            db = self._require_db()
            db.execute("INSERT INTO fts(fts) VALUES ('optimize')")

        self._locked(run)

    # --- locking and error translation ------------------------------------------
    def _locked(self, fn: Callable[[], _T], *, retry: bool = True) -> _T:
        with self._lock:
            if self._closed:
                raise ClosedError("recall index is closed")
            try:
                return fn()
            except sqlite3.Error as exc:
                if not (retry and _is_corruption(exc)):
                    raise RecallError(f"recall index failed: {exc}") from exc
            except OSError as exc:
                raise RecallError(f"recall index failed: {exc}") from exc
            # Corruption found mid-operation: rebuild from the chunk files, retry once.
            try:
                self._rebuild("corrupt")
                return fn()
            except (sqlite3.Error, OSError) as exc:
                raise RecallError(f"recall index failed after rebuild: {exc}") from exc

    def _check_k(self, k: int | None) -> int:
        cap = self._config.recall_max_results
        if k is None:
            return cap
        if isinstance(k, bool) or not isinstance(k, int):
            raise RecallError(f"k must be an integer, got {type(k).__name__}")
        if k < 1:
            raise RecallError(f"k must be >= 1, got {k}")
        return min(k, cap)

    def _check_id(self, chunk_id: str) -> None:
        # validate_id runs before any path is built; then refuse a chunk file
        # that is a symlink leading out of the memory root.
        validate_id(chunk_id, what="chunk id")
        path = self._layout.chunk_file(chunk_id)
        if os.path.lexists(path) and not self._layout.contains(path):
            raise InvalidIdError(f"chunk id {chunk_id!r} resolves outside the memory root")

    def _count(self, hits: Sequence[RecallHit]) -> None:
        self._recall_calls += 1
        self._results_returned += len(hits)
        self._pending_recalled += sum(1 for h in hits if h.source == "pending")

    # --- database lifecycle ------------------------------------------------------
    def _require_db(self) -> sqlite3.Connection:
        if self._db is None:
            raise RecallError("no active session to index")
        return self._db

    def _close_db(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        self._db = None
        self._db_ident = None
        self._sig = None
        self._chunk_ranges = None
        self._active_ids = None

    def _db_files(self) -> list[str]:
        base = os.fspath(self._layout.recall_db)
        return [base, base + "-wal", base + "-shm", base + "-journal"]

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            os.fspath(self._layout.recall_db),
            isolation_level=None,
            check_same_thread=False,  # serialized by self._lock; calls come from worker threads
        )
        try:
            db.execute("PRAGMA journal_mode = WAL")
            # Derived data: a transaction lost to power failure is redone by the next sync.
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA temp_store = MEMORY")
            # Up to 128 MiB of pages kept in-process (allocated as touched): a
            # warm cache roughly halves query time against pread() per page.
            # Not mmap: a database file truncated under a mapping kills the
            # process with SIGBUS, and this file may be deleted or damaged.
            db.execute("PRAGMA cache_size = -131072")
            db.execute("PRAGMA mmap_size = 0")
        except sqlite3.Error:
            db.close()
            raise
        return db

    def _open(self) -> str | None:
        """Open the existing database; returns why it must be rebuilt instead (or ``None``)."""
        path = self._layout.recall_db
        if any(os.path.islink(p) for p in self._db_files()):
            return "corrupt"  # never let SQLite write through a planted symlink
        if not os.path.exists(path):
            return "missing"
        try:
            db = self._connect()
        except sqlite3.DatabaseError:
            return "corrupt"
        try:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if app_id != _APPLICATION_ID or version != SCHEMA_VERSION or not tables >= _TABLES:
                db.close()
                return "schema"
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            self._next_doc = int(db.execute("SELECT coalesce(max(id), 0) + 1 FROM docs").fetchone()[0])
            self._ndocs = int(db.execute("SELECT count(*) FROM docs").fetchone()[0])
        except sqlite3.DatabaseError:
            db.close()
            return "corrupt"
        st = os.stat(path)
        self._db = db
        self._db_ident = (st.st_dev, st.st_ino)
        self._sig = meta.get("sig") or None
        self.problems = list(json.loads(meta.get("problems", "[]")))
        return None

    def _ensure_open(self) -> bool:
        """Open the database if needed; True if it was (re)built from scratch just now."""
        try:
            st = os.stat(self._layout.recall_db)
            ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            ident = None
        if self._db is not None:
            if ident == self._db_ident:
                return False
            # Deleted, replaced or moved away (rotation): never keep writing to it.
            self._close_db()
        reason = self._open()
        if reason is None:
            return False
        self._rebuild(reason)
        return True

    def _rebuild(self, reason: str) -> None:
        self._close_db()
        try:
            for path in self._db_files():
                self._storage.unlink(path, missing_ok=True)
        except StorageError as exc:
            raise RecallError(f"cannot remove the recall database: {exc}") from exc
        db = self._connect()
        try:
            db.executescript(_SCHEMA)
        except sqlite3.Error:
            db.close()
            raise
        st = os.stat(self._layout.recall_db)
        self._db = db
        self._db_ident = (st.st_dev, st.st_ino)
        self._next_doc = 1
        self._ndocs = 0
        self._sig = None
        self._rebuilds += 1
        self.last_rebuild_reason = reason
        self._full_sync(self._current_sig(), fresh=True)

    @contextlib.contextmanager
    def _transaction(self, db: sqlite3.Connection) -> Iterator[None]:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            # The in-memory mirrors may hold changes that are being rolled back.
            self._chunk_ranges = None
            self._active_ids = None
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # --- sync -----------------------------------------------------------------------
    def _current_sig(self) -> tuple[str, bool]:
        """The stat signature of index.yaml and ``chunks/``, and whether it can be trusted."""
        index = _stat_sig(self._layout.index, with_size=True)
        chunks = _stat_sig(self._layout.chunks, with_size=False)
        trusted = chunks is None or time.time_ns() - chunks[2] > _RACY_NS
        return repr((index, chunks)), trusted

    def _sync(self) -> None:
        if not self._layout.session.is_dir():
            # No active session (mid-rotation or never created): nothing to index.
            self._close_db()
            return
        if self._ensure_open():
            return
        sig, trusted = self._current_sig()
        if trusted and sig == self._sig:
            return
        try:
            self._full_sync((sig, trusted))
        except _Rebuild as exc:
            self._rebuild(exc.reason)

    def _full_sync(self, current: tuple[str, bool], *, fresh: bool = False) -> None:
        sig, trusted = current
        layout = self._layout
        db = self._require_db()
        try:
            index = load_index(layout)
        except CorruptionError as exc:
            raise RecallError(f"cannot index the session: {exc}") from exc
        if index is None:
            index = ChunkIndex()
        problems: list[str] = []
        with self._transaction(db):
            current_segs = {s.file: s.sha256 for s in index.segments}
            for file, sha in db.execute("SELECT file, sha256 FROM segments").fetchall():
                if current_segs.get(file) != sha:
                    db.execute("DELETE FROM segments WHERE file = ?", (file,))
            trusted_segs = {r[0] for r in db.execute("SELECT file FROM segments")}
            wanted: dict[str, tuple[ChunkEntry, str]] = {}
            unreadable: set[str] = set()
            for seg in index.segments:
                if seg.file in trusted_segs:
                    continue
                try:
                    entries = read_segment(layout, seg)
                except CorruptionError as exc:
                    problems.append(str(exc))
                    unreadable.add(seg.file)
                    continue
                for entry in entries:
                    wanted[entry.chunk_id] = (entry, seg.file)
            for entry in index.chunks:
                wanted[entry.chunk_id] = (entry, "")

            # Rows that may need work: pending ones and active ones outside trusted segments.
            rows = {
                r.chunk_id: r
                for r in self._chunk_rows(
                    db,
                    "WHERE source = 'pending' OR segment NOT IN (SELECT file FROM segments)",
                )
            }
            incomplete: set[str] = set()
            for chunk_id, (entry, seg_file) in wanted.items():
                row = rows.get(chunk_id)
                if row is not None and row.source == "active":
                    if row.sha256 != entry.sha256:
                        raise _Rebuild("out_of_date")
                    if (
                        row.summary == _display_summary(entry)
                        and bool(row.degraded) == entry.degraded
                        and (row.first_seq, row.last_seq) == (entry.first_seq, entry.last_seq)
                    ):
                        if row.segment != seg_file:
                            db.execute("UPDATE chunks SET segment = ? WHERE id = ?", (seg_file, row.id))
                        continue
                if row is not None:
                    self._delete_chunk(db, row)
                if not self._index_active(db, entry, seg_file, problems) and seg_file:
                    incomplete.add(seg_file)
            for seg in index.segments:
                if seg.file not in trusted_segs and seg.file not in unreadable | incomplete:
                    db.execute("INSERT INTO segments(file, sha256) VALUES (?, ?)", (seg.file, seg.sha256))
            for chunk_id, row in rows.items():
                if row.source == "active" and chunk_id not in wanted and row.segment not in unreadable:
                    self._delete_chunk(db, row)

            self._sync_pending(db, rows, wanted, problems)
            problems = problems[:_MAX_PROBLEMS]
            db.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                [("sig", sig if trusted else ""), ("problems", json.dumps(problems))],
            )
        if fresh and self._ndocs:
            db.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        self.problems = problems
        self._sig = sig if trusted else None

    def _sync_pending(
        self,
        db: sqlite3.Connection,
        rows: dict[str, _ChunkRow],
        wanted: dict[str, tuple[ChunkEntry, str]],
        problems: list[str],
    ) -> None:
        layout = self._layout
        active = self._active_set(db)
        on_disk = _chunk_file_stems(layout)
        # Only names that are not committed chunks can be pending; validating
        # just those keeps a sync cheap with 100k chunk files.
        for chunk_id in sorted(on_disk - active - wanted.keys()):
            try:
                path = layout.chunk_file(chunk_id)
            except InvalidIdError:
                continue  # not a chunk file name (list_chunk_files skips these too)
            sig = _stat_sig(path, with_size=True)
            if sig is None:
                continue  # consumed or deleted since the listing
            file_sig = json.dumps(sig)
            row = rows.get(chunk_id)
            if row is not None and row.source == "pending" and row.file_sig == file_sig:
                continue
            if row is not None and row.source == "pending":
                self._delete_chunk(db, row)
            try:
                chunk = read_chunk(layout, chunk_id)
            except (CorruptionError, InvalidIdError) as exc:
                if os.path.lexists(path):
                    problems.append(f"pending {exc}")
                continue
            self._insert_chunk(
                db,
                chunk_id=chunk_id,
                source="pending",
                sha256=chunk.entry.sha256,
                segment="",
                file_sig=file_sig,
                # The header repeats the entry the compaction is about to commit.
                summary=_display_summary(chunk.entry),
                degraded=chunk.entry.degraded,
                first_seq=chunk.entry.first_seq,
                last_seq=chunk.entry.last_seq,
                events=chunk.events,
            )
        for chunk_id, row in rows.items():
            if row.source == "pending" and chunk_id not in on_disk and chunk_id not in wanted:
                self._delete_chunk(db, row)

    def _index_active(
        self, db: sqlite3.Connection, entry: ChunkEntry, segment: str, problems: list[str]
    ) -> bool:
        try:
            chunk = read_chunk(self._layout, entry.chunk_id, expect_sha256=entry.sha256)
        except (CorruptionError, InvalidIdError) as exc:
            # Reported, never silently skipped; retried at the next full sync.
            problems.append(str(exc))
            return False
        self._insert_chunk(
            db,
            chunk_id=entry.chunk_id,
            source="active",
            sha256=entry.sha256,
            segment=segment,
            file_sig="",
            summary=_display_summary(entry),
            degraded=entry.degraded,
            first_seq=entry.first_seq,
            last_seq=entry.last_seq,
            events=chunk.events,
        )
        return True

    def _insert_chunk(
        self,
        db: sqlite3.Connection,
        *,
        chunk_id: str,
        source: str,
        sha256: str,
        segment: str,
        file_sig: str,
        summary: str,
        degraded: bool,
        first_seq: int,
        last_seq: int,
        events: Sequence[SessionEvent],
    ) -> None:
        self._chunk_ranges = None
        if source == "active" and self._active_ids is not None:
            self._active_ids.add(chunk_id)
        lo = self._next_doc
        times = [e.timestamp for e in events if e.timestamp is not None]
        ts_min = min(times) if times else None
        ts_max = max(times) if times else None
        cur = db.execute(
            f"INSERT INTO chunks({_CHUNK_COLS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (chunk_id, source, sha256, segment, file_sig, summary, int(degraded), first_seq, last_seq, lo, lo - 1),
        )
        chunk = cur.lastrowid
        docs: list[tuple[Any, ...]] = []
        texts: list[tuple[int, str]] = []
        doc = lo
        if summary:
            docs.append((doc, chunk, None, None, None, ts_min, ts_max))
            texts.append((doc, index_text(summary)))
            doc += 1
        for event in events:
            text = event_text(event)
            if not text:
                continue
            docs.append((doc, chunk, event.seq, event.type, event.role, event.timestamp, event.timestamp))
            texts.append((doc, index_text(text)))
            doc += 1
        if docs:
            db.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?)", docs)
            db.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", texts)
            db.execute("UPDATE chunks SET doc_hi = ? WHERE id = ?", (doc - 1, chunk))
        self._next_doc = doc
        self._ndocs += len(docs)

    def _delete_chunk(self, db: sqlite3.Connection, row: _ChunkRow) -> None:
        self._chunk_ranges = None
        if self._active_ids is not None:
            self._active_ids.discard(row.chunk_id)
        if row.doc_hi >= row.doc_lo:
            db.execute("DELETE FROM fts WHERE rowid BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
            cur = db.execute("DELETE FROM docs WHERE id BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
            self._ndocs -= max(cur.rowcount, 0)
        db.execute("DELETE FROM chunks WHERE id = ?", (row.id,))

    def _chunk_rows(self, db: sqlite3.Connection, where: str, params: Sequence[Any] = ()) -> list[_ChunkRow]:
        return [_ChunkRow(*r) for r in db.execute(f"SELECT {_CHUNK_COLS} FROM chunks {where}", params)]

    def _chunk_by_id(self, chunk_id: str) -> _ChunkRow | None:
        if self._db is None:
            return None
        rows = self._chunk_rows(self._db, "WHERE chunk_id = ?", (chunk_id,))
        return rows[0] if rows else None

    # --- search ---------------------------------------------------------------------
    def _search(self, query: str, k: int, filters: _Filters) -> list[RecallHit]:
        db = self._db
        terms = query_terms(query)
        if db is None or not terms or filters.empty_range or self._ndocs == 0:
            return []
        cands, states = self._collect(db, terms, filters, and_mode=True, k=k)
        full = [c for c in cands.values() if len(c.best) == len(terms)]
        if full:
            ranked = full
        else:
            fallback = fallback_terms(terms)
            if [t.phrase for t in fallback] != [t.phrase for t in terms]:
                cands, states = self._collect(db, fallback, filters, and_mode=False, k=k)
            ranked = list(cands.values())
        ranked.sort(key=lambda c: (-c.score, -c.chunk))
        return self._render(db, ranked[:k], states, filters)

    def _active_set(self, db: sqlite3.Connection) -> set[str]:
        """Ids of the active chunks, kept in memory between syncs (updated by inserts and deletes)."""
        if self._active_ids is None:
            self._active_ids = {r[0] for r in db.execute("SELECT chunk_id FROM chunks WHERE source = 'active'")}
        return self._active_ids

    def _ranges(self, db: sqlite3.Connection) -> _Ranges:
        if self._chunk_ranges is None:
            self._chunk_ranges = _Ranges(
                db.execute(
                    "SELECT id, doc_lo, doc_hi FROM chunks WHERE doc_hi >= doc_lo ORDER BY doc_lo"
                ).fetchall()
            )
        return self._chunk_ranges

    def _collect(
        self, db: sqlite3.Connection, terms: Sequence[Term], filters: _Filters, *, and_mode: bool, k: int
    ) -> tuple[dict[int, _Cand], list[_Term]]:
        window = max(_MIN_WINDOW, _ROW_BUDGET // len(terms))
        states = [_Term(t, window) for t in terms]
        cands: dict[int, _Cand] = {}
        ranges = self._ranges(db)
        total = max(self._ndocs, 1)
        top = self._next_doc - 1
        for i, st in enumerate(states):
            # Probe: the newest rowids of the term (no bm25: stops early for common terms).
            newest = [
                r[0]
                for r in db.execute(
                    "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?",
                    (st.term.phrase, window + 1),
                )
            ]
            count = len(newest)
            st.all_probed = count <= window
            st.probed = newest[:window][::-1]
            if count == 0:
                st.complete = True
                continue
            if st.all_probed:
                rows_est = float(count)
            else:
                # The newest matches span rowids [oldest, top]; extrapolate the density.
                rows_est = min(float(total), count * total / max(top - newest[-1] + 1, 1))
            idf = _idf(total, rows_est)
            st.estimate = _damped(idf, 1.0)
            ranked = count <= window
            rows: list[tuple[int, float, int]]
            if ranked:
                # Every row fits: rank them with bm25() (which scans the phrase's
                # rows once more for its IDF), asking FTS5 only about the rowid
                # range the probe found, reduced to the best doc per chunk.
                rows = db.execute(
                    "SELECT chunk, max(score), doc FROM ("
                    "SELECT f.rowid AS doc, -bm25(fts) AS score, d.chunk AS chunk "
                    "FROM fts AS f JOIN docs AS d ON d.id = f.rowid "
                    f"WHERE fts MATCH ? AND f.rowid BETWEEN ? AND ?{filters.sql} "
                    "ORDER BY f.rowid DESC LIMIT ?) GROUP BY chunk",
                    (st.term.phrase, newest[-1], newest[0], *filters.params, window),
                ).fetchall()
                st.complete = True
            elif not filters.sql:
                # A frequent term, no filter: the newest `window` probed rows are
                # the candidates (newest doc per chunk), mapped without SQL.
                rows = [(chunk, 0.0, doc) for chunk, doc in ranges.newest_per_chunk(newest[:window])]
            else:
                found = db.execute(
                    "SELECT f.rowid, d.chunk FROM fts AS f JOIN docs AS d ON d.id = f.rowid "
                    f"WHERE fts MATCH ?{filters.sql} ORDER BY f.rowid DESC LIMIT ?",
                    (st.term.phrase, *filters.params, window),
                ).fetchall()
                st.complete = len(found) < window
                newest_doc: dict[int, int] = {}
                for doc, chunk in found:
                    newest_doc.setdefault(chunk, doc)
                rows = [(chunk, 0.0, doc) for chunk, doc in newest_doc.items()]
            for chunk, raw, doc in rows:
                # bm25() = idf * tf/length factor; recover the factor to damp it.
                value = _damped(idf, raw / idf) if ranked else st.estimate
                cand = cands.get(chunk)
                if cand is None:
                    cand = cands[chunk] = _Cand(chunk)
                cand.credit(i, value, doc)
        if and_mode and len(terms) > 1:
            self._check_coverage(db, cands, states, filters, k, ranges)
        return cands, states

    def _check_coverage(
        self,
        db: sqlite3.Connection,
        cands: dict[int, _Cand],
        states: list[_Term],
        filters: _Filters,
        k: int,
        ranges: _Ranges,
    ) -> None:
        """Find out, for the most promising candidates, whether they contain the terms beyond their windows.

        A threshold algorithm: candidates in order of their best possible score;
        stop once ``k`` chunks contain every term and no unchecked candidate can
        beat the k-th. The probed rowids answer most questions in memory; the
        others cost one query each, at most :data:`_MAX_CHECKS` per search.
        """
        n = len(states)
        open_terms = [i for i, st in enumerate(states) if not st.complete]
        complete_terms = [i for i, st in enumerate(states) if st.complete]
        full_scores: list[float] = []
        viable: list[tuple[float, int, _Cand]] = []
        for c in cands.values():
            if len(c.best) == n:
                full_scores.append(c.score)
            elif all(i in c.best for i in complete_terms):
                upper = c.score + sum(states[i].estimate for i in open_terms if i not in c.best)
                viable.append((upper, c.chunk, c))
        viable.sort(key=lambda v: (-v[0], -v[1]))
        full_scores.sort(reverse=True)
        checks = 0
        for upper, _, cand in viable:
            if len(full_scores) >= k and upper <= full_scores[k - 1]:
                break
            bounds = ranges.range_of(cand.chunk)
            if bounds is None:
                continue
            for i in open_terms:
                if i in cand.best:
                    continue
                st = states[i]
                decided, known = st.known_in(*bounds)
                if decided and known is None:
                    break  # no row of the term at all in this chunk
                if not decided or filters.sql:
                    # The probe cannot tell (an older chunk), or a filter applies.
                    if checks >= _MAX_CHECKS:
                        return
                    checks += 1
                    hit = db.execute(
                        "SELECT f.rowid FROM fts AS f JOIN docs AS d ON d.id = f.rowid "
                        f"WHERE fts MATCH ? AND f.rowid BETWEEN ? AND ?{filters.sql} LIMIT 1",
                        (st.term.phrase, bounds[0], bounds[1], *filters.params),
                    ).fetchone()
                    if hit is None:
                        break
                    known = int(hit[0])
                assert known is not None
                cand.credit(i, st.estimate, known)
            if len(cand.best) == n:
                full_scores.append(cand.score)
                full_scores.sort(reverse=True)

    def _render(
        self, db: sqlite3.Connection, ranked: Sequence[_Cand], states: Sequence[_Term], filters: _Filters
    ) -> list[RecallHit]:
        if not ranked:
            return []
        terms = [st.term for st in states]
        marks = ",".join("?" * len(ranked))
        info = {
            r.id: r for r in self._chunk_rows(db, f"WHERE id IN ({marks})", [c.chunk for c in ranked])
        }
        # The matching events of a hit: from the probed rowids when every term's
        # probe reaches back to the chunk (one docs query for all such hits),
        # else from FTS5 for that chunk.
        matched: dict[int, list[tuple[int, int, str, str | None]]] = {}
        from_probes: list[int] = []
        expr = or_expression(terms)
        for cand in ranked:
            row = info.get(cand.chunk)
            if row is None:
                continue
            probed = _probed_docs(states, row.doc_lo, row.doc_hi)
            if probed is not None:
                from_probes.extend(probed)
                matched[row.id] = []
                continue
            matched[row.id] = db.execute(
                "SELECT f.rowid, d.seq, d.type, d.role FROM fts AS f JOIN docs AS d ON d.id = f.rowid "
                f"WHERE fts MATCH ? AND f.rowid BETWEEN ? AND ? AND d.seq IS NOT NULL{filters.sql} "
                "ORDER BY f.rowid",
                (expr, row.doc_lo, row.doc_hi, *filters.params),
            ).fetchall()
        if from_probes:
            ids = sorted(set(from_probes))
            for doc, seq, type_, role, chunk in db.execute(
                "SELECT d.id, d.seq, d.type, d.role, d.chunk FROM docs AS d "
                f"WHERE d.id IN ({','.join('?' * len(ids))}) AND d.seq IS NOT NULL{filters.sql}",
                (*ids, *filters.params),
            ).fetchall():
                matched[chunk].append((doc, seq, type_, role))
        found: list[tuple[_Cand, _ChunkRow, list[_Group], int]] = []
        for cand in ranked:
            row = info.get(cand.chunk)
            if row is not None:
                events = matched[row.id]
                found.append((cand, row, _span_groups(events, cand)[:_MAX_SPANS_PER_HIT], len(events)))
        # One statement for the text of every span shown (not one per span).
        docs = sorted({g.doc for _, _, groups, _ in found for g in groups})
        texts: dict[int, str] = {}
        if docs:
            marks = ",".join("?" * len(docs))
            texts = dict(db.execute(f"SELECT rowid, text FROM fts WHERE rowid IN ({marks})", docs).fetchall())
        matcher = match_finder(terms)
        width = self._config.recall_snippet_chars
        drafts = []
        for cand, row, groups, n_matched in found:
            spans = [
                EventSpan(
                    first_seq=g.first_seq,
                    last_seq=g.last_seq,
                    type=g.type,
                    role=g.role,
                    snippet=snippet(display_text(texts.get(g.doc, "")), terms, width, finder=matcher),
                )
                for g in groups
            ]
            drafts.append((cand, row, spans, n_matched))
        return self._fit(drafts)

    def _fit(self, drafts: Sequence[tuple[_Cand, _ChunkRow, list[EventSpan], int]]) -> list[RecallHit]:
        """Apply ``recall_max_chars`` to summaries + snippets.

        Snippets get at most half of the budget, handed out one span per hit in
        rank order, round after round (so every hit gets its best span before
        any gets a second); summaries share the rest, the shortest first, each
        cut with ``…`` to its share.
        """
        budget = self._config.recall_max_chars
        chosen: list[list[EventSpan]] = [[] for _ in drafts]
        used = 0
        for round_ in range(_MAX_SPANS_PER_HIT):
            for i, (_, _, spans, _) in enumerate(drafts):
                if round_ < len(spans):
                    span = spans[round_]
                    if used + len(span.snippet) <= budget // 2:
                        chosen[i].append(span)
                        used += len(span.snippet)
        remaining = budget - used
        order = sorted(range(len(drafts)), key=lambda i: len(drafts[i][1].summary))
        shares: dict[int, int] = {}
        for n, i in enumerate(order):
            share = min(len(drafts[i][1].summary), remaining // (len(order) - n))
            shares[i] = share
            remaining -= share
        hits = []
        for i, (cand, row, _, matched) in enumerate(drafts):
            hits.append(
                RecallHit(
                    chunk_id=row.chunk_id,
                    source="pending" if row.source == "pending" else "active",
                    score=cand.score,
                    summary=truncate(row.summary, shares[i]),
                    spans=tuple(sorted(chosen[i], key=lambda s: s.first_seq)),
                    first_seq=row.first_seq,
                    last_seq=row.last_seq,
                    degraded=bool(row.degraded),
                    matched_events=matched,
                )
            )
        return hits


def _probed_docs(states: Sequence[_Term], lo: int, hi: int) -> list[int] | None:
    """Every doc in ``[lo, hi]`` matching any term, if the probes know them all (else ``None``)."""
    out: list[int] = []
    for st in states:
        if not st.all_probed and (not st.probed or lo < st.probed[0]):
            return None
        i = bisect.bisect_left(st.probed, lo)
        j = bisect.bisect_right(st.probed, hi)
        out.extend(st.probed[i:j])
    return out


class _Group(msgspec.Struct, frozen=True):
    """Consecutive matching events of one type and role, and the doc shown for them."""

    first_seq: int
    last_seq: int
    type: str
    role: str | None
    doc: int
    score: float


def _span_groups(matched: Sequence[tuple[int, int, str, str | None]], cand: _Cand) -> list[_Group]:
    """Merge consecutive seqs of the same type and role; best groups (by their best doc) first."""
    runs: list[list[tuple[int, int, str, str | None]]] = []
    for item in sorted(matched, key=lambda m: m[1]):
        last = runs[-1][-1] if runs else None
        if last is not None and item[1] == last[1] + 1 and item[2:] == last[2:]:
            runs[-1].append(item)
        else:
            runs.append([item])
    scores = cand.doc_scores()
    groups = []
    for run in runs:
        best = max(run, key=lambda m: (scores.get(m[0], 0.0), -m[1]))
        groups.append(
            _Group(run[0][1], run[-1][1], run[0][2], run[0][3], best[0], scores.get(best[0], 0.0))
        )
    groups.sort(key=lambda g: (-g.score, g.first_seq))
    return groups


class _Filters(msgspec.Struct, frozen=True):
    """Validated search filters as an SQL fragment over ``docs AS d``."""

    sql: str
    params: tuple[Any, ...]
    empty_range: bool

    @classmethod
    def build(
        cls,
        types: Sequence[str] | None,
        roles: Sequence[str] | None,
        since: float | None,
        until: float | None,
    ) -> _Filters:
        clauses: list[str] = []
        params: list[Any] = []
        type_list = _str_list(types, "types")
        for t in type_list:
            if t not in EVENT_TYPES:
                raise RecallError(f"unknown event type {t[:64]!r}; expected one of {sorted(EVENT_TYPES)}")
        role_list = _str_list(roles, "roles")
        # Summaries have no type or role, so these filters leave only event matches.
        for column, values in (("type", type_list), ("role", role_list)):
            if values:
                clauses.append(f"d.{column} IN ({','.join('?' * len(values))})")
                params.extend(values)
        lo = _time(since, "since")
        hi = _time(until, "until")
        if lo is not None:
            clauses.append("d.ts_max >= ?")
            params.append(lo)
        if hi is not None:
            clauses.append("d.ts_min <= ?")
            params.append(hi)
        sql = "".join(f" AND {c}" for c in clauses)
        return cls(sql, tuple(params), lo is not None and hi is not None and lo > hi)


def _str_list(values: Sequence[str] | None, name: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, (str, bytes)):
        raise RecallError(f"{name} must be a list of strings, not a single string")
    out = list(values)
    if len(out) > _MAX_FILTER_VALUES:
        raise RecallError(f"{name}: at most {_MAX_FILTER_VALUES} values")
    for v in out:
        if not isinstance(v, str):
            raise RecallError(f"{name} must contain strings, got {type(v).__name__}")
    return sorted(set(out))


def _time(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RecallError(f"{name} must be a finite number of Unix seconds")
    return float(value)

"""The recall index: SQLite FTS5 over the active session's compacted events (``recall.sqlite3``).

Archived sessions are never seen: the change feed serves the active session only.
"""

from __future__ import annotations

import functools
import itertools
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec

from aiden.config import Config
from aiden.errors import AidenError, ClosedError, CorruptionError, InvalidIdError, RecallError, StorageError
from aiden.events import SessionEvent, validate_id
from aiden.recall.db import (
    SCHEMA_VERSION,
    BulkChunk,
    ChunkRow,
    IndexDB,
    NeedsRebuild,
    apply_changes,
    event_text,
    insert_bulk,
    is_corruption,
    optimize,
)
from aiden.recall.embedding import Embedder
from aiden.recall.query import content_terms
from aiden.recall.search import Filters, assemble, bm25_ranking, matched_words, summary_hit
from aiden.recall.tool import RecallHit, RecallStats, fit_hits
from aiden.recall.vectors import Hybrid
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import ChangeFeed, ChangeToken, ChunkChanges
from aiden.storage.session import FileChangeFeed

__all__ = ["SCHEMA_VERSION", "BulkChunk", "RecallIndex", "event_text"]

_T = TypeVar("_T")


class RecallIndex:
    """Full-text recall over the active session's compacted events, in its own SQLite file.

    ``source`` is the session's change feed (any :class:`~aiden.storage.protocol.SessionStore`) with
    ``db_path``, its directory created when missing; or a :class:`Layout`, whose files are the feed
    and where a missing ``session/`` means no active session (nothing indexed, nothing created).

    Public methods are serialized by a lock shared with every index on the same file in this process
    (several may follow one session); searches :meth:`sync` first. sqlite3 errors
    are raised as :class:`~aiden.errors.RecallError`, except that a corrupt database is rebuilt (once
    per call).
    """

    def __init__(
        self,
        source: Layout | ChangeFeed,
        config: Config,
        *,
        storage: Storage | None = None,
        embedder: Embedder | None = None,
        db_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(source, Layout):
            self._feed: ChangeFeed = FileChangeFeed(source)
            path = Path(db_path if db_path is not None else source.recall_db)
        elif db_path is None:
            raise TypeError("RecallIndex over a change feed needs db_path")
        else:
            self._feed = source
            path = Path(db_path)
        self._dir = path.parent
        self._create_dir = not isinstance(source, Layout)
        self._storage = storage if storage is not None else Storage()
        self._config = config
        self._db = IndexDB(path, self._storage)
        self._hybrid = Hybrid(embedder) if embedder is not None else None
        # Shared with every index on the same file in this process: one of them rebuilding it must
        # not pull the file from under another's connection (see IndexDB).
        self._lock = self._db.lock
        self._closed = False
        self._recall_calls = 0
        self._results_returned = 0
        self._pending_recalled = 0

    @property
    def problems(self) -> list[str]:
        """What could not be indexed: committed chunks since the last rebuild, then pending chunk files."""
        return [*self._db.problems, *self._db.pending_problems]

    @property
    def last_rebuild_reason(self) -> str | None:
        """``missing``, ``corrupt``, ``schema`` or ``out_of_date`` for the latest from-scratch build."""
        return self._db.last_rebuild_reason

    # --- public API -------------------------------------------------------------
    def sync(self) -> None:
        """Bring the database up to date with the change feed, then embed the new events (with an embedder).

        The catch-up after a compaction: searches follow the feed but embed only their query. At most
        :data:`~aiden.recall.vectors.EMBED_PER_SYNC` events are embedded per call; an embedder failure
        is counted (:attr:`RecallStats.embedding_failures`), never raised. Cheap when nothing changed.
        Raises :class:`RecallError` when the feed fails (e.g. index.yaml unreadable).
        """

        def run() -> None:
            self._sync()
            if self._hybrid is not None and self._db.conn is not None:
                self._hybrid.embed_new(self._db.conn)

        self._locked(run)

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
        """The compacted events (and, where they matched, chunk summaries) best matching ``query``.

        At most ``k`` results (default and cap: ``config.recall_max_results``), whose JSON answer is
        at most ``config.recall_max_chars`` characters. ``types``/``roles`` keep only those events
        (summaries then do not match); ``since``/``until`` (Unix seconds, inclusive) keep events in
        that range and summaries of chunks overlapping it; an empty list means no filter. A query
        without searchable words returns ``[]``; any ``str`` is safe.
        """
        limit = self._check_k(k)
        filters = Filters.build(types, roles, since, until)
        if not isinstance(query, str):
            raise RecallError(f"query must be a string, got {type(query).__name__}")
        return self._locked(lambda: self._count(self._search(query, limit, filters)))

    def lookup(self, chunk_id: str) -> RecallHit | None:
        """The summary of the chunk named ``chunk_id`` (seq range, source), or ``None`` if unknown.

        Raises :class:`InvalidIdError` for an id that is not a safe identifier or
        whose chunk file resolves outside the memory root.
        """
        validate_id(chunk_id, what="chunk id")

        def run() -> RecallHit | None:
            row = self._row(chunk_id)
            if row is None:
                self._count([])
                return None
            whole = summary_hit(row, 0.0)
            fitted = fit_hits([whole], self._config.recall_max_chars)
            # A budget too small for any text still names the chunk and its range.
            return self._count([fitted[0] if fitted else msgspec.structs.replace(whole, text="", truncated=True)])[0]

        return self._locked(run)

    def rehydrate(self, chunk_id: str, seqs: Sequence[int] | None = None) -> list[SessionEvent]:
        """The verbatim events of a chunk (only those whose seq is in ``seqs`` when given), in file order.

        The chunk is read from the feed and verified against the indexed checksum.
        Raises :class:`InvalidIdError` for a hostile id, :class:`RecallError`
        for a chunk the index does not know, :class:`CorruptionError` when the
        file fails verification.
        """
        validate_id(chunk_id, what="chunk id")
        wanted: set[int] | None = None
        if seqs is not None:
            if isinstance(seqs, (str, bytes)) or not all(
                isinstance(s, int) and not isinstance(s, bool) for s in seqs
            ):
                raise RecallError("seqs must be a sequence of integers")
            wanted = set(seqs)

        def run() -> list[SessionEvent]:
            row = self._row(chunk_id)
            if row is None:
                raise RecallError(f"unknown chunk {chunk_id!r}")
            chunk = self._feed.read_chunk(chunk_id)
            if chunk.entry.sha256 != row.sha256:
                raise CorruptionError(f"chunk {chunk_id}: checksum differs from the indexed one")
            return [e for e in chunk.events if wanted is None or e.seq in wanted]

        return self._locked(run)

    def stats(self) -> RecallStats:
        """Counters since this instance was created, and the current number of indexed chunks."""
        return self._locked(
            lambda: RecallStats(
                recall_calls=self._recall_calls,
                results_returned=self._results_returned,
                pending_chunks_recalled=self._pending_recalled,
                rebuilds=self._db.rebuilds,
                chunks_indexed=self._db.chunk_count(),
                problems=tuple(self.problems),
                embedding_failures=self._hybrid.failures if self._hybrid is not None else 0,
            ),
            retry=False,
        )

    def reopen(self) -> None:
        """Close the database connection; the next call reopens the database file (after a rotation)."""
        self._locked(self._db.close, retry=False)

    def close(self) -> None:
        """Close the database; later calls raise :class:`~aiden.errors.ClosedError`. Idempotent."""
        with self._lock:
            self._db.close()
            self._closed = True

    def bulk_load(self, chunks: Iterable[BulkChunk], *, batch: int = 2000) -> int:
        """Insert chunks straight into the database, without a store behind them; returns how many.

        For benchmarks and tools: the next rebuild drops them, a committed chunk of the same id
        replaces its row, and :meth:`rehydrate` cannot read them.
        """

        def run() -> int:
            self._sync()
            self._db.require()
            n = 0
            it = iter(chunks)
            while part := list(itertools.islice(it, max(batch, 1))):
                insert_bulk(self._db, part)
                n += len(part)
            return n

        return self._locked(run)

    def optimize(self) -> None:
        """Merge the FTS5 index's segments (faster queries after big loads)."""
        self._locked(lambda: optimize(self._db))

    # --- locking and error translation ------------------------------------------
    def _locked(self, fn: Callable[[], _T], *, retry: bool = True) -> _T:
        with self._lock:
            if self._closed:
                raise ClosedError("recall index is closed")
            try:
                return fn()
            except sqlite3.Error as exc:
                if not (retry and is_corruption(exc)):
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

    def _row(self, chunk_id: str) -> ChunkRow | None:
        """The indexed row of ``chunk_id`` once synced."""
        self._sync()
        row = self._db.chunk_by_id(chunk_id)
        if row is None:
            # An id the index does not know may name a planted symlink: the store's
            # InvalidIdError (it opens nothing outside the memory root) wins over "unknown".
            try:
                self._feed.read_chunk(chunk_id)
            except InvalidIdError:
                raise
            except AidenError:
                pass
        return row

    def _count(self, hits: list[RecallHit]) -> list[RecallHit]:
        self._recall_calls += 1
        self._results_returned += len(hits)
        self._pending_recalled += sum(1 for h in hits if h.source == "pending")
        return hits

    # --- sync -----------------------------------------------------------------------
    def _rebuild(self, reason: str, changes: ChunkChanges | None = None) -> None:
        self._db.create(reason)
        if changes is None or not changes.reset:
            changes = self._changes(None)
        apply_changes(self._db, changes, self._feed.read_chunk, fresh=True)

    def _changes(self, token: ChangeToken | None) -> ChunkChanges:
        try:
            return self._feed.chunks_since(token)
        except AidenError as exc:
            raise RecallError(f"cannot index the session: {exc}") from exc

    def _sync(self) -> None:
        if not self._dir.is_dir():
            if not self._create_dir:
                # No active session (mid-rotation or never created): nothing to index.
                self._db.close()
                return
            try:
                self._storage.mkdir(self._dir)
            except StorageError as exc:
                raise RecallError(f"cannot create the recall database's directory: {exc}") from exc
        try:
            reason = self._db.ensure_open()
            if reason is not None:
                self._rebuild(reason)
            else:
                changes = self._changes(self._db.token)
                moved = changes.reset or changes.chunks or changes.updated or changes.pending is not None
                if moved or changes.token != self._db.token:
                    try:
                        apply_changes(self._db, changes, self._feed.read_chunk)
                    except NeedsRebuild as exc:
                        self._rebuild(str(exc), changes)
        except (sqlite3.Error, OSError, RecallError):
            if self._dir.is_dir():
                raise
            # A rotation moved the session away after the check above: no active session now.
            self._db.close()

    # --- search -----------------------------------------------------------------------
    def _search(self, query: str, k: int, filters: Filters) -> list[RecallHit]:
        self._sync()
        conn = self._db.conn
        terms = content_terms(query)
        if conn is None or not (terms or (self._hybrid is not None and query.strip())):
            return []
        ranked, lent = bm25_ranking(conn, terms, filters, ndocs=self._db.ndocs, top_doc=self._db.next_doc - 1)
        if self._hybrid is not None:
            ranked, lent = self._hybrid.fuse(conn, query, ranked, lent)
        config = self._config
        hits, contexts = assemble(self._db, ranked, filters, k, lent=lent, max_chars=config.recall_max_chars)
        return fit_hits(
            hits,
            config.recall_max_chars,
            terms,
            contexts,
            context_chars=config.recall_snippet_chars,
            stemmed=functools.partial(matched_words, conn, terms),
        )

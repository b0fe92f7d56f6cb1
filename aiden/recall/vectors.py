"""Hybrid recall: event vectors beside the FTS index, exact cosine search, and fusion with BM25 (:class:`Hybrid`).

Table ``vectors(doc, model, h, v)``: per embedded doc, the embedder name and the doc's text hash it
was made from (either changing makes it stale) and the vector as little-endian float32 bytes
(:mod:`struct`: storing needs no numpy). Everything is synchronous on the caller's connection;
SQLite errors become :class:`~aiden.errors.RecallError`.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from typing import Any, Final

from aiden.errors import RecallError
from aiden.recall.db import transaction
from aiden.recall.embedding import Embedder, _numpy
from aiden.recall.query import MAX_QUERY_CHARS, display_text
from aiden.recall.search import META_ROWS, min_max_fusion

__all__ = [
    "EMBED_PER_SYNC",
    "NEIGHBOURS",
    "Hybrid",
    "VectorSearch",
    "decode_vector",
    "embed_missing",
    "encode_vector",
    "ensure_schema",
    "vector_state",
]

_SCHEMA: Final = "CREATE TABLE IF NOT EXISTS vectors(doc INTEGER PRIMARY KEY, model TEXT NOT NULL, h INTEGER, v BLOB NOT NULL)"


def encode_vector(vector: Sequence[float]) -> bytes:
    """``vector`` as little-endian float32 bytes (:class:`RecallError` for a value no float32 holds)."""
    try:
        return struct.pack(f"<{len(vector)}f", *vector)
    except (OverflowError, struct.error) as exc:  # an embedder breaking the protocol: a failure, not a bug
        raise RecallError(f"embedding not storable as float32: {exc}") from exc


def decode_vector(blob: bytes) -> list[float]:
    """The float32 values of :func:`encode_vector`'s bytes (:class:`RecallError` on a bad length)."""
    if len(blob) % 4:
        raise RecallError(f"stored vector has {len(blob)} bytes, not a whole number of float32 values")
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


@contextlib.contextmanager
def _sqlite(action: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise RecallError(f"recall vectors: cannot {action}: {exc}") from exc


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the ``vectors`` table if it does not exist (idempotent)."""
    with _sqlite("create the vectors table"):
        conn.execute(_SCHEMA)


_PAGE: Final = 1024
"""Docs read per page by :func:`embed_missing`; each page is sorted by length before it is batched."""


def embed_missing(
    conn: sqlite3.Connection, embedder: Embedder, *, batch: int = 32, limit: int | None = None
) -> int:
    """Embed the events without a current vector of ``embedder.name`` and store them; how many were embedded.

    Only event docs are embedded (recall answers with events; summaries are found by their words),
    at most ``limit``; the vectors of vanished docs are deleted first. Pages are sorted by text length
    so a batch pads little. Embedding runs outside any transaction; each batch is stored in a short
    one, only for docs still holding the same text. Embedder errors propagate.
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    ensure_schema(conn)
    model = embedder.name
    with _sqlite("delete orphaned vectors"), transaction(conn):
        conn.execute("DELETE FROM vectors WHERE doc NOT IN (SELECT id FROM docs)")
    done = 0
    after = 0
    while limit is None or done < limit:
        size = _PAGE if limit is None else min(_PAGE, limit - done)
        with _sqlite("read docs to embed"):
            page: list[tuple[int, int, str]] = conn.execute(
                "SELECT d.id, d.h, f.text FROM docs d JOIN fts f ON f.rowid = d.id"
                " LEFT JOIN vectors v ON v.doc = d.id"
                " WHERE d.id > ? AND d.seq IS NOT NULL AND (v.doc IS NULL OR v.model != ? OR v.h IS NOT d.h)"
                " ORDER BY d.id LIMIT ?",
                (after, model, size),
            ).fetchall()
        if not page:
            break
        after = page[-1][0]
        texts = {doc: display_text(text or "") for doc, _, text in page}
        page.sort(key=lambda row: (len(texts[row[0]]), row[0]))
        for start in range(0, len(page), batch):
            rows = page[start : start + batch]
            vectors = embedder.embed([texts[doc] for doc, _, _ in rows])
            if len(vectors) != len(rows):
                raise RecallError(f"embedder {model!r} returned {len(vectors)} vectors for {len(rows)} texts")
            params = [
                (doc, model, h, encode_vector(vec), doc, h)
                for (doc, h, _), vec in zip(rows, vectors, strict=True)
            ]
            with _sqlite("store vectors"), transaction(conn):
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors(doc, model, h, v)"
                    " SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM docs WHERE id = ? AND h = ?)",
                    params,
                )
            done += len(rows)
    return done


def vector_state(conn: sqlite3.Connection, model: str) -> tuple[int, int]:
    """``(count, max doc id)`` of ``model``'s vectors: changes whenever vectors are added or removed."""
    ensure_schema(conn)
    with _sqlite("read the vectors table"):
        count, top = conn.execute(
            "SELECT count(*), coalesce(max(doc), 0) FROM vectors WHERE model = ?", (model,)
        ).fetchone()
    return int(count), int(top)


def _in_context(rows: list[list[float]], i: int, weight: float) -> list[float]:
    """Row ``i`` plus ``weight`` times each of its neighbours, normalised (a zero sum stays zero)."""
    mixed = list(rows[i])
    for j in (i - 1, i + 1):
        if 0 <= j < len(rows):
            mixed = [x + weight * y for x, y in zip(mixed, rows[j], strict=True)]
    norm = math.sqrt(math.fsum(x * x for x in mixed))
    return [x / norm for x in mixed] if norm > 0 else mixed


class VectorSearch:
    """Exact cosine search over ``model``'s stored vectors, held in memory (numpy when importable, else lists).

    With ``neighbours`` > 0 a doc is searched by its own vector plus ``neighbours`` times each of the
    docs around it, normalised: an answer is often said in reply to the turn that matches best.
    Vectors of another length than the first one read are skipped.
    """

    def __init__(self, model: str, *, use_numpy: bool = True, neighbours: float = 0.0) -> None:
        if not (math.isfinite(neighbours) and neighbours >= 0):
            raise ValueError(f"neighbours must be finite and non-negative, got {neighbours}")
        self.model = model
        self.neighbours = neighbours
        self._np: Any = None
        if use_numpy:
            with contextlib.suppress(RecallError):  # no numpy: pure Python
                self._np = _numpy()
        self._key: tuple[int, int] | None = None
        self.ids: list[int] = []
        """Doc ids, in the order of the matrix rows (ascending)."""
        self._rows: list[list[float]] = []
        self._matrix: Any = None

    def refresh(self, conn: sqlite3.Connection) -> bool:
        """Reload the vectors if they changed since the last load; True if they were reloaded."""
        key = vector_state(conn, self.model)
        if key == self._key:
            return False
        with _sqlite("read vectors"):
            rows = conn.execute(
                "SELECT doc, v FROM vectors WHERE model = ? ORDER BY doc", (self.model,)
            ).fetchall()
        stored = [(int(doc), blob) for doc, blob in rows if isinstance(blob, bytes) and blob and not len(blob) % 4]
        stored = [(doc, blob) for doc, blob in stored if len(blob) == len(stored[0][1])]
        self.ids = ids = [doc for doc, _ in stored]
        blobs = [blob for _, blob in stored]
        a = self.neighbours
        if self._np is not None:
            np = self._np
            matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), -1) if ids else None
            if matrix is not None and a:
                own = matrix
                matrix = own.copy()
                matrix[1:] += np.float32(a) * own[:-1]
                matrix[:-1] += np.float32(a) * own[1:]
                matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), np.float32(1e-12))
            self._matrix = matrix
        else:
            self._rows = [decode_vector(blob) for blob in blobs]
            if a:
                self._rows = [_in_context(self._rows, i, a) for i in range(len(self._rows))]
        self._key = key
        return True

    def top(self, query_vec: Sequence[float], k: int) -> list[tuple[int, float]]:
        """The ``k`` docs most similar to ``query_vec`` as ``(doc id, cosine)``, best first; ties to the higher id."""
        if k <= 0 or not self.ids:
            return []
        query = [float(x) for x in query_vec]
        width = self._matrix.shape[1] if self._np is not None else len(self._rows[0])
        if len(query) != width:
            raise RecallError(f"query vector has {len(query)} dimensions, the stored vectors {width}")
        if self._np is None:
            scores = [sum(a * b for a, b in zip(row, query, strict=True)) for row in self._rows]
            return [(doc, score) for score, doc in heapq.nlargest(k, zip(scores, self.ids, strict=True))]
        np = self._np
        # Rounded: float32 dot products of equally similar vectors differ in the last bits
        # depending on the BLAS kernel, and ties must go to the higher doc id on every machine.
        scores = np.round(self._matrix @ np.asarray(query, dtype=np.float32), 6)
        n = len(self.ids)
        # Every row scoring at least the k-th best, then ordered: score descending, higher doc id.
        rows = np.arange(n) if k >= n else np.nonzero(scores >= np.partition(scores, n - k)[n - k])[0]
        order = rows[np.lexsort((-rows, -scores[rows]))][:k]
        return [(self.ids[row], float(scores[row])) for row in order.tolist()]


# --- hybrid recall -----------------------------------------------------------------
EMBED_PER_SYNC: Final = 5000
"""Most events one catch-up embeds: it stays bounded (a model change re-embeds a long session over
several), the rest waits for the next one."""
NEIGHBOURS: Final = 0.25
"""Weight of each neighbouring event in an event's context vector (:class:`VectorSearch`)."""

log = logging.getLogger("aiden.recall")


class Hybrid:
    """Vectors of the events beside the FTS index, fused with BM25 (:func:`~aiden.recall.search.min_max_fusion`).

    An embedder failure never fails a catch-up or a recall: it is logged and counted, and the search
    stays lexical for what has no vector.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._search = VectorSearch(embedder.name, neighbours=NEIGHBOURS)
        self.failures = 0
        """Catch-ups whose embedding failed."""

    def embed_new(self, conn: sqlite3.Connection) -> None:
        """Embed the events without a vector (at most :data:`EMBED_PER_SYNC`); a failure is counted."""
        try:
            embed_missing(conn, self.embedder, limit=EMBED_PER_SYNC)
        except RecallError as exc:
            self.failures += 1
            log.warning("recall: embedding with %s failed, search stays lexical: %s", self.embedder.name, exc)

    def fuse(
        self, conn: sqlite3.Connection, query: str, ranked: list[tuple[int, float]], lent: frozenset[int]
    ) -> tuple[list[tuple[int, float]], frozenset[int]]:
        """``ranked`` (BM25, best first) fused with the :data:`~aiden.recall.search.META_ROWS` events nearest
        to ``query``, and the docs of ``lent`` (ranked by their neighbours' words alone) that the vectors did
        not rank; both unchanged when the query's embedding failed (the search stays lexical)."""
        # What the words search sees too: the first MAX_QUERY_CHARS, lone surrogates replaced.
        text = query[:MAX_QUERY_CHARS].encode("utf-8", "replace").decode("utf-8")
        try:
            vector = self.embedder.embed([text])[0]
            self._search.refresh(conn)
            near = self._search.top(vector, META_ROWS)
        except RecallError as exc:
            log.warning("recall: query embedding with %s failed, search stays lexical: %s", self.embedder.name, exc)
            return ranked, lent
        # An event near the query by meaning is a result in its own right; the rest of lent are extras
        # beside the META_ROWS best fused rows (bm25_ranking), not in their places.
        lent = lent.difference(doc for doc, _ in near)
        return min_max_fusion([ranked, near])[: META_ROWS + len(lent)], lent

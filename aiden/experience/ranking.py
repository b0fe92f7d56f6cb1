"""How ``recall_experience`` orders the index rows it may return, and the records' vectors it fuses in.

BM25 over the rows' terms, fused with vector similarity by reciprocal rank when there is an
embedder (the chunk recall's fusion and parameters); then each task's working step before its
failures. The vectors are keyed by record id and :func:`text_key`, so a changed record or model is
embedded again without opening a record file; kept in ``experience/vectors.msgpack`` (on a
PostgreSQL root, ``experience/vectors/<namespace>.msgpack``) so a reopened memory does not embed
every record again. A bad file is ignored (one warning) and rewritten; the last of two writers wins
whole (atomic replace). Any fault in the vectors or the embedder is a
:class:`~aiden.errors.RecallError`, on which recall stays lexical.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from aiden.errors import RecallError
from aiden.experience.records import RecordRow
from aiden.recall.embedding import Embedder
from aiden.recall.search import META_ROWS, reciprocal_rank_fusion
from aiden.storage.fs import Storage

__all__ = ["VECTORS_VERSION", "RecordVectors", "bm25", "nearest", "rank", "row_text", "text_key"]

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


def bm25(
    rows: Sequence[RecordRow], terms: Sequence[str], k1: float = 1.2, b: float = 0.75
) -> list[RecordRow]:
    """``rows`` sharing a term with ``terms``, best first (ties: newest first)."""
    if not rows or not terms:
        return []
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


_encoder: Final = msgspec.msgpack.Encoder()
_decoder: Final = msgspec.msgpack.Decoder(_VectorsFile)


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
            found = _decoder.decode(data)
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
            data = _encoder.encode(_VectorsFile(VECTORS_VERSION, model, dimensions, entries))
            # A PostgreSQL memory's root has no experience folder of records to put it in.
            self._storage.mkdir(self.path.parent)
            self._storage.write_atomic(self.path, data)
            self.dirty = False
            return True

"""Vectors of the experience records for hybrid ``recall_experience`` (blocking; worker threads).

Held in memory by the :class:`~aiden.experience.recordstore.RecordStore` of a
memory opened with an embedder, keyed by record id and
:func:`~aiden.experience.ranking.text_key` (the embedder's name and the
embedded text), so an updated record or another model is embedded again. The
store fills it when it writes records and, for rows it has no current vector
of (a memory opened on records learned earlier), at the first recall that
needs them. It is derived data: never written to disk (an index of a few
hundred short rows embeds in seconds on a CPU), and any fault in it or in the
embedder is a :class:`~aiden.errors.RecallError`, on which recall stays
lexical. The embedder is synchronous (its protocol): called from the
thread the store's caller runs in, as the recall index calls it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

from aiden.errors import RecallError
from aiden.experience.ranking import nearest, row_text, text_key
from aiden.experience.records import RecordRow
from aiden.recall.embedding import Embedder

__all__ = ["RecordVectors"]


class RecordVectors:
    """Record id -> (text key, unit vector) for one embedder; thread-safe."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.entries: dict[str, tuple[str, list[float]]] = {}
        """The cache (tests damage it to check that recall stays lexical)."""
        self._lock = threading.Lock()

    def update(self, rows: Sequence[RecordRow]) -> int:
        """Embed the ``rows`` without a current vector, in one call; how many were embedded."""
        with self._lock:
            return self._update(rows)

    def _update(self, rows: Sequence[RecordRow]) -> int:
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
        return len(todo)

    def near(self, rows: Sequence[RecordRow], query: str) -> list[int]:
        """Positions in ``rows`` most similar to ``query``, best first (missing vectors embedded first).

        :class:`RecallError` if the embedder fails or a cached vector does not
        fit the query's (another length, not finite): the cache is then
        dropped, to be rebuilt by the next recall.
        """
        with self._lock:
            self._update(rows)
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

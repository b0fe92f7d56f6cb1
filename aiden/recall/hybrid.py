"""Hybrid recall: event vectors beside the FTS index, searched in context and fused with BM25 by score."""

from __future__ import annotations

import logging
import sqlite3
from typing import Final

from aiden.errors import RecallError
from aiden.recall.embedding import Embedder
from aiden.recall.fusion import META_ROWS, min_max_fusion
from aiden.recall.query import MAX_QUERY_CHARS
from aiden.recall.vectors import VectorSearch, embed_missing

__all__ = ["EMBED_PER_SYNC", "NEIGHBOURS", "Hybrid"]

EMBED_PER_SYNC: Final = 5000
"""Most events one catch-up embeds: it stays bounded (a model change re-embeds a long session over
several), the rest waits for the next one."""
NEIGHBOURS: Final = 0.25
"""Weight of each neighbouring event in an event's context vector (:class:`VectorSearch`)."""

log = logging.getLogger("aiden.recall")


class Hybrid:
    """Vectors of the events beside the FTS index, fused with BM25 (:func:`min_max_fusion`).

    Events are embedded by :meth:`embed_new` (the catch-up after a compaction),
    a search embeds its query only. Each event is searched by its context
    vector (:data:`NEIGHBOURS`). An embedder failure (provider down, bad
    answer) never fails a catch-up or a recall: it is logged and counted, and
    the search stays lexical for what has no vector.
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

    def fuse(self, conn: sqlite3.Connection, query: str, ranked: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """``ranked`` (BM25, best first) fused with the :data:`META_ROWS` events nearest to ``query``."""
        # What the words search sees too: the first MAX_QUERY_CHARS, lone surrogates replaced.
        text = query[:MAX_QUERY_CHARS].encode("utf-8", "replace").decode("utf-8")
        try:
            vector = self.embedder.embed([text])[0]
            self._search.refresh(conn)
            near = self._search.top(vector, META_ROWS)
        except RecallError as exc:
            log.warning("recall: query embedding with %s failed, search stays lexical: %s", self.embedder.name, exc)
            return ranked
        return min_max_fusion([ranked, near])[:META_ROWS]

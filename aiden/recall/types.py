"""Result types of the recall index (a light module: no sqlite3 import)."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["RecallContext", "RecallHit", "RecallStats"]


class RecallContext(msgspec.Struct, frozen=True, kw_only=True):
    """The event next to a hit (the turn before it, or the reply after a user's words)."""

    seq: int
    type: str
    role: str | None
    text: str
    """Verbatim text, cut with ``…`` to what the answer budget leaves."""


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    """One recall result: a compacted event (``kind == "event"``) or a chunk summary (``"summary"``)."""

    chunk_id: str
    source: Literal["active", "pending"]
    """``active``: committed in index.yaml. ``pending``: a chunk file not (yet) in the index."""
    kind: Literal["event", "summary"]
    score: float
    """Relevance, higher is better: BM25 of the event (or summary) for the query, or with hybrid
    recall the reciprocal-rank fusion of its BM25 and vector ranks; 0.0 for an exact lookup."""
    text: str
    """The event's verbatim text (content, tool name, tool arguments) or the chunk summary,
    cut around the match with ``…`` when the answer budget requires it (then ``truncated``)."""
    first_seq: int
    """The event's seq; for a summary, the chunk's first seq."""
    last_seq: int
    """The event's seq; for a summary, the chunk's last seq."""
    type: str | None = None
    """Event type (``None`` for a summary)."""
    role: str | None = None
    timestamp: float | None = None
    truncated: bool = False
    context: RecallContext | None = None
    degraded: bool = False
    """The chunk's summary is a raw breadcrumb written when summarization failed."""

    @property
    def seq(self) -> int | None:
        """The event's seq (``None`` for a summary)."""
        return self.first_seq if self.kind == "event" else None


class RecallStats(msgspec.Struct, frozen=True, kw_only=True):
    """Telemetry of one :class:`RecallIndex`."""

    recall_calls: int
    """search() and lookup() calls."""
    results_returned: int
    pending_chunks_recalled: int
    """Returned results whose ``source`` is ``"pending"`` (never inferred from ids)."""
    rebuilds: int
    """From-scratch builds of the database (including the first one)."""
    chunks_indexed: int
    problems: tuple[str, ...] = ()
    """Chunks that could not be indexed: committed ones since the last rebuild, then pending ones."""
    embedding_failures: int = 0
    """Catch-ups whose embedding failed (recall stayed lexical for the events left without vectors)."""

"""Result types of the recall index (a light module: no sqlite3 import)."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["EventSpan", "RecallHit", "RecallStats"]


class EventSpan(msgspec.Struct, frozen=True, kw_only=True):
    """Consecutive matching events (same type and role) of one chunk."""

    first_seq: int
    last_seq: int
    type: str
    role: str | None
    snippet: str
    """Text of the best matching event of the span, centred on the match."""


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    """One recalled chunk."""

    chunk_id: str
    source: Literal["active", "pending"]
    """``active``: committed in index.yaml. ``pending``: a chunk file not (yet) in the index."""
    score: float
    """BM25-based relevance (sum over query terms), higher is better; 0.0 for an exact lookup."""
    summary: str
    """The chunk summary (possibly truncated to fit the answer bound)."""
    spans: tuple[EventSpan, ...]
    first_seq: int
    last_seq: int
    degraded: bool = False
    """The summary is a raw breadcrumb written when summarization failed."""
    matched_events: int = 0
    """Events of the chunk that matched (``spans`` may show fewer)."""


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
    """Chunks or segments that could not be indexed at the last full sync."""

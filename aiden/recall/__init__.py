"""Recall of compacted session history: an FTS5 index over chunk files and the agent tool.

* :class:`RecallIndex` (``index.py``): synchronous SQLite FTS5 index of the
  active session's chunks, with ``source`` ``"active"`` / ``"pending"`` results.
* ``query.py``: pure query building (CJK segmentation, safe FTS5 phrases, snippets).
* :data:`RECALL_TOOL` / :func:`handle_recall_tool` (``tool.py``): the
  ``recall_session_chunks`` function tool for the agent.
"""

from __future__ import annotations

from aiden.recall.index import (
    SCHEMA_VERSION,
    BulkChunk,
    EventSpan,
    RecallHit,
    RecallIndex,
    RecallStats,
    event_text,
)
from aiden.recall.tool import RECALL_TOOL, TOOL_NAME, handle_recall_tool

__all__ = [
    "RECALL_TOOL",
    "SCHEMA_VERSION",
    "TOOL_NAME",
    "BulkChunk",
    "EventSpan",
    "RecallHit",
    "RecallIndex",
    "RecallStats",
    "event_text",
    "handle_recall_tool",
]

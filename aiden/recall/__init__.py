"""Recall of compacted session history: an FTS5 index following the session store's change feed, and the agent tool.

* :class:`RecallIndex` (``index.py``): synchronous SQLite FTS5 index of the
  active session's compacted events; ``db.py`` its database (lifecycle, and
  applying the store's change feed), ``search.py`` the BM25 ranking and the
  hits it yields.
* ``query.py``: pure query building (CJK segmentation, stopwords, dates, safe FTS5 phrases, snippets).
* ``embedding.py`` / ``vectors.py``: optional hybrid recall (the :class:`~aiden.recall.embedding.Embedder`
  protocol and the local MiniLM; event vectors, cosine search, fusion with BM25).
* :data:`RECALL_TOOL` / :func:`handle_recall_tool` (``tool.py``): the
  ``recall_session_chunks`` function tool for the agent, with the result types
  and the answer and its one budget (serialized JSON characters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiden._lazy import lazy_exports
from aiden.recall.tool import (
    RECALL_TOOL,
    TOOL_NAME,
    RecallContext,
    RecallHit,
    RecallStats,
    handle_recall_tool,
)

if TYPE_CHECKING:
    from aiden.recall.index import SCHEMA_VERSION, BulkChunk, RecallIndex, event_text

__all__ = [
    "RECALL_TOOL",
    "SCHEMA_VERSION",
    "TOOL_NAME",
    "BulkChunk",
    "RecallContext",
    "RecallHit",
    "RecallIndex",
    "RecallStats",
    "event_text",
    "handle_recall_tool",
]

# The index pulls in sqlite3: load it on first use only.
_LAZY = {name: "aiden.recall.index" for name in ("SCHEMA_VERSION", "BulkChunk", "RecallIndex", "event_text")}


__getattr__ = lazy_exports(__name__, _LAZY)

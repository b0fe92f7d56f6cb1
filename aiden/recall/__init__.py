"""Recall of compacted session history: an FTS5 index following the session store's change feed, and the agent tool.

* :class:`RecallIndex` (``index.py``): synchronous SQLite FTS5 index of the
  active session's compacted events; ``db.py`` its database lifecycle,
  ``sync.py`` applying the store's change feed, ``search.py`` the BM25 ranking.
* ``query.py`` / ``stopwords.py``: pure query building (CJK segmentation, safe FTS5 phrases, snippets).
* ``render.py``: the answer and its one budget (serialized JSON characters).
* :data:`RECALL_TOOL` / :func:`handle_recall_tool` (``tool.py``): the
  ``recall_session_chunks`` function tool for the agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiden._lazy import lazy_exports
from aiden.recall.tool import RECALL_TOOL, TOOL_NAME, handle_recall_tool
from aiden.recall.types import RecallContext, RecallHit, RecallStats

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

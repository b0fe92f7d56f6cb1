"""Recall of compacted session history: an FTS5 index following the session store's change feed, and the agent tool.

:class:`RecallIndex` (``index.py``) over its database (``db.py``) and ranking (``search.py``, pure
query text handling in ``query.py``); optional hybrid recall (``embedding.py``, ``vectors.py``); the
``recall_session_chunks`` tool and the result types (``tool.py``).
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

"""Recall of compacted session history: an FTS5 index following the session store's change feed, and the agent tool.

``index.RecallIndex`` over its database (``db.py``) and ranking (``search.py``, pure query text
handling in ``query.py``, the words for what a tool call does in ``commands.py``); optional hybrid
recall (``embedding.py``, ``vectors.py``); the ``recall_session_chunks`` tool and the result types
(``tool.py``).
"""

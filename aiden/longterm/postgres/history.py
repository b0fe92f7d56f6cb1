"""Dream's history log in PostgreSQL (blocking).

An append is one transaction under the namespace's state row lock, so cursors are unique,
increasing in commit order and gap-free; a unique index keeps a chunk to one record. The
``chunk_id`` column holds the appended id whole (chunk id and stamp, see
:func:`~aiden.longterm.history.chunk_record_id`), so that index keeps one record per session's chunk.
"""

from __future__ import annotations

from typing import Final

from aiden.errors import StorageError
from aiden.longterm.history import HistoryRecord, new_record, record_text, split_chunk_id
from aiden.longterm.postgres.schema import LongTermDb, bounded_wait
from aiden.longterm.store import LOCK_TIMEOUT_S
from aiden.storage.postgres.schema import Conn, text_value

__all__ = ["PgHistoryLog", "cursors", "read_after"]

# A row from before stamps holds the bare chunk id: it is this chunk's only with the same text (as in
# the file store), so a later session's chunk of the same seq range is still recorded.
_BY_CHUNK: Final = """
SELECT pos, stamp, content, session_key, chunk_id FROM aiden_lt_history
WHERE namespace = %s AND (chunk_id = %s OR (chunk_id = %s AND content = %s))
"""
_INSERT: Final = """
INSERT INTO aiden_lt_history (namespace, pos, stamp, content, session_key, chunk_id)
VALUES (%s, %s, %s, %s, %s, %s)
"""
_CURSORS: Final = "SELECT last_cursor, dream_cursor FROM aiden_lt_state WHERE namespace = %s"
_AFTER: Final = """
SELECT pos, stamp, content, session_key, chunk_id FROM aiden_lt_history
WHERE namespace = %s AND pos > %s ORDER BY pos LIMIT %s
"""


def _record(row: tuple[object, ...]) -> HistoryRecord:
    chunk_id, stamp = split_chunk_id(str(row[4]))
    return HistoryRecord(
        cursor=int(str(row[0])),
        timestamp=str(row[1]),
        content=str(row[2]),
        session_key=str(row[3]),
        chunk_id=chunk_id,
        chunk_stamp=stamp,
    )


def cursors(conn: Conn, namespace: str, *, lock: bool = False) -> tuple[int, int]:
    """``(last cursor, Dream's cursor)`` of ``namespace``; ``lock`` holds its state row to the transaction's end."""
    row = conn.execute(_CURSORS + " FOR UPDATE" if lock else _CURSORS, (namespace,)).fetchone()
    if row is None:  # the row is made with the tables (LongTermDb.ensure_ready) and never deleted
        raise StorageError(f"postgres: long-term namespace {namespace!r} has no state row")
    return int(row[0]), int(row[1])


class PgHistoryLog:
    """The history records and both cursors of one namespace (a :class:`~aiden.longterm.backend.HistoryLog`)."""

    def __init__(self, db: LongTermDb) -> None:
        self._db = db

    def append(self, content: str, *, session_key: str, now: float, chunk_id: str = "") -> HistoryRecord:
        text = text_value(record_text(content))
        ns = self._db.namespace
        with self._db.connection("recording history") as conn, conn.transaction():
            bounded_wait(conn, LOCK_TIMEOUT_S)
            last, _ = cursors(conn, ns, lock=True)
            if chunk_id:
                # Under the row lock: every committed append of this namespace is visible.
                bare = split_chunk_id(chunk_id)[0]
                known = conn.execute(_BY_CHUNK, (ns, chunk_id, bare, text)).fetchone()
                if known is not None:
                    return _record(known)
            record = new_record(last + 1, text, session_key=session_key, now=now, chunk_id=chunk_id)
            conn.execute(
                "UPDATE aiden_lt_state SET last_cursor = %s WHERE namespace = %s", (record.cursor, ns)
            )
            conn.execute(
                _INSERT,
                (ns, record.cursor, record.timestamp, record.content, record.session_key, chunk_id),
            )
            return record

    def read_after(self, cursor: int, *, limit: int | None = None) -> list[HistoryRecord]:
        with self._db.connection("reading history") as conn:
            return read_after(conn, self._db.namespace, cursor, limit)

    def cursor(self) -> int:
        with self._db.connection("reading the history cursor") as conn:
            return cursors(conn, self._db.namespace)[0]

    def dream_cursor(self) -> int:
        with self._db.connection("reading the Dream cursor") as conn:
            return cursors(conn, self._db.namespace)[1]

    def set_dream_cursor(self, value: int) -> None:
        with self._db.connection("moving the Dream cursor") as conn:
            conn.execute(
                "UPDATE aiden_lt_state SET dream_cursor = %s WHERE namespace = %s",
                (value, self._db.namespace),
            )

    def close(self) -> None:
        """Nothing to release: connections go back to the pool after each call."""


def read_after(conn: Conn, namespace: str, cursor: int, limit: int | None) -> list[HistoryRecord]:
    """The records of ``namespace`` after ``cursor`` on ``conn``, oldest first (``limit`` None: all)."""
    rows = conn.execute(_AFTER, (namespace, cursor, limit)).fetchall()
    return [_record(row) for row in rows]

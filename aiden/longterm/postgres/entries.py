"""Saved memories and ``profile.md`` in PostgreSQL (an :class:`~aiden.longterm.backend.EntryStore`).

A save is one upsert and a forget one delete: each is atomic on its own, and
concurrent saves from any number of workers never drop each other (there is
no index document to read-modify-write, each entry is its row). Expired
entries are filtered by the query itself, so they are never returned. The
profile is rendered as the file store renders ``profile.md`` and stored as a
document; a rebuild reads the entries and writes the document in one
transaction under a per-namespace lock, so the stored profile is always the
rendering of one committed state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, cast

from anyio.streams.memory import MemoryObjectSendStream

from aiden.errors import CorruptionError
from aiden.longterm.entries import MEMORY_TYPES, MemoryEntry, MemoryType
from aiden.longterm.postgres.schema import LongTermDb
from aiden.longterm.profile import render_profile
from aiden.longterm.threaded import ThreadedEntryStore
from aiden.storage.postgres.schema import Conn

__all__ = ["PROFILE_DOC", "PgEntryStore"]

PROFILE_DOC: Final = "profile.md"
"""The ``aiden_lt_docs`` name of the rendered profile."""
_PROFILE_LOCK_S: Final = 30.0

_UPSERT: Final = """
INSERT INTO aiden_lt_entries (namespace, id, type, title, content, created_at, expires_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (namespace, id) DO UPDATE SET
    saved = nextval('aiden_lt_entry_order'), type = EXCLUDED.type, title = EXCLUDED.title,
    content = EXCLUDED.content, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
"""

# "Unexpired" is expires_at > now: an entry is expired from the instant now reaches expires_at.
_ACTIVE: Final = """
SELECT id, type, title, content, created_at, expires_at FROM aiden_lt_entries
WHERE namespace = %s AND (expires_at IS NULL OR expires_at > %s)
  AND (%s::text[] IS NULL OR type = ANY(%s::text[]))
ORDER BY saved
"""

_ONE: Final = """
SELECT id, type, title, content, created_at, expires_at FROM aiden_lt_entries
WHERE namespace = %s AND id = %s AND (expires_at IS NULL OR expires_at > %s)
"""

Row = tuple[object, ...]


def _entry(row: Row) -> MemoryEntry:
    kind = str(row[1])
    if kind not in MEMORY_TYPES:
        raise CorruptionError(f"postgres: memory {row[0]!r} has an unknown type {kind!r}")
    expires = row[5]
    return MemoryEntry(
        id=str(row[0]),
        type=cast(MemoryType, kind),
        title=str(row[2]),
        content=str(row[3]),
        created_at=float(cast(float, row[4])),
        expires_at=None if expires is None else float(cast(float, expires)),
    )


class PgEntryStore(ThreadedEntryStore):
    """The saved memories of one namespace; ``dirty`` is the profile debouncer's signal stream."""

    def __init__(self, db: LongTermDb, *, dirty: MemoryObjectSendStream[None] | None = None) -> None:
        super().__init__(dirty=dirty)
        self._db = db

    # --- blocking ------------------------------------------------------------------------
    def _save_sync(self, entry: MemoryEntry) -> None:
        with self._db.connection("saving a memory") as conn:
            conn.execute(
                _UPSERT,
                (
                    self._db.namespace,
                    entry.id,
                    entry.type,
                    entry.title,
                    entry.content,
                    entry.created_at,
                    entry.expires_at,
                ),
            )

    def _forget_sync(self, memory_id: str) -> bool:
        with self._db.connection("forgetting a memory") as conn:
            row = conn.execute(
                "DELETE FROM aiden_lt_entries WHERE namespace = %s AND id = %s RETURNING id",
                (self._db.namespace, memory_id),
            ).fetchone()
        return row is not None

    def _get_sync(self, memory_id: str, now: float) -> MemoryEntry | None:
        with self._db.connection("reading a memory") as conn:
            row = conn.execute(_ONE, (self._db.namespace, memory_id, now)).fetchone()
        return None if row is None else _entry(row)

    @staticmethod
    def _active(conn: Conn, namespace: str, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
        wanted = None if types is None else list(types)
        rows = conn.execute(_ACTIVE, (namespace, now, wanted, wanted)).fetchall()
        return [_entry(row) for row in rows]

    def _entries_sync(self, now: float, types: Sequence[str] | None) -> list[MemoryEntry]:
        with self._db.connection("reading memories") as conn:
            return self._active(conn, self._db.namespace, now, types)

    def _rebuild_profile_sync(self, now: float) -> bool:
        ns = self._db.namespace
        with self._db.connection("rebuilding the profile") as conn, conn.transaction():
            # Serialized per namespace: the profile written is the rendering of the entries read.
            self._db.serialize(conn, "profile", _PROFILE_LOCK_S)
            text = render_profile(self._active(conn, ns, now, None), now=now)
            row = conn.execute(
                "SELECT body FROM aiden_lt_docs WHERE namespace = %s AND name = %s", (ns, PROFILE_DOC)
            ).fetchone()
            if row is not None and row[0] == text:
                return False
            conn.execute(
                "INSERT INTO aiden_lt_docs (namespace, name, body) VALUES (%s, %s, %s)"
                " ON CONFLICT (namespace, name) DO UPDATE SET body = EXCLUDED.body",
                (ns, PROFILE_DOC, text),
            )
            return True

"""The PostgreSQL change feed: a session generation's chunks in commit order.

Every chunk row has its commit position ``pos`` (0, 1, 2, ...) inside its
generation, and the compaction row counts them (``chunk_count``) together
with a change counter (``changes``: +1 for every commit and every replaced
summary). A token is (generation, chunks delivered, the last of them's
``last_seq``, ``changes``): an unchanged session answers from that one row;
otherwise the chunks at positions after the token are read in one
repeatable-read transaction, so the state row and the chunks agree. A
rotation makes a new generation: a token of the old one is answered with a
reset. A commit is one transaction, so there are never pending chunks.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from typing import Any

from aiden.errors import CorruptionError
from aiden.events import validate_id
from aiden.storage import chunks as cs
from aiden.storage.postgres.schema import Conn, Pool, chunk_from_rows, decode_entry, decode_index, translated
from aiden.storage.protocol import ChangeToken, ChunkChanges, PendingChunks

__all__ = ["PgChangeFeed", "chunks_of_rows"]

_STATE = """
SELECT s.generation, c.chunk_count, c.last_seq, c.changes, c.index_doc
FROM aiden_sessions s JOIN aiden_compaction c ON c.generation = s.generation
WHERE s.session_id = %s
"""

_CHUNKS = """
SELECT c.pos, c.entry, e.seq, e.payload
FROM aiden_chunks c LEFT JOIN aiden_events e ON e.generation = c.generation AND e.chunk_pos = c.pos
WHERE c.generation = %s AND c.pos >= %s AND c.pos < %s
ORDER BY c.pos, e.seq
"""


def chunks_of_rows(rows: Iterable[tuple[Any, ...]]) -> tuple[list[cs.ChunkFile], list[str]]:
    """Group ``(pos, entry, seq, payload)`` rows ordered by pos then seq into verified chunks.

    A chunk that does not verify is named in the second list instead.
    """
    chunks: list[cs.ChunkFile] = []
    problems: list[str] = []
    for _, group in groupby(rows, key=lambda r: r[0]):
        members = list(group)
        try:
            entry = decode_entry(bytes(members[0][1]))
            payloads = [(int(r[2]), bytes(r[3])) for r in members if r[2] is not None]
            chunks.append(chunk_from_rows(entry, payloads))
        except CorruptionError as exc:
            problems.append(str(exc))
    return chunks, problems


class PgChangeFeed:
    """The change feed of one session id (a :class:`~aiden.storage.protocol.ChangeFeed`)."""

    def __init__(self, pool: Pool, session_id: str) -> None:
        self._pool = pool
        self._session_id = session_id

    def _state(self, conn: Conn) -> tuple[ChangeToken, bytes]:
        row = conn.execute(_STATE, (self._session_id,)).fetchone()
        if row is None:  # the session row is created before the store is handed out
            raise CorruptionError(f"postgres: session {self._session_id!r} has no row")
        token = ChangeToken(
            generation=str(row[0]), last_seq=int(row[2]), chunks=int(row[1]), stamp=str(row[3])
        )
        return token, bytes(row[4])

    def change_token(self) -> ChangeToken:
        """The current position: one indexed row."""
        with translated("reading the change token"), self._pool.connection() as conn:
            return self._state(conn)[0]

    def chunks_since(self, token: ChangeToken | None) -> ChunkChanges:
        """The chunks committed after ``token``, in commit order (a reset when it cannot be continued)."""
        with translated("reading the change feed"), self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            now, index_doc = self._state(conn)
            if token == now:
                return ChunkChanges(reset=False, chunks=[], token=now)
            reset = (
                token is None or token.generation != now.generation or not self._continues(conn, now, token)
            )
            start = 0 if reset or token is None else token.chunks
            rows = conn.execute(_CHUNKS, (now.generation, start, now.chunks)).fetchall()
        chunks, problems = chunks_of_rows(rows)
        if reset:
            return ChunkChanges(
                reset=True, chunks=chunks, token=now, problems=problems, pending=PendingChunks([], [])
            )
        index = decode_index(index_doc)
        # Live entries delivered earlier may have had their summary replaced since.
        sealed = now.chunks - len(index.chunks)
        updated = list(index.chunks[: max(0, start - sealed)])
        return ChunkChanges(reset=False, chunks=chunks, token=now, problems=problems, updated=updated)

    def _continues(self, conn: Conn, now: ChangeToken, token: ChangeToken) -> bool:
        if token.chunks > now.chunks:
            return False
        if token.chunks == 0:
            return token.last_seq == 0
        row = conn.execute(
            "SELECT last_seq FROM aiden_chunks WHERE generation = %s AND pos = %s",
            (now.generation, token.chunks - 1),
        ).fetchone()
        return row is not None and int(row[0]) == token.last_seq

    def read_chunk(self, chunk_id: str) -> cs.ChunkFile:
        """One committed chunk of the current generation (CorruptionError if missing or damaged)."""
        validate_id(chunk_id, what="chunk id")
        with translated("reading a chunk"), self._pool.connection() as conn:
            rows = conn.execute(
                """
                SELECT c.pos, c.entry, e.seq, e.payload
                FROM aiden_sessions s
                JOIN aiden_chunks c ON c.generation = s.generation AND c.chunk_id = %s
                LEFT JOIN aiden_events e ON e.generation = c.generation AND e.chunk_pos = c.pos
                WHERE s.session_id = %s
                ORDER BY e.seq
                """,
                (chunk_id, self._session_id),
            ).fetchall()
        if not rows:
            raise CorruptionError(f"chunk {chunk_id} is missing")
        chunks, problems = chunks_of_rows(rows)
        if problems:
            raise CorruptionError(problems[0])
        return chunks[0]

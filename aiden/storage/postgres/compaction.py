"""The compaction rows: a pass's writes, each one transaction (commit, replace_summary, rotate),
recovery's checks, and the change feed that reads them.

They take the session's compaction row ``FOR UPDATE`` (never the counter
row: appends go on), so two commits of one generation are serialized even
when a lost connection dropped the advisory lock; the expected last seq is
checked under that row lock, which makes a stale plan a
:class:`~aiden.errors.CommitConflict` and never a second chunk over the
same events.

**The change feed** (:class:`PgChangeFeed`) reads what those writes leave: a session generation's
chunks in commit order. Every chunk row has its commit position ``pos`` (0, 1, 2, ...) inside its
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

from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import Any, Final

import msgspec

from aiden.config import Config
from aiden.errors import CommitConflict, CorruptionError, StorageError
from aiden.events import SessionEvent, encode_event, validate_id
from aiden.storage import chunks as cs
from aiden.storage.postgres.schema import (
    EMPTY_INDEX,
    SCHEMA_VERSION,
    Conn,
    Pool,
    chunk_from_rows,
    decode_entry,
    decode_index,
    encode_entry,
    encode_index,
    seal,
    translated,
)
from aiden.storage.protocol import ChangeToken, ChunkChanges, PendingChunks

__all__ = ["CHECKS", "PgChangeFeed", "check", "chunks_of_rows", "commit", "create_generation", "replace_summary", "rotate"]

_LOCKED_STATE = """
SELECT c.generation, c.index_doc, c.chunk_count
FROM aiden_sessions s JOIN aiden_compaction c ON c.generation = s.generation
WHERE s.session_id = %s
FOR UPDATE OF c
"""


def create_generation(conn: Conn, session_id: str, generation: str) -> None:
    """The compaction row of a new, empty generation (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO aiden_compaction (generation, session_id, index_doc) VALUES (%s, %s, %s)",
        (generation, session_id, EMPTY_INDEX),
    )


def _locked_state(conn: Conn, session_id: str) -> tuple[str, cs.ChunkIndex, int]:
    row = conn.execute(_LOCKED_STATE, (session_id,)).fetchone()
    if row is None:
        raise StorageError(f"postgres: session {session_id!r} has no compaction row")
    return str(row[0]), decode_index(bytes(row[1])), int(row[2])


def _render(index: cs.ChunkIndex, config: Config) -> str:
    return cs.render_summary_md(index, index.chunks[-config.summary_max_chunks :])


def commit(
    conn: Conn,
    session_id: str,
    config: Config,
    *,
    expected_last_seq: int,
    entry: cs.ChunkEntry,
    events: Sequence[SessionEvent],
    next_index: cs.ChunkIndex,
) -> tuple[cs.ChunkEntry, int]:
    """Commit one chunk: its row, its events out of the hot window, index and summary; one transaction.

    The events named must be exactly the hot events the entry covers (what
    a snapshot planned from); anything else is refused with nothing changed,
    so no event can leave the hot window without landing in the chunk.
    """
    full = cs.encode_chunk(entry, events)[1]
    seqs = [e.seq for e in events]
    payloads = [encode_event(e) for e in events]
    with translated("committing a chunk"), conn.transaction():
        generation, current, pos = _locked_state(conn, session_id)
        if current.last_seq != expected_last_seq:
            raise CommitConflict(
                f"index moved from seq {expected_last_seq} to {current.last_seq} during the pass"
            )
        chunks = [*next_index.chunks[:-1], full] if next_index.chunks else [full]
        index = seal(msgspec.structs.replace(next_index, chunks=chunks), config.summary_max_chunks + 1)
        hot = conn.execute(
            "SELECT seq FROM aiden_events WHERE generation = %s AND chunk_pos IS NULL AND seq BETWEEN %s AND %s",
            (generation, full.first_seq, full.last_seq),
        ).fetchall()
        covered = sorted(int(r[0]) for r in hot if full.covers(int(r[0])))
        if covered != sorted(seqs):
            raise StorageError(
                f"postgres: chunk {full.chunk_id} names seqs {sorted(seqs)[:8]}... but the hot window holds "
                f"{covered[:8]}... in its range: refused"
            )
        conn.execute(
            "INSERT INTO aiden_chunks (generation, pos, chunk_id, entry, first_seq, last_seq)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (generation, pos, full.chunk_id, encode_entry(full), full.first_seq, full.last_seq),
        )
        # The chunk holds the events as given (verbatim, as a chunk file would).
        conn.execute(
            "UPDATE aiden_events e SET chunk_pos = %s, payload = v.payload"
            " FROM unnest(%s::bigint[], %s::bytea[]) AS v(seq, payload)"
            " WHERE e.generation = %s AND e.seq = v.seq AND e.chunk_pos IS NULL",
            (pos, seqs, payloads, generation),
        )
        conn.execute(
            "UPDATE aiden_compaction SET index_doc = %s, summary = %s, chunk_count = %s, last_seq = %s,"
            " changes = changes + 1 WHERE generation = %s",
            (encode_index(index), _render(index, config), pos + 1, index.last_seq, generation),
        )
        row = conn.execute(
            "SELECT count(*) FROM aiden_events WHERE generation = %s AND chunk_pos IS NULL", (generation,)
        ).fetchone()
    return full, int(row[0]) if row is not None else 0


def replace_summary(conn: Conn, session_id: str, config: Config, chunk_id: str, summary: str) -> bool:
    """Give a live chunk its real summary (chunk row, index, summary); False when it is not live."""
    with translated("replacing a summary"), conn.transaction():
        generation, index, _ = _locked_state(conn, session_id)
        pos = next((i for i, e in enumerate(index.chunks) if e.chunk_id == chunk_id), None)
        if pos is None:
            return False
        # Same events, so the same checksum and count: only the summary fields change.
        full = msgspec.structs.replace(index.chunks[pos], summary=summary, degraded=False)
        live = list(index.chunks)
        live[pos] = full
        new_index = msgspec.structs.replace(index, chunks=live)
        conn.execute(
            "UPDATE aiden_chunks SET entry = %s WHERE generation = %s AND chunk_id = %s",
            (encode_entry(full), generation, chunk_id),
        )
        conn.execute(
            "UPDATE aiden_compaction SET index_doc = %s, summary = %s, changes = changes + 1 WHERE generation = %s",
            (encode_index(new_index), _render(new_index, config), generation),
        )
    return True


def current_generation(conn: Conn, session_id: str) -> str | None:
    """The generation the session points at now (None: no session row yet)."""
    with translated("reading the session generation"):
        row = conn.execute(
            "SELECT generation FROM aiden_sessions WHERE session_id = %s", (session_id,)
        ).fetchone()
    return None if row is None else str(row[0])


def rotate(conn: Conn, session_id: str, closed_id: str, new_generation: str, *, seen: str | None) -> str:
    """Archive the session's generation as ``closed_id`` and point the session at an empty one; the archive id.

    The counter row is locked first: an append either commits into the old
    generation before, or into the new one after. ``seen`` is the generation the
    caller meant to close: when another worker archived it meanwhile, the two
    rotations are one, and this returns that archive's id without rotating again.
    ``StorageError`` when this session archived ``closed_id`` already (nothing changed).
    """
    with translated("rotating the session"), conn.transaction():
        row = conn.execute(
            "SELECT generation FROM aiden_sessions WHERE session_id = %s FOR UPDATE", (session_id,)
        ).fetchone()
        if row is None:
            raise StorageError(f"postgres: session {session_id!r} has no row")
        if seen is not None and str(row[0]) != seen:
            done = conn.execute(
                "SELECT closed_id FROM aiden_archives WHERE session_id = %s AND generation = %s",
                (session_id, seen),
            ).fetchone()
            if done is not None:
                return str(done[0])
        archived = conn.execute(
            "INSERT INTO aiden_archives (session_id, closed_id, generation) VALUES (%s, %s, %s)"
            " ON CONFLICT DO NOTHING RETURNING closed_id",
            (session_id, closed_id, row[0]),
        ).fetchone()
        if archived is None:
            raise StorageError(f"archive {closed_id!r} already exists")
        conn.execute(
            "UPDATE aiden_sessions SET generation = %s, next_seq = 0 WHERE session_id = %s",
            (new_generation, session_id),
        )
        create_generation(conn, session_id, new_generation)
    return closed_id


CHECKS: Final = (
    "schema version",
    "session and compaction rows",
    "seq counter past every stored seq",
    "index decodes and matches the chunk rows",
    "no event in an uncommitted chunk",
)
"""What :func:`check` verifies, in order."""


def check(conn: Conn, session_id: str) -> list[str]:
    """Recovery's checks of one session (read-only): a description of each problem found."""
    problems: list[str] = []
    row = conn.execute(
        "SELECT version FROM aiden_schema_version WHERE component = 'session_store'"
    ).fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        problems.append(f"schema version is {None if row is None else row[0]!r}, expected {SCHEMA_VERSION}")
    row = conn.execute(
        "SELECT s.generation, s.next_seq, c.index_doc, c.chunk_count, c.last_seq"
        " FROM aiden_sessions s LEFT JOIN aiden_compaction c ON c.generation = s.generation"
        " WHERE s.session_id = %s",
        (session_id,),
    ).fetchone()
    if row is None or row[2] is None:
        return [*problems, f"session {session_id!r} has no session or compaction row"]
    generation, next_seq, count, last_seq = str(row[0]), int(row[1]), int(row[3]), int(row[4])
    # Both are index lookups (primary key; the chunk_pos index): recovery on open stays cheap
    # however long the session is.
    stats = conn.execute(
        "SELECT (SELECT seq FROM aiden_events WHERE generation = %s ORDER BY seq DESC LIMIT 1),"
        " (SELECT count(*) FROM aiden_events WHERE generation = %s AND chunk_pos >= %s)",
        (generation, generation, count),
    ).fetchone()
    top, orphans = (int(stats[0] or 0), int(stats[1])) if stats is not None else (0, 0)
    if top > next_seq:
        problems.append(f"seq counter {next_seq} is behind stored seq {top}: seqs could repeat")
    try:
        index = decode_index(bytes(row[2]))
    except CorruptionError as exc:
        problems.append(str(exc))
    else:
        chunk_rows = conn.execute(
            "SELECT count(*), coalesce(max(pos), -1) FROM aiden_chunks WHERE generation = %s", (generation,)
        ).fetchone()
        rows, top_pos = (int(chunk_rows[0]), int(chunk_rows[1])) if chunk_rows is not None else (0, -1)
        listed = sum(s.chunks for s in index.segments) + len(index.chunks)
        if not (rows == count == listed == top_pos + 1) or index.last_seq != last_seq:
            problems.append(
                f"index lists {listed} chunks to seq {index.last_seq}; {rows} chunk rows;"
                f" the state row says {count} chunks to seq {last_seq}"
            )
    if orphans:
        problems.append(f"{orphans} events name a chunk that was never committed")
    return problems


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

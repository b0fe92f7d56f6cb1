"""The PostgreSQL session store: one session id of a shared database behind :class:`SessionStore`.

Any number of store objects (workers, processes, machines) may serve the
same session id at once; the schema and the session's rows are created on
first use. psycopg errors become :class:`~aiden.errors.StorageError`.

``commit`` and ``replace_summary`` run under the compaction row ``FOR UPDATE``
(never the counter row: appends go on), which serializes two commits even when
a lost connection dropped the advisory lock; the expected last seq is checked
under it, so a stale plan is a :class:`~aiden.errors.CommitConflict`.
``rotate`` moves the session id to a new, empty generation; the old one stays
under its closed id (``aiden_archives``).

**The change feed**: chunk rows have their commit position ``pos``; the
compaction row counts them (``chunk_count``) and every change (``changes``,
the token's stamp), so an unchanged session answers from that one row. Commits
are transactions: there are never pending chunks.
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from typing import Any, Final

import msgspec

from aiden.config import Config
from aiden.errors import AidenError, CommitConflict, CorruptionError, StorageError
from aiden.events import MAX_SEQ, SessionEvent, encode_event, validate_id
from aiden.storage import chunks as cs
from aiden.storage.postgres import appends
from aiden.storage.postgres.locks import AdvisoryLock
from aiden.storage.postgres.schema import (
    EMPTY_INDEX,
    SCHEMA_VERSION,
    Conn,
    Pool,
    decode_entry,
    decode_index,
    decode_payload,
    encode,
    ensure_schema,
    lease_pool,
    release_pool,
    require_pool_size,
    text_value,
    translated,
)
from aiden.storage.protocol import (
    AppendGroup,
    ChangeToken,
    ChunkChanges,
    PendingChunks,
    PreparedEvent,
    RecoveryReport,
    SessionStore,
    Snapshot,
)

__all__ = ["CHECKS", "DSN_ENV", "PostgresSessionStore"]

DSN_ENV = "AIDEN_PG_DSN"
"""The environment variable read for the DSN when none is given (libpq's ``PG*`` variables also apply)."""

CHECKS: Final = (
    "schema version",
    "session and compaction rows",
    "seq counter past every stored seq",
    "index decodes and matches the chunk rows",
    "no event in an uncommitted chunk",
)
"""What :meth:`PostgresSessionStore.recover` verifies, in order."""


_HOT = """
SELECT e.seq, e.payload FROM aiden_sessions s
JOIN aiden_events e ON e.generation = s.generation AND e.chunk_pos IS NULL
WHERE s.session_id = %s ORDER BY e.seq
"""

_COMPACTION = """
SELECT c.index_doc, c.summary FROM aiden_sessions s JOIN aiden_compaction c ON c.generation = s.generation
WHERE s.session_id = %s
"""

_STATE = """
SELECT s.generation, c.chunk_count, c.last_seq, c.changes, c.index_doc
FROM aiden_sessions s JOIN aiden_compaction c ON c.generation = s.generation
WHERE s.session_id = %s
"""
# The token alone: read on every hot-window read, so without the index document (it grows with chunks).
_TOKEN = _STATE.replace(", c.index_doc", "")

_CHUNKS = """
SELECT c.pos, c.entry, e.seq, e.payload
FROM aiden_chunks c LEFT JOIN aiden_events e ON e.generation = c.generation AND e.chunk_pos = c.pos
WHERE c.generation = %s AND c.pos >= %s AND c.pos < %s
ORDER BY c.pos, e.seq
"""


class PostgresSessionStore:
    """The events, chunks and summaries of ``session_id`` in PostgreSQL (a :class:`SessionStore`).

    ``dsn`` is a libpq connection string or URI (default: ``$AIDEN_PG_DSN``,
    then libpq's ``PG*`` variables); it is never logged. ``pool`` shares an open
    pool (``close`` leaves it open); otherwise the store leases the pool every
    store of this process on the DSN shares (at least ``max_size``
    connections, waiting up to ``timeout`` seconds for one). A pool below
    :data:`~aiden.storage.postgres.schema.MIN_POOL_SIZE` is a
    :class:`~aiden.errors.ConfigError`, a bad id an
    :class:`~aiden.errors.InvalidIdError`. A memory opened on this store keeps
    its long-term memory in the same database, shared by every memory with the
    same ``long_term_namespace`` (default: the session id).
    """

    def __init__(
        self,
        dsn: str | None = None,
        session_id: str = "default",
        *,
        config: Config | None = None,
        pool: Pool | None = None,
        max_size: int = 4,
        timeout: float = 30.0,
        long_term_namespace: str | None = None,
    ) -> None:
        self.session_id = validate_id(session_id, what="session id")
        self.long_term_namespace = validate_id(
            session_id if long_term_namespace is None else long_term_namespace, what="long-term namespace"
        )
        """Whose long-term memory the memories opened on this store share (default: the session id)."""
        self.config = config if config is not None else Config()
        self._own_pool = pool is None
        if pool is not None:
            require_pool_size(pool.max_size, "the pool's max_size")
        else:
            conninfo = dsn if dsn is not None else os.environ.get(DSN_ENV, "")
            pool = lease_pool(conninfo, max_size=max_size, timeout=timeout)
        self._pool: Pool = pool
        self._lock = AdvisoryLock(pool, f"aiden.compaction:{self.session_id}")
        self._ready = False
        self._ready_lock = threading.Lock()
        self._closed = False
        self.last_checks: tuple[str, ...] = ()
        """What the last :meth:`recover` verified (names of its checks)."""

    @property
    def append_group(self) -> AppendGroup:
        """Stores on the same pool append together: one transaction for every queued session."""
        return PgAppendGroup(self._pool)

    @property
    def pool(self) -> Pool:
        """The connection pool (the long-term backend of a memory opened on this store runs on it too)."""
        return self._pool

    # --- lifecycle -------------------------------------------------------------------

    def ensure_ready(self) -> None:
        """Create the schema and this session's rows if missing (every method does it before its first statement)."""
        if self._ready:
            return
        with self._ready_lock:
            if not self._ready:
                with translated("connecting"), self._pool.connection() as conn:
                    ensure_schema(conn)
                    with translated("creating the session"), conn.transaction():
                        generation = uuid.uuid4().hex
                        row = conn.execute(
                            "INSERT INTO aiden_sessions (session_id, generation) VALUES (%s, %s)"
                            " ON CONFLICT (session_id) DO NOTHING RETURNING generation",
                            (self.session_id, generation),
                        ).fetchone()
                        if row is not None:
                            _create_generation(conn, self.session_id, generation)
                self._ready = True

    @contextmanager
    def _connection(self, what: str) -> Iterator[Conn]:
        """A pooled connection with psycopg's errors translated (``what`` names the operation)."""
        self.ensure_ready()
        with translated(what), self._pool.connection() as conn:
            yield conn

    def recover(self) -> RecoveryReport:
        """Check the session's rows (:data:`CHECKS`; commits are transactions, so nothing is half-written).

        Problems go to ``unrecoverable``; nothing is changed.
        """
        with self._connection("checking the session") as conn:
            problems = _problems(conn, self.session_id)
        self.last_checks = CHECKS
        return RecoveryReport(unrecoverable=problems, checked=CHECKS)

    def release(self) -> None:
        """Nothing to give back: connections are the pool's, leased per call."""

    def close(self) -> None:
        """Release the compaction lock and give back the leased pool (idempotent; a given pool stays open)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._lock.release()
        finally:
            if self._own_pool:
                release_pool(self._pool)

    # --- appends -----------------------------------------------------------------------

    def append(self, requests: Sequence[Sequence[PreparedEvent]]) -> list[list[int]]:
        """Store every request's events in one transaction (see :meth:`SessionStore.append`).

        A line that does not decode raises msgspec's error and nothing of the batch is stored.
        """
        decoded = appends.decode_requests(requests)
        if not any(decoded):
            return [[] for _ in decoded]
        with self._connection("appending events") as conn:
            return appends.append_sessions(conn, [(self.session_id, decoded)])[0]

    # --- reading ---------------------------------------------------------------------------

    def read_hot_window(self) -> list[SessionEvent]:
        """The hot window in seq order (events no committed chunk holds)."""
        with self._connection("reading the hot window") as conn:
            rows = conn.execute(_HOT, (self.session_id,)).fetchall()
        return [decode_payload(bytes(p), int(q)) for q, p in rows]

    def read_event(self, seq: int) -> SessionEvent | None:
        """The stored event with ``seq`` (hot or compacted), None if none."""
        found = self.read_events([seq])
        return found[0] if found else None

    def read_events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The stored events with these seqs, in seq order (unknown seqs are left out): one query."""
        wanted = sorted({q for q in seqs if 0 < q <= MAX_SEQ})
        if not wanted:
            return []
        with self._connection("reading events") as conn:
            rows = conn.execute(
                "SELECT e.seq, e.payload FROM aiden_sessions s JOIN aiden_events e ON e.generation = s.generation"
                " WHERE s.session_id = %s AND e.seq = ANY(%s::bigint[]) ORDER BY e.seq",
                (self.session_id, wanted),
            ).fetchall()
        return [decode_payload(bytes(p), int(q)) for q, p in rows]

    def _compaction_row(self) -> tuple[bytes, str]:
        with self._connection("reading the chunk index") as conn:
            row = conn.execute(_COMPACTION, (self.session_id,)).fetchone()
        if row is None:
            return EMPTY_INDEX, ""
        return bytes(row[0]), str(row[1])

    def load_index(self) -> cs.ChunkIndex:
        """The live index (empty before the first commit)."""
        return decode_index(self._compaction_row()[0])

    def read_summary(self) -> str:
        """The rendered summary (as the file store's summary.md), "" before the first compaction."""
        return self._compaction_row()[1]

    def read_chunk(self, chunk_id: str) -> cs.ChunkFile:
        """One committed chunk of the current generation, verified (CorruptionError if missing or damaged)."""
        self.ensure_ready()
        validate_id(chunk_id, what="chunk id")
        with self._connection("reading a chunk") as conn:
            rows = conn.execute(
                """
                SELECT c.pos, c.entry, e.seq, e.payload
                FROM aiden_sessions s
                JOIN aiden_chunks c ON c.generation = s.generation AND c.chunk_id = %s
                LEFT JOIN aiden_events e ON e.generation = c.generation AND e.chunk_pos = c.pos
                WHERE s.session_id = %s
                ORDER BY e.seq
                """,
                (chunk_id, self.session_id),
            ).fetchall()
        if not rows:
            raise CorruptionError(f"chunk {chunk_id} is missing")
        return _chunk(rows)

    def snapshot(self) -> Snapshot:
        """The hot window and the index, read in one repeatable-read transaction (they agree)."""
        with self._connection("taking a snapshot") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            rows = conn.execute(_HOT, (self.session_id,)).fetchall()
            row = conn.execute(_COMPACTION, (self.session_id,)).fetchone()
        index = decode_index(bytes(row[0])) if row is not None else cs.ChunkIndex()
        return Snapshot([decode_payload(bytes(p), int(q)) for q, p in rows], index, 0)

    def survey_root(self, min_bytes: int) -> str | None:
        """None: the helper process surveys file stores only, so this process surveys the hot window."""
        return None

    # --- compaction ---------------------------------------------------------------------------

    def lock_compaction(self) -> None:
        """Take the session's advisory lock (waits up to ``lock_timeout_s``, then LockError)."""
        self.ensure_ready()
        self._lock.acquire(self.config.lock_timeout_s)

    def unlock_compaction(self) -> None:
        """Release the advisory lock if held."""
        self._lock.release()

    def commit(
        self,
        *,
        expected_last_seq: int,
        entry: cs.ChunkEntry,
        events: Sequence[SessionEvent],
        next_index: cs.ChunkIndex,
        pushed_out: Sequence[cs.ChunkEntry],
    ) -> tuple[cs.ChunkEntry, int]:
        """Commit one chunk and trim the hot window in one transaction; the entry and events left hot.

        :class:`~aiden.errors.CommitConflict` when the index moved since the
        snapshot. The events must be exactly the hot events the entry covers,
        else nothing changes (no event leaves the hot window without landing in
        the chunk). ``pushed_out`` is unused: the entries stay chunk rows.
        """
        full = cs.encode_chunk(entry, events)[1]
        seqs = [e.seq for e in events]
        with self._connection("compacting") as conn, translated("committing a chunk"), conn.transaction():
            generation, current, pos = _locked_state(conn, self.session_id)
            if current.last_seq != expected_last_seq:
                raise CommitConflict(
                    f"index moved from seq {expected_last_seq} to {current.last_seq} during the pass"
                )
            chunks = [*next_index.chunks[:-1], full]
            index = cs.sealed_index(
                msgspec.structs.replace(next_index, chunks=chunks), self.config.summary_max_chunks + 1, encode
            )
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
                (generation, pos, full.chunk_id, encode(full), full.first_seq, full.last_seq),
            )
            # The chunk holds the events as given (verbatim, as a chunk file would).
            conn.execute(
                "UPDATE aiden_events e SET chunk_pos = %s, payload = v.payload"
                " FROM unnest(%s::bigint[], %s::bytea[]) AS v(seq, payload)"
                " WHERE e.generation = %s AND e.seq = v.seq AND e.chunk_pos IS NULL",
                (pos, seqs, [encode_event(e) for e in events], generation),
            )
            conn.execute(
                "UPDATE aiden_compaction SET index_doc = %s, summary = %s, chunk_count = %s, last_seq = %s,"
                " changes = changes + 1 WHERE generation = %s",
                (encode(index), self._render(index), pos + 1, index.last_seq, generation),
            )
            row = conn.execute(
                "SELECT count(*) FROM aiden_events WHERE generation = %s AND chunk_pos IS NULL", (generation,)
            ).fetchone()
        return full, int(row[0]) if row is not None else 0

    def replace_summary(self, chunk_id: str, summary: str) -> bool:
        """Give a live chunk its real summary (chunk row, index, summary); False when it is no longer live."""
        with self._connection("compacting") as conn, translated("replacing a summary"), conn.transaction():
            generation, index, _ = _locked_state(conn, self.session_id)
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
                (encode(full), generation, chunk_id),
            )
            conn.execute(
                "UPDATE aiden_compaction SET index_doc = %s, summary = %s, changes = changes + 1 WHERE generation = %s",
                (encode(new_index), self._render(new_index), generation),
            )
        return True

    def _render(self, index: cs.ChunkIndex) -> str:
        return text_value(cs.render_summary_md(index, index.chunks[-self.config.summary_max_chunks :]))

    def rotate(self, closed_session_id: str) -> str:
        """Archive the session's generation as ``closed_session_id`` and start an empty one.

        :class:`~aiden.errors.InvalidIdError` for a bad id, :class:`StorageError`
        when this session already archived that id (nothing changed). Takes the
        compaction lock, then the counter row (``FOR UPDATE``): an append commits into
        the old generation before or into the new one after. Concurrent rotations of one generation are one: the
        later returns the id the first archived it under.
        """
        validate_id(closed_session_id, what="session id")
        # The generation this call means to close, read before waiting for the lock: a worker
        # that rotated it while this one waited made the same rotation, and its id is returned.
        with self._connection("compacting") as conn, translated("reading the session generation"):
            row = conn.execute(
                "SELECT generation FROM aiden_sessions WHERE session_id = %s", (self.session_id,)
            ).fetchone()
        seen = None if row is None else str(row[0])
        self.lock_compaction()
        try:
            with self._connection("compacting") as conn, translated("rotating the session"), conn.transaction():
                row = conn.execute(
                    "SELECT generation FROM aiden_sessions WHERE session_id = %s FOR UPDATE", (self.session_id,)
                ).fetchone()
                if row is None:
                    raise StorageError(f"postgres: session {self.session_id!r} has no row")
                if seen is not None and str(row[0]) != seen:
                    done = conn.execute(
                        "SELECT closed_id FROM aiden_archives WHERE session_id = %s AND generation = %s",
                        (self.session_id, seen),
                    ).fetchone()
                    if done is not None:
                        return str(done[0])
                archived = conn.execute(
                    "INSERT INTO aiden_archives (session_id, closed_id, generation) VALUES (%s, %s, %s)"
                    " ON CONFLICT DO NOTHING RETURNING closed_id",
                    (self.session_id, closed_session_id, row[0]),
                ).fetchone()
                if archived is None:
                    raise StorageError(f"archive {closed_session_id!r} already exists")
                generation = uuid.uuid4().hex
                conn.execute(
                    "UPDATE aiden_sessions SET generation = %s, next_seq = 0 WHERE session_id = %s",
                    (generation, self.session_id),
                )
                _create_generation(conn, self.session_id, generation)
            return closed_session_id
        finally:
            self.unlock_compaction()

    # --- change feed ----------------------------------------------------------------------------

    def change_token(self) -> ChangeToken:
        """The change feed's current position: one indexed row."""
        with self._connection("reading the change token") as conn:
            row = conn.execute(_TOKEN, (self.session_id,)).fetchone()
        if row is None:  # the session row is created before the store is handed out
            raise CorruptionError(f"postgres: session {self.session_id!r} has no row")
        return _token(row)

    def chunks_since(self, token: ChangeToken | None) -> ChunkChanges:
        """The chunks committed after ``token``, in commit order (a reset when it cannot be continued)."""
        with self._connection("reading the change feed") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            now, index_doc = self._state(conn)
            if token == now:
                return ChunkChanges(reset=False, chunks=[], token=now)
            reset = token is None or token.generation != now.generation or not _continues(conn, now, token)
            start = 0 if reset or token is None else token.chunks
            rows = conn.execute(_CHUNKS, (now.generation, start, now.chunks)).fetchall()
        chunks: list[cs.ChunkFile] = []
        problems: list[str] = []
        for _, members in groupby(rows, key=itemgetter(0)):
            try:
                chunks.append(_chunk(list(members)))
            except CorruptionError as exc:  # named in problems instead
                problems.append(str(exc))
        if reset:
            return ChunkChanges(
                reset=True, chunks=chunks, token=now, problems=problems, pending=PendingChunks([], [])
            )
        index = decode_index(index_doc)
        # Live entries delivered earlier may have had their summary replaced since.
        sealed = now.chunks - len(index.chunks)
        updated = list(index.chunks[: max(0, start - sealed)])
        return ChunkChanges(reset=False, chunks=chunks, token=now, problems=problems, updated=updated)

    def _state(self, conn: Conn) -> tuple[ChangeToken, bytes]:
        row = conn.execute(_STATE, (self.session_id,)).fetchone()
        if row is None:  # the session row is created before the store is handed out
            raise CorruptionError(f"postgres: session {self.session_id!r} has no row")
        return _token(row), bytes(row[4])


def _token(row: Sequence[Any]) -> ChangeToken:
    """The change token of a ``_STATE`` or ``_TOKEN`` row."""
    return ChangeToken(generation=str(row[0]), last_seq=int(row[2]), chunks=int(row[1]), stamp=str(row[3]))


def _create_generation(conn: Conn, session_id: str, generation: str) -> None:
    """The compaction row of a new, empty generation (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO aiden_compaction (generation, session_id, index_doc) VALUES (%s, %s, %s)",
        (generation, session_id, EMPTY_INDEX),
    )


def _locked_state(conn: Conn, session_id: str) -> tuple[str, cs.ChunkIndex, int]:
    """The generation, index and chunk count, the compaction row locked until the transaction ends."""
    row = conn.execute(_STATE + "FOR UPDATE OF c", (session_id,)).fetchone()
    if row is None:
        raise StorageError(f"postgres: session {session_id!r} has no compaction row")
    return str(row[0]), decode_index(bytes(row[4])), int(row[1])


def _continues(conn: Conn, now: ChangeToken, token: ChangeToken) -> bool:
    """Whether ``token``'s chunks are still the first of ``now``'s generation."""
    if token.chunks > now.chunks:
        return False
    if token.chunks == 0:
        return token.last_seq == 0
    row = conn.execute(
        "SELECT last_seq FROM aiden_chunks WHERE generation = %s AND pos = %s",
        (now.generation, token.chunks - 1),
    ).fetchone()
    return row is not None and int(row[0]) == token.last_seq


def _chunk(rows: Sequence[tuple[Any, ...]]) -> cs.ChunkFile:
    """One chunk from its ``(pos, entry, seq, payload)`` rows in seq order, verified as a chunk file is."""
    entry = decode_entry(bytes(rows[0][1]))
    payloads = [(int(r[2]), bytes(r[3])) for r in rows if r[2] is not None]
    digest = hashlib.sha256(b"".join(p for _, p in payloads)).hexdigest()
    if digest != entry.sha256 or len(payloads) != entry.count:
        raise CorruptionError(f"postgres: chunk {entry.chunk_id}: checksum mismatch")
    return cs.ChunkFile(entry, [decode_payload(p, q) for q, p in payloads])


def _problems(conn: Conn, session_id: str) -> list[str]:
    """Recovery's checks (:data:`CHECKS`) of one session, read-only: a description of each problem found."""
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
    # Both are index lookups: recovery stays cheap however long the session is.
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


class PgAppendGroup:
    """The appends of every session on one pool, made durable in one transaction (an :class:`AppendGroup`).

    Equal to every group of the same pool.
    """

    __slots__ = ("_pool",)

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PgAppendGroup) and other._pool is self._pool

    def __hash__(self) -> int:
        return id(self._pool)

    def append_sessions(
        self, batches: Sequence[tuple[SessionStore, Sequence[Sequence[PreparedEvent]]]]
    ) -> list[list[list[int]] | Exception]:
        """Each batch as its store's :meth:`PostgresSessionStore.append` would store it, in one transaction."""
        out: list[list[list[int]] | Exception] = []
        work: list[tuple[str, appends.Decoded]] = []
        slots: list[int] = []  # which batch of ``out`` each entry of ``work`` answers
        for store, requests in batches:
            if not isinstance(store, PostgresSessionStore) or store.pool is not self._pool:
                out.append(StorageError("postgres: a store of another pool in an append group"))
                continue
            try:
                store.ensure_ready()
                decoded = appends.decode_requests(requests)
            except (AidenError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                out.append(exc)
                continue
            out.append([[] for _ in decoded])
            if any(decoded):
                slots.append(len(out) - 1)
                work.append((store.session_id, decoded))
        if not work:
            return out
        try:
            with translated("appending events"), self._pool.connection() as conn:
                for slot, seqs in zip(slots, appends.append_sessions(conn, work), strict=True):
                    out[slot] = seqs
        except AidenError as exc:
            for slot in slots:
                out[slot] = exc
        return out

"""The PostgreSQL session store: one session id of a shared database behind :class:`SessionStore`.

Any number of store objects (workers, processes, machines) may serve the
same session id at once. Every method blocks (actors call them from worker
threads) and runs on a connection of a ``psycopg_pool`` pool; the schema and
the session's rows are created on first use.

- ``append``: one transaction per call (the group commit). The session's
  counter row is locked first, so seqs are handed out gap-free in commit
  order and an ``event_id`` lookup sees every committed event of the
  session; one statement allocates the seqs (``UPDATE ... SET next_seq =
  next_seq + n``) and inserts the events, so an append without ids is one
  round trip.
- ``commit``: one transaction: the chunk row, its events leaving the hot
  window, the index and summary on the compaction row (locked, never the
  counter row: appends go on during a commit); a stale plan raises
  :class:`~aiden.errors.CommitConflict`.
- ``lock_compaction``: an advisory lock (:mod:`aiden.storage.postgres.locks`).
- ``rotate``: the session id moves to a new, empty generation; the old one
  stays in the database under its closed id (``aiden_archives``).

psycopg errors become :class:`~aiden.errors.StorageError` (credentials masked).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from itertools import accumulate

import msgspec

from aiden.config import Config
from aiden.errors import AidenError, StorageError
from aiden.events import SessionEvent, decode_event, encode_event, validate_id
from aiden.storage import chunks as cs
from aiden.storage.postgres import compaction
from aiden.storage.postgres.locks import AdvisoryLock
from aiden.storage.postgres.schema import (
    EMPTY_INDEX,
    Conn,
    Pool,
    decode_index,
    decode_payload,
    ensure_schema,
    lease_pool,
    release_pool,
    require_pool_size,
    translated,
)
from aiden.storage.protocol import (
    AppendGroup,
    ChangeToken,
    ChunkChanges,
    PreparedEvent,
    RecoveryReport,
    SessionStore,
    Snapshot,
)

__all__ = ["DSN_ENV", "PostgresSessionStore"]

DSN_ENV = "AIDEN_PG_DSN"
"""The environment variable read for the DSN when none is given (libpq's ``PG*`` variables also apply)."""

_MAX_SEQ = 2**63 - 1

_HOT = """
SELECT e.seq, e.payload FROM aiden_sessions s
JOIN aiden_events e ON e.generation = s.generation AND e.chunk_pos IS NULL
WHERE s.session_id = %s ORDER BY e.seq
"""

_COMPACTION = """
SELECT c.index_doc, c.summary FROM aiden_sessions s JOIN aiden_compaction c ON c.generation = s.generation
WHERE s.session_id = %s
"""


class PostgresSessionStore:
    """The events, chunks and summaries of ``session_id`` in PostgreSQL (a :class:`SessionStore`).

    ``dsn`` is a libpq connection string or URI (default: ``$AIDEN_PG_DSN``,
    then libpq's own defaults and ``PG*`` variables); it is never logged.
    ``pool`` shares an open pool between stores (then ``close`` leaves it
    open; make it with :func:`~aiden.storage.postgres.schema.open_pool`);
    otherwise it leases the pool every store of this process on the same
    DSN shares (:func:`~aiden.storage.postgres.schema.lease_pool`, at least
    ``max_size`` connections, closed with its last store), waiting up to
    ``timeout`` seconds for a connection before :class:`StorageError`.
    Either allowing fewer than
    :data:`~aiden.storage.postgres.schema.MIN_POOL_SIZE` connections is a
    :class:`~aiden.errors.ConfigError` here, before anything runs. ``config`` supplies
    ``lock_timeout_s`` and ``summary_max_chunks`` as for the file store.
    ``session_id`` must match ``^[A-Za-z0-9_-]{1,64}$``
    (:class:`~aiden.errors.InvalidIdError` otherwise). A memory opened on
    this store keeps its long-term memory in the same database
    (:mod:`aiden.longterm.postgres.backend`), shared by every memory with the
    same ``long_term_namespace`` (default: the session id; same rules).
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
        self._feed = compaction.PgChangeFeed(pool, self.session_id)
        self._lock = AdvisoryLock(pool, f"aiden.compaction:{self.session_id}")
        self._ready = False
        self._ready_lock = threading.Lock()
        self._closed = False
        self.last_checks: tuple[str, ...] = ()
        """What the last :meth:`recover` verified (names of its checks)."""

    @property
    def append_group(self) -> AppendGroup:
        """Stores on the same pool append together: one transaction for every queued session (#36)."""
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
                    self._create_session(conn)
                self._ready = True

    @contextmanager
    def _connection(self, what: str) -> Iterator[Conn]:
        """A pooled connection with psycopg's errors translated (``what`` names the operation)."""
        self.ensure_ready()
        with translated(what), self._pool.connection() as conn:
            yield conn

    def _create_session(self, conn: Conn) -> None:
        generation = uuid.uuid4().hex
        with translated("creating the session"), conn.transaction():
            row = conn.execute(
                "INSERT INTO aiden_sessions (session_id, generation) VALUES (%s, %s)"
                " ON CONFLICT (session_id) DO NOTHING RETURNING generation",
                (self.session_id, generation),
            ).fetchone()
            if row is not None:
                compaction.create_generation(conn, self.session_id, generation)

    def recover(self) -> RecoveryReport:
        """Check the session's rows (nothing is ever half-written: commits are transactions).

        Verifies the schema version, that the seq counter is past every
        stored seq, that the index decodes and agrees with the chunk rows,
        and that no event names a chunk that was never committed. Problems
        go to ``unrecoverable``; nothing is changed. The report's ``checked``
        (and :attr:`last_checks`) names what was checked.
        """
        with self._connection("checking the session") as conn:
            problems = compaction.check(conn, self.session_id)
        self.last_checks = compaction.CHECKS
        return RecoveryReport(unrecoverable=problems, checked=compaction.CHECKS)

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
        """Store every request's events in one transaction; each request's seqs.

        A known ``event_id`` (hot, compacted, stored by any worker, or earlier
        in this batch) is not stored again and is reported as its stored seq
        negated. Every line
        is decoded first: one that does not decode raises msgspec's error and
        nothing of the batch is stored.
        """
        decoded = _decoded(requests)
        if not any(decoded):
            return [[] for _ in decoded]
        with self._connection("appending events") as conn:
            return _append_sessions(conn, [(self.session_id, decoded)])[0]

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
        wanted = sorted({q for q in seqs if 0 < q <= _MAX_SEQ})
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
        """One committed chunk, verified (CorruptionError if missing or damaged)."""
        self.ensure_ready()
        return self._feed.read_chunk(chunk_id)

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

        Raises :class:`~aiden.errors.CommitConflict` when the index moved since
        the snapshot. ``pushed_out`` feeds the file store's summary archive;
        here the entries stay readable as chunk rows.
        """
        with self._connection("compacting") as conn:
            return compaction.commit(
                conn,
                self.session_id,
                self.config,
                expected_last_seq=expected_last_seq,
                entry=entry,
                events=events,
                next_index=next_index,
            )

    def replace_summary(self, chunk_id: str, summary: str) -> bool:
        """Give a live chunk its real summary (entry, index, summary); False when it is no longer live."""
        with self._connection("compacting") as conn:
            return compaction.replace_summary(conn, self.session_id, self.config, chunk_id, summary)

    def rotate(self, closed_session_id: str) -> str:
        """Archive the session's generation as ``closed_session_id`` and start an empty one.

        :class:`~aiden.errors.InvalidIdError` for a bad id, :class:`StorageError`
        when this session already archived that id. Takes the compaction lock.
        Concurrent rotations of one generation (two workers at the same moment) are one:
        the later returns the id the first archived it under.
        """
        validate_id(closed_session_id, what="session id")
        # The generation this call means to close, read before waiting for the lock: a worker
        # that rotated it while this one waited made the same rotation, and its id is returned.
        self.ensure_ready()
        with self._connection("compacting") as conn:
            seen = compaction.current_generation(conn, self.session_id)
        self.lock_compaction()
        try:
            with self._connection("compacting") as conn:
                return compaction.rotate(
                    conn, self.session_id, closed_session_id, uuid.uuid4().hex, seen=seen
                )
        finally:
            self.unlock_compaction()

    # --- change feed ----------------------------------------------------------------------------

    def change_token(self) -> ChangeToken:
        """The change feed's current position (see :class:`~aiden.storage.postgres.compaction.PgChangeFeed`)."""
        self.ensure_ready()
        return self._feed.change_token()

    def chunks_since(self, token: ChangeToken | None) -> ChunkChanges:
        """The chunks committed after ``token`` (see :class:`~aiden.storage.postgres.compaction.PgChangeFeed`)."""
        self.ensure_ready()
        return self._feed.chunks_since(token)


_Decoded = list[list[tuple[str | None, bytes]]]


def _decoded(requests: Sequence[Sequence[PreparedEvent]]) -> _Decoded:
    """Every request's ``(event_id, line)`` pairs, each line decoded once (msgspec's error if not)."""
    return [[(p.event_id, _unsequenced(p.line)) for p in request] for request in requests]


def _unsequenced(line: bytes) -> bytes:
    """``line`` as the server gets it: an event's JSON object without a seq, which the server puts first."""
    event = decode_event(line)
    if event.seq == 0 and line.startswith(b"{"):
        return line
    return encode_event(msgspec.structs.replace(event, seq=0))


class PgAppendGroup:
    """The appends of every session on one pool, made durable in one transaction (an :class:`AppendGroup`).

    Sixty-four sessions that each append one event cost one transaction and
    one WAL flush instead of sixty-four. Equal to every group of the same pool.
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
        work: list[tuple[str, _Decoded]] = []
        slots: list[int] = []  # which batch of ``out`` each entry of ``work`` answers
        for store, requests in batches:
            if not isinstance(store, PostgresSessionStore) or store.pool is not self._pool:
                out.append(StorageError("postgres: a store of another pool in an append group"))
                continue
            try:
                store.ensure_ready()
                decoded = _decoded(requests)
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
                for slot, seqs in zip(slots, _append_sessions(conn, work), strict=True):
                    out[slot] = seqs
        except AidenError as exc:
            for slot in slots:
                out[slot] = exc
        return out


_LOCK_SESSIONS = """
SELECT session_id, generation FROM aiden_sessions WHERE session_id = ANY(%s::text[])
ORDER BY session_id FOR UPDATE
"""

# One statement allocates every session's seqs and stores its new events: alone (autocommit),
# an append is one round trip. The events travel as one bytea (their lines end to end) and the
# text of each line's end offset; the sessions' ids (which hold no comma), counts and first rows
# as comma-separated texts too: psycopg dumps a list parameter element by element in Python
# (about 3.5 us a bytes element, some 13 us a list), a bytes or str value whole. Session i's
# events are rows first+1 .. first+n of the lines; the server writes each one's seq as its first field.
_INSERT = """
WITH c AS (
    UPDATE aiden_sessions s SET next_seq = s.next_seq + v.n
    FROM unnest(
        string_to_array(%(sids)s, ','),
        string_to_array(%(counts)s, ',')::bigint[],
        string_to_array(%(firsts)s, ',')::bigint[]
    ) AS v(sid, n, first)
    WHERE s.session_id = v.sid
    RETURNING s.session_id, s.generation, s.next_seq - v.n AS base, v.first, v.n
), r AS (
    SELECT o, eid, stop, lag(stop, 1, 0::bigint) OVER (ORDER BY o) AS start
    FROM unnest(string_to_array(%(stops)s, ',')::bigint[], %(eids)s::text[])
        WITH ORDINALITY AS r(stop, eid, o)
), i AS (
    INSERT INTO aiden_events (generation, seq, event_id, payload)
    SELECT c.generation, c.base + r.o - c.first, r.eid,
        ('{"seq":' || (c.base + r.o - c.first) || ',')::bytea
        || substr(%(lines)s::bytea, r.start::integer + 2, (r.stop - r.start)::integer - 1)
    FROM c JOIN r ON r.o > c.first AND r.o <= c.first + c.n
)
SELECT session_id, base FROM c
"""

# One index probe per id (LIMIT 1 keeps the planner from turning it into a scan of the
# whole generation, which a generic plan of "event_id = ANY(...)" did: O(session) per append).
_KNOWN_IDS_OF = """
SELECT k.generation, k.id, e.seq FROM unnest(%s::text[], %s::text[]) AS k(generation, id)
CROSS JOIN LATERAL (
    SELECT seq FROM aiden_events WHERE generation = k.generation AND event_id = k.id LIMIT 1
) AS e
"""


_STATEMENT_BYTES = 64 << 20
"""Most bytes of lines one :data:`_INSERT` carries (a statement's parameters must stay under 1 GB)."""


def _inserts(new: dict[str, list[tuple[str | None, bytes]]], with_ids: bool) -> Iterator[dict[str, object]]:
    """:data:`_INSERT`'s parameters for the sessions' new events, in order, in parts of its byte limit."""
    part: dict[str, list[tuple[str | None, bytes]]] = {}
    size = 0
    for sid, rows in new.items():
        for row in rows:
            if part and size + len(row[1]) > _STATEMENT_BYTES:
                yield _insert_params(part, with_ids)
                part, size = {}, 0
            part.setdefault(sid, []).append(row)
            size += len(row[1])
    if part:
        yield _insert_params(part, with_ids)


def _insert_params(part: dict[str, list[tuple[str | None, bytes]]], with_ids: bool) -> dict[str, object]:
    sids = list(part)
    batch = [row for sid in sids for row in part[sid]]
    return {
        "sids": ",".join(sids),
        "counts": ",".join(str(len(part[sid])) for sid in sids),
        "firsts": ",".join(map(str, accumulate((len(part[sid]) for sid in sids[:-1]), initial=0))),
        "stops": ",".join(map(str, accumulate(len(line) for _, line in batch))),
        "eids": [eid for eid, _ in batch] if with_ids else None,
        "lines": b"".join(line for _, line in batch),
    }


def _append_sessions(conn: Conn, work: Sequence[tuple[str, _Decoded]]) -> list[list[list[int]]]:
    """Store every session's requests in one transaction; each entry's seqs per request.

    Entries of the same session are stored in order, as one batch would be.
    The sessions' counter rows are locked first, in session id order (two
    processes' groups never wait on each other in a cycle), so seqs are
    handed out gap-free in commit order and an ``event_id`` lookup sees
    every committed event of each session. One session alone skips the
    separate lock (and the transaction block) when its events carry no ids:
    the one ``UPDATE`` locks its row. A batch of more than
    :data:`_STATEMENT_BYTES` takes several statements.
    """
    sessions = sorted({sid for sid, _ in work})
    ids: dict[str, set[str]] = {sid: set() for sid in sessions}
    for sid, decoded in work:
        ids[sid].update(eid for request in decoded for eid, _ in request if eid is not None)
    with_ids = any(ids.values())
    locked = len(sessions) > 1 or with_ids
    size = sum(len(line) for _, decoded in work for request in decoded for _, line in request)
    several = size > _STATEMENT_BYTES
    with conn.transaction() if locked or several else nullcontext():
        known: dict[str, dict[str, int]] = {sid: {} for sid in sessions}
        if locked:
            rows = conn.execute(_LOCK_SESSIONS, (sessions,)).fetchall()
            generations = {str(r[0]): str(r[1]) for r in rows}
            missing = [sid for sid in sessions if sid not in generations]
            if missing:
                raise StorageError(f"postgres: session {missing[0]!r} has no row")
            pairs = [(generations[sid], eid) for sid in sessions for eid in sorted(ids[sid])]
            if pairs:
                by_generation = {g: sid for sid, g in generations.items()}
                found = conn.execute(
                    _KNOWN_IDS_OF, ([g for g, _ in pairs], [eid for _, eid in pairs])
                ).fetchall()
                for g, eid, seq in found:
                    known[by_generation[str(g)]][str(eid)] = int(seq)
        # The new events of each session (ids seen once), in the order their seqs are handed out.
        new: dict[str, list[tuple[str | None, bytes]]] = {sid: [] for sid in sessions}
        stored_ids = {sid: set(known[sid]) for sid in sessions}
        for sid, decoded in work:
            stored = stored_ids[sid]
            for request in decoded:
                for eid, line in request:
                    if eid is None or eid not in stored:
                        new[sid].append((eid, line))
                        if eid is not None:
                            stored.add(eid)
        next_seq: dict[str, int] = {}
        for params in _inserts(new, with_ids):
            for sid, base in conn.execute(_INSERT, params).fetchall():
                next_seq.setdefault(str(sid), int(base))  # a later statement's seqs follow the first's
        growing = [sid for sid in sessions if new[sid]]
        if len(next_seq) != len(growing):
            lost = next(sid for sid in growing if sid not in next_seq)
            raise StorageError(f"postgres: session {lost!r} has no row")
    out: list[list[list[int]]] = []
    for sid, decoded in work:
        seen = known[sid]
        entry: list[list[int]] = []
        for request in decoded:
            seqs: list[int] = []
            for eid, _ in request:
                got = seen.get(eid) if eid is not None else None
                if got is not None:
                    seqs.append(-got)  # a dedupe hit: the caller reads the stored event back
                    continue
                next_seq[sid] += 1
                seqs.append(next_seq[sid])
                if eid is not None:
                    seen[eid] = next_seq[sid]
            entry.append(seqs)
        out.append(entry)
    return out

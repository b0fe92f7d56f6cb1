"""The PostgreSQL schema of the session store, created (and version-checked) on first use, and what its rows hold.

One database holds many sessions. ``aiden_sessions`` is the seq counter row
of each session (appends lock it for the length of their transaction); the
compaction state of each session *generation* (a rotation starts a new one)
lives in ``aiden_compaction``, a separate row, so a chunk commit never waits
for appends nor they for it. Every event of a generation is one row of
``aiden_events``: ``chunk_pos`` is NULL while it is in the hot window and
names the chunk (its commit position) once compacted.

Every statement is a constant: values only ever travel as parameters.

Rows hold the same msgspec encodings the filesystem store writes. An event
row's ``payload`` is the event's JSON line: appended, with its seq first (as
``events.jsonl`` has it, without the CRC); once compacted, exactly the line
:func:`~aiden.events.encode_event` writes, so a chunk's checksum is the sha256
of its events' lines joined, as in a chunk file, and
:func:`~aiden.storage.chunks.encode_chunk` completes entries identically on
every backend. Entries and the index are msgspec JSON. A stored value that
does not decode or verify is a :class:`~aiden.errors.CorruptionError`.
"""

from __future__ import annotations

import hashlib
import select
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

import msgspec
import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from aiden.errors import ConfigError, CorruptionError, LockError, StorageError
from aiden.events import SessionEvent, decode_event
from aiden.policy.scrub import mask
from aiden.storage import chunks as cs

__all__ = [
    "EMPTY_INDEX",
    "MIN_POOL_SIZE",
    "SCHEMA_VERSION",
    "Conn",
    "Pool",
    "decode_entry",
    "decode_index",
    "decode_payload",
    "describe",
    "encode",
    "ensure_component",
    "ensure_schema",
    "lease_pool",
    "open_pool",
    "release_pool",
    "require_pool_size",
    "seal",
    "translated",
]

Conn = psycopg.Connection[TupleRow]
"""A connection as the pool hands it out (autocommit; transactions are explicit blocks)."""
Pool = ConnectionPool[Conn]

SCHEMA_VERSION: Final = 1
"""The session store's layout this code reads and writes; a database marked newer is refused."""

MIN_POOL_SIZE: Final = 3
"""The fewest connections (``max_size``) a memory's pool may have.

While any advisory lock is held (a maintenance pass's compaction lock for the
whole pass, Dream's for a whole run) one connection of the pool holds them
all (:mod:`aiden.storage.postgres.locks`); the statements of appends, reads,
the pass and Dream share the others, so a pass's commit never waits for a
Dream run to end.
"""

# Each component (the session store, the long-term store) records its own version: a
# component is created on its first use, and one newer than this code is refused.
_VERSION_TABLE: Final = """CREATE TABLE IF NOT EXISTS aiden_schema_version (
    component text PRIMARY KEY,
    version integer NOT NULL
)"""

# Every DDL statement is idempotent; they run under a transaction-scoped
# advisory lock so two workers creating the schema at once do not race.
_DDL: Final[tuple[str, ...]] = (
    """CREATE TABLE IF NOT EXISTS aiden_sessions (
        session_id text PRIMARY KEY,
        generation text NOT NULL UNIQUE,
        next_seq bigint NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS aiden_compaction (
        generation text PRIMARY KEY,
        session_id text NOT NULL,
        index_doc bytea NOT NULL,
        summary text NOT NULL DEFAULT '',
        chunk_count integer NOT NULL DEFAULT 0,
        last_seq bigint NOT NULL DEFAULT 0,
        changes bigint NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS aiden_events (
        generation text NOT NULL,
        seq bigint NOT NULL,
        event_id text,
        payload bytea NOT NULL,
        chunk_pos integer,
        PRIMARY KEY (generation, seq)
    )""",
    """CREATE UNIQUE INDEX IF NOT EXISTS aiden_events_event_id
        ON aiden_events (generation, event_id) WHERE event_id IS NOT NULL""",
    """CREATE INDEX IF NOT EXISTS aiden_events_hot
        ON aiden_events (generation, seq) WHERE chunk_pos IS NULL""",
    """CREATE INDEX IF NOT EXISTS aiden_events_chunk
        ON aiden_events (generation, chunk_pos) WHERE chunk_pos IS NOT NULL""",
    """CREATE TABLE IF NOT EXISTS aiden_chunks (
        generation text NOT NULL,
        pos integer NOT NULL,
        chunk_id text NOT NULL,
        entry bytea NOT NULL,
        first_seq bigint NOT NULL,
        last_seq bigint NOT NULL,
        PRIMARY KEY (generation, pos),
        UNIQUE (generation, chunk_id)
    )""",
    """CREATE TABLE IF NOT EXISTS aiden_archives (
        session_id text NOT NULL,
        closed_id text NOT NULL,
        generation text NOT NULL,
        archived_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, closed_id)
    )""",
)

# A constant key for the schema-creation lock ('aiden' in ASCII).
_SCHEMA_LOCK_KEY: Final = 0x616964656E
_COMPONENT: Final = "session_store"


def describe(exc: BaseException) -> str:
    """The error's message without any credential, on one line."""
    # libpq reports host, port and user, never the password; a DSN echoed back
    # in an error (a malformed conninfo) could carry one, so it is masked anyway.
    return mask(" ".join(str(exc).split())) or type(exc).__name__


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Turn psycopg's errors raised inside into :class:`StorageError` (``what`` names the operation).

    A lock that could not be had (lock_timeout, deadlock) becomes
    :class:`LockError`; the original stays the ``__cause__``.
    """
    try:
        yield
    except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected) as exc:
        raise LockError(f"postgres: {what}: {describe(exc)}") from exc
    except psycopg.Error as exc:
        raise StorageError(f"postgres: {what} failed: {type(exc).__name__}: {describe(exc)}") from exc


def _durable(conn: Conn) -> None:
    # An append is acknowledged when its commit returns: that must mean flushed, so a server
    # (or role) configured with synchronous_commit=off is overridden for our sessions. Stronger
    # settings (remote_write, remote_apply: synchronous standbys) are left as they are.
    row = conn.execute("SELECT current_setting('synchronous_commit')").fetchone()
    if row is not None and row[0] == "off":
        conn.execute("SET synchronous_commit = on")


def _check(conn: Conn) -> None:
    # A connection the server closed (restart, failover, a killed backend) has its goodbye or
    # end-of-file to read: only then (or for a notice) the full check, whose round trip would
    # cost a small append as much CPU as its own statement; it raises for a broken connection.
    # poll, not select: a descriptor past FD_SETSIZE is fine.
    waiting = select.poll()
    waiting.register(conn.fileno(), select.POLLIN)
    if waiting.poll(0):
        ConnectionPool.check_connection(conn)


def require_pool_size(max_size: int, what: str = "max_size") -> None:
    """:class:`~aiden.errors.ConfigError` when ``max_size`` is below :data:`MIN_POOL_SIZE`.

    ``what`` names the value in the message (``max_size``, the pool's ``max_size``).
    """
    if max_size < MIN_POOL_SIZE:
        raise ConfigError(
            f"postgres: {what}={max_size} is too small: aiden needs at least {MIN_POOL_SIZE} connections"
            " (one holds the advisory locks for as long as a pass or a Dream run, the others carry"
            " that pass's commit and the appends, reads and Dream statements beside it)"
        )


def open_pool(conninfo: str, *, max_size: int = 4, timeout: float = 30.0, name: str = "aiden") -> Pool:
    """A connection pool as the store wants it; share one between stores with ``pool=``.

    Autocommit connections (transactions are explicit), ``synchronous_commit``
    never ``off``, each connection checked at checkout for transparent
    reconnects: an idle connection a server restart or failover broke (the
    server's goodbye or end-of-file waits on its socket) is replaced before
    any statement is sent. Connecting
    happens in the pool's background threads: this never blocks.
    ``max_size`` below :data:`MIN_POOL_SIZE` is a :class:`~aiden.errors.ConfigError`
    (nothing is opened). A pool shared by several memories needs room for
    each: two connections per memory that may run maintenance or Dream at
    the same time, plus one.
    """
    require_pool_size(max_size)
    with translated("opening the connection pool"):
        return ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True},
            configure=_durable,
            check=_check,
            open=True,
            name=name,
        )


_LEASES: dict[tuple[str, float], tuple[Pool, int]] = {}  # (conninfo, timeout) -> the pool, its users
_LEASES_GUARD = threading.Lock()


def lease_pool(conninfo: str, *, max_size: int = 4, timeout: float = 30.0) -> Pool:
    """The pool this process's stores on ``conninfo`` share, opened by the first (see :func:`release_pool`).

    A thousand memories on one DSN use one pool, so server connections do
    not grow with sessions (#36). A lease asking for more connections than the
    pool has grows it to ``max_size``; ``timeout`` is part of the pool's
    identity (stores wanting different waits get different pools).
    """
    require_pool_size(max_size)
    key = (conninfo, timeout)
    with _LEASES_GUARD:
        pool, users = _LEASES.get(key, (None, 0))
        if pool is None or pool.closed:
            pool, users = open_pool(conninfo, max_size=max_size, timeout=timeout), 0
        elif pool.max_size < max_size:
            pool.resize(pool.min_size, max_size)
        _LEASES[key] = (pool, users + 1)
        return pool


def release_pool(pool: Pool) -> None:
    """Give back a pool of :func:`lease_pool`; the last user closes it."""
    with _LEASES_GUARD:
        key = next((k for k, (leased, _) in _LEASES.items() if leased is pool), None)
        if key is None:
            return
        users = _LEASES[key][1] - 1
        if users > 0:
            _LEASES[key] = (pool, users)
            return
        del _LEASES[key]
    pool.close()


def _stored_version(conn: Conn, component: str) -> object:
    """The recorded version, None when the component was never created."""
    row = conn.execute("SELECT to_regclass('aiden_schema_version') IS NOT NULL").fetchone()
    if row is None or row[0] is not True:
        return None
    found = conn.execute(
        "SELECT version FROM aiden_schema_version WHERE component = %s", (component,)
    ).fetchone()
    return None if found is None else found[0]


def ensure_component(conn: Conn, component: str, version: int, ddl: Sequence[str]) -> None:
    """Create ``component``'s tables (``ddl``, idempotent) when missing and record ``version``.

    A component already recorded is only read: its DDL (whose ``CREATE INDEX
    IF NOT EXISTS`` would lock tables against writers) runs only when
    something is missing. A recorded version other than ``version`` is a
    :class:`StorageError` (a newer one: upgrade aiden).
    """
    with translated("checking the schema"):
        found = _stored_version(conn, component)
    if found is None:
        with translated("creating the schema"), conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
            conn.execute(_VERSION_TABLE)
            for statement in ddl:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO aiden_schema_version (component, version) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (component, version),
            )
            found = _stored_version(conn, component)
    if found != version:
        raise StorageError(
            f"postgres: the database holds aiden {component} schema version {found!r}; this aiden reads"
            f" version {version}" + (" (upgrade aiden)" if isinstance(found, int) and found > version else "")
        )


def ensure_schema(conn: Conn) -> None:
    """The session store's tables (see :func:`ensure_component`)."""
    ensure_component(conn, _COMPONENT, SCHEMA_VERSION, _DDL)


# --- rows to values and back ---------------------------------------------------------

encode = msgspec.json.Encoder().encode
"""A chunk entry (``aiden_chunks.entry``) or the live index (``aiden_compaction.index_doc``) as stored."""

_entry_dec = msgspec.json.Decoder(cs.ChunkEntry)
_index_dec = msgspec.json.Decoder(cs.ChunkIndex)

EMPTY_INDEX: bytes = encode(cs.ChunkIndex())
"""The ``index_doc`` of a generation without chunks."""


def decode_entry(raw: bytes) -> cs.ChunkEntry:
    """An ``aiden_chunks.entry`` value back (CorruptionError when it does not decode)."""
    try:
        return _entry_dec.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"postgres: chunk entry does not decode: {exc}") from exc


def decode_index(raw: bytes) -> cs.ChunkIndex:
    """An ``index_doc`` back (CorruptionError when it does not decode)."""
    try:
        return _index_dec.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"postgres: chunk index does not decode: {exc}") from exc


def decode_payload(raw: bytes, seq: int) -> SessionEvent:
    """The event of an ``aiden_events`` row (CorruptionError when it does not decode or names another seq)."""
    try:
        event = decode_event(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"postgres: event seq {seq} does not decode: {exc}") from exc
    if event.seq != seq:
        raise CorruptionError(f"postgres: the row of seq {seq} holds seq {event.seq}")
    return event


def seal(index: cs.ChunkIndex, keep_live: int) -> cs.ChunkIndex:
    """Move the oldest live entries into segment references, as :func:`~aiden.storage.chunks.seal_segments` does.

    No segment files here: every entry stays a row of ``aiden_chunks``; the
    references (with the checksum the file would have) keep the index small
    and identical to the filesystem store's.
    """
    chunks: Sequence[cs.ChunkEntry] = list(index.chunks)
    segments = list(index.segments)
    while len(chunks) > keep_live + cs.SEGMENT_SIZE:
        sealed, chunks = chunks[: cs.SEGMENT_SIZE], chunks[cs.SEGMENT_SIZE :]
        body = b"".join(encode(e) + b"\n" for e in sealed)
        segments.append(
            cs.SegmentRef(
                file=cs.segment_name(sealed[0].first_seq, sealed[-1].last_seq),
                chunks=len(sealed),
                first_seq=sealed[0].first_seq,
                last_seq=sealed[-1].last_seq,
                sha256=hashlib.sha256(body).hexdigest(),
            )
        )
    return msgspec.structs.replace(index, chunks=list(chunks), segments=segments)

"""The PostgreSQL schema of the session store, created (and version-checked) on first use, and what its rows hold.

``aiden_sessions`` is each session's seq counter row (appends lock it); the
compaction state of each *generation* (a rotation starts a new one) is a
separate ``aiden_compaction`` row, so chunk commits and appends never wait for
each other. Each event is an ``aiden_events`` row whose ``chunk_pos`` is NULL
while hot. Every statement is a constant: values only travel as parameters.

An event's ``payload`` is its JSON line: seq first when appended (as in
``events.jsonl``, without the CRC), exactly :func:`~aiden.events.encode_event`'s
once compacted, so a chunk's sha256 is computed as for a chunk file. Entries
and the index are msgspec JSON. A stored value that does not decode or verify
is a :class:`~aiden.errors.CorruptionError`.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Final, TypeVar

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
    "leased",
    "open_pool",
    "release_pool",
    "require_pool_size",
    "text_value",
    "translated",
]

Conn = psycopg.Connection[TupleRow]
"""A connection as the pool hands it out (autocommit; transactions are explicit blocks)."""
Pool = ConnectionPool[Conn]

SCHEMA_VERSION: Final = 1
"""The session store's layout this code reads and writes; a database marked newer is refused."""

MIN_POOL_SIZE: Final = 3
"""The fewest connections (``max_size``) a memory's pool may have.

One connection holds every advisory lock (:mod:`aiden.storage.postgres.locks`)
for a whole pass or Dream run; the others carry every statement, so a pass's
commit never waits for a Dream run to end.
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
    # A DSN echoed back in an error (a malformed conninfo) could carry a password.
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
    # An acknowledged commit must be flushed: synchronous_commit=off is overridden for our sessions
    # (stronger settings, for synchronous standbys, are left as they are).
    row = conn.execute("SELECT current_setting('synchronous_commit')").fetchone()
    if row is not None and row[0] == "off":
        conn.execute("SET synchronous_commit = on")


def _check(conn: Conn) -> None:
    # A connection the server closed has its goodbye or end-of-file to read: only then the full
    # check (a round trip, which raises for a broken connection). poll, not select: fds past FD_SETSIZE.
    waiting = select.poll()
    waiting.register(conn.fileno(), select.POLLIN)
    if waiting.poll(0):
        ConnectionPool.check_connection(conn)


def require_pool_size(max_size: int, what: str = "max_size") -> None:
    """:class:`~aiden.errors.ConfigError` when ``max_size`` (named ``what`` in the message) is below :data:`MIN_POOL_SIZE`."""
    if max_size < MIN_POOL_SIZE:
        raise ConfigError(
            f"postgres: {what}={max_size} is too small: aiden needs at least {MIN_POOL_SIZE} connections"
            " (one holds the advisory locks for as long as a pass or a Dream run, the others carry"
            " that pass's commit and the appends, reads and Dream statements beside it)"
        )


def open_pool(conninfo: str, *, max_size: int = 4, timeout: float = 30.0, name: str = "aiden") -> Pool:
    """A connection pool as the store wants it; share one between stores with ``pool=``.

    Autocommit connections, ``synchronous_commit`` never ``off``, and each
    connection checked at checkout, so one a server restart or failover broke
    is replaced before any statement is sent; a failed reconnect is given up
    after half of ``timeout`` and tried again at the next checkout. Never blocks
    (connecting happens in the pool's threads). ``max_size`` below :data:`MIN_POOL_SIZE` is a
    :class:`~aiden.errors.ConfigError`. A pool shared by several memories needs
    two connections per memory that may run maintenance or Dream at once, plus one.
    """
    require_pool_size(max_size)
    with translated("opening the connection pool"):
        return ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            # psycopg_pool retries a failed connect after 1, 2, 4 ... 128 s until reconnect_timeout
            # (300 s by default), and a checkout waits for the next retry, not for the server: calls
            # kept failing for many seconds after an outage had ended. Given up after half the
            # checkout's wait, the next checkout starts a fresh attempt at once (the pool grows
            # back on demand).
            reconnect_timeout=timeout / 2,
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

    Server connections so do not grow with sessions. A lease asking for more
    connections grows the pool to ``max_size``; stores wanting a different
    ``timeout`` get a different pool.
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


def leased(conninfo: str, timeout: float) -> bool:
    """Whether :func:`lease_pool` would hand out a pool already open (one that has reached the server)."""
    with _LEASES_GUARD:
        pool = _LEASES.get((conninfo, timeout), (None, 0))[0]
        return pool is not None and not pool.closed


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

    The DDL runs only when the component is not recorded (``CREATE INDEX IF NOT
    EXISTS`` would lock tables against writers). A recorded version other than
    ``version`` is a :class:`StorageError`.
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


def text_value(derived: str) -> str:
    """Derived text (summaries, history records) as a ``text`` column takes it: NUL becomes U+FFFD.

    Events are JSON in ``bytea`` and may hold NUL; PostgreSQL refuses it in ``text``
    (DataError), which would fail every compaction of a session that quoted one.
    """
    return derived.replace("\x00", "\ufffd")


encode = msgspec.json.Encoder().encode
"""A chunk entry (``aiden_chunks.entry``) or the live index (``aiden_compaction.index_doc``) as stored."""

_entry_dec = msgspec.json.Decoder(cs.ChunkEntry)
_index_dec = msgspec.json.Decoder(cs.ChunkIndex)
_T = TypeVar("_T")

EMPTY_INDEX: bytes = encode(cs.ChunkIndex())
"""The ``index_doc`` of a generation without chunks."""


def _decoded(decode: Callable[[bytes], _T], raw: bytes, what: str) -> _T:
    try:
        return decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"postgres: {what} does not decode: {exc}") from exc


def decode_entry(raw: bytes) -> cs.ChunkEntry:
    """An ``aiden_chunks.entry`` value back (CorruptionError when it does not decode)."""
    return _decoded(_entry_dec.decode, raw, "chunk entry")


def decode_index(raw: bytes) -> cs.ChunkIndex:
    """An ``index_doc`` back (CorruptionError when it does not decode)."""
    return _decoded(_index_dec.decode, raw, "chunk index")


def decode_payload(raw: bytes, seq: int) -> SessionEvent:
    """The event of an ``aiden_events`` row (CorruptionError when it does not decode or names another seq)."""
    event = _decoded(decode_event, raw, f"event seq {seq}")
    if event.seq != seq:
        raise CorruptionError(f"postgres: the row of seq {seq} holds seq {event.seq}")
    return event

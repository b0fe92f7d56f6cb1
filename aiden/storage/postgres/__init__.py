"""The PostgreSQL session store (``pip install aiden-memory[postgres]``): many workers, one shared database.

:func:`aiden.open_memory` selects it by its DSN (``store="postgresql://..."``;
:func:`store_from_dsn` connects once first, to say what is wrong before any
actor starts); :func:`postgres_store_factory` makes the equivalent
``store_factory``. Passwords are masked in every message. The recall index
stays under ``root``: a per-worker cache following the store's change feed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from aiden.config import Config
from aiden.errors import ConfigError, StorageError
from aiden.events import validate_id
from aiden.policy.scrub import mask
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres.schema import (
    MIN_POOL_SIZE,
    SCHEMA_VERSION,
    Pool,
    describe,
    leased,
    open_pool,
    require_pool_size,
)
from aiden.storage.postgres.store import DSN_ENV, PostgresSessionStore

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DSN_ENV",
    "MIN_POOL_SIZE",
    "SCHEMA_VERSION",
    "PostgresSessionStore",
    "open_pool",
    "postgres_store_factory",
    "store_from_dsn",
]


def postgres_store_factory(
    dsn: str | None = None,
    session_id: str = "default",
    *,
    pool: Pool | None = None,
    max_size: int = 4,
    timeout: float = 30.0,
    long_term_namespace: str | None = None,
) -> Callable[[Layout, Storage, Config], PostgresSessionStore]:
    """A ``store_factory`` for :func:`aiden.open_memory` building a :class:`PostgresSessionStore`.

    The ids (:class:`~aiden.errors.InvalidIdError`) and the pool's size
    (:class:`~aiden.errors.ConfigError` below :data:`MIN_POOL_SIZE`) are checked
    here, before any memory is opened. The layout and storage passed in are unused.
    """
    validate_id(session_id, what="session id")
    if long_term_namespace is not None:
        validate_id(long_term_namespace, what="long-term namespace")
    if pool is not None:
        require_pool_size(pool.max_size, "the pool's max_size")
    else:
        require_pool_size(max_size)

    def make(layout: Layout, storage: Storage, config: Config) -> PostgresSessionStore:
        return PostgresSessionStore(
            dsn,
            session_id,
            config=config,
            pool=pool,
            max_size=max_size,
            timeout=timeout,
            long_term_namespace=long_term_namespace,
        )

    return make


CONNECT_TIMEOUT_S: Final = 10
"""The first connection's timeout (seconds) when the DSN sets no ``connect_timeout`` of its own."""


def store_from_dsn(
    dsn: str, session_id: str, config: Config, *, max_size: int = 4, timeout: float = 30.0
) -> PostgresSessionStore:
    """A checked :class:`PostgresSessionStore` of ``session_id`` on ``dsn``; blocks (call it from a thread).

    :class:`~aiden.errors.InvalidIdError` for a bad session id;
    :class:`~aiden.errors.ConfigError` when the DSN does not parse or ``max_size`` is below
    :data:`~aiden.storage.postgres.schema.MIN_POOL_SIZE`;
    :class:`~aiden.errors.StorageError` when the server cannot be reached or
    refuses the login (one connection, waiting up to the DSN's
    ``connect_timeout`` or :data:`CONNECT_TIMEOUT_S` seconds; none when this
    process already leases a pool for the DSN).
    """
    validate_id(session_id, what="session id")
    require_pool_size(max_size)
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise ConfigError(f"store={mask(dsn)!r} is not a valid PostgreSQL DSN: {describe(exc)}") from exc
    # One plain connection first: the pool would only retry in its background threads and time
    # out 30 s later without saying why (wrong host, refused, bad password). Not beside a pool
    # already leased for the DSN: it took a server connection more per open, past the server's limit.
    if not leased(dsn, timeout):
        first = dsn if "connect_timeout" in params else make_conninfo(dsn, connect_timeout=CONNECT_TIMEOUT_S)
        try:
            psycopg.connect(first, autocommit=True).close()
        except psycopg.Error as exc:
            raise StorageError(f"postgres: cannot connect with {mask(dsn)!r}: {describe(exc)}") from exc
    return PostgresSessionStore(dsn, session_id, config=config, max_size=max_size, timeout=timeout)

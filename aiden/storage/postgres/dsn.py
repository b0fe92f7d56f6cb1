"""Opening the PostgreSQL store from a DSN, as ``open_memory(root, store="postgresql://...")`` does.

:func:`store_from_dsn` parses the DSN, connects once to say clearly what is
wrong before any actor starts, and builds the
:class:`~aiden.storage.postgres.PostgresSessionStore` of one session id.
Every message shows the DSN with its password masked.
"""

from __future__ import annotations

from typing import Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from aiden.config import Config
from aiden.errors import ConfigError, StorageError
from aiden.events import validate_id
from aiden.storage.credentials import mask
from aiden.storage.postgres.schema import describe, require_pool_size
from aiden.storage.postgres.store import PostgresSessionStore

__all__ = ["CONNECT_TIMEOUT_S", "store_from_dsn"]

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
    ``connect_timeout`` or :data:`CONNECT_TIMEOUT_S` seconds).
    """
    validate_id(session_id, what="session id")
    require_pool_size(max_size)
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise ConfigError(f"store={mask(dsn)!r} is not a valid PostgreSQL DSN: {describe(exc)}") from exc
    first = dsn if "connect_timeout" in params else make_conninfo(dsn, connect_timeout=CONNECT_TIMEOUT_S)
    try:
        # One plain connection first: the pool would only retry in its background threads
        # and time out 30 s later without saying why (wrong host, refused, bad password).
        psycopg.connect(first, autocommit=True).close()
    except psycopg.Error as exc:
        raise StorageError(f"postgres: cannot connect with {mask(dsn)!r}: {describe(exc)}") from exc
    return PostgresSessionStore(dsn, session_id, config=config, max_size=max_size, timeout=timeout)

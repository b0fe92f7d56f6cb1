"""The PostgreSQL session store (``pip install aiden-memory[postgres]``): many workers, one shared database.

:class:`PostgresSessionStore` keeps one session id's events, chunks and
summaries in PostgreSQL behind the same
:class:`~aiden.storage.protocol.SessionStore` contract as the filesystem
store (the conformance suite runs against both). :func:`aiden.open_memory`
selects it by its DSN (:mod:`aiden.storage.postgres.dsn` checks it and
connects once first); :func:`postgres_store_factory` makes the equivalent
``store_factory``::

    async with open_memory(root, store="postgresql://...", session_id="agent-7") as memory:
        ...

Long-term memory (saved memories, history, session summaries, Dream's
versions) lives in the same database
(:class:`~aiden.longterm.postgres.backend.PostgresLongTermBackend`), shared by
every memory of the store's ``long_term_namespace`` (default: the session
id). The recall index stays under ``root``: a per-worker cache that follows
the store's change feed.
"""

from __future__ import annotations

from collections.abc import Callable

from aiden.config import Config
from aiden.events import validate_id
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres.schema import MIN_POOL_SIZE, SCHEMA_VERSION, Pool, open_pool, require_pool_size
from aiden.storage.postgres.store import DSN_ENV, PostgresSessionStore

__all__ = [
    "DSN_ENV",
    "MIN_POOL_SIZE",
    "SCHEMA_VERSION",
    "PostgresSessionStore",
    "open_pool",
    "postgres_store_factory",
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

    The session id (and ``long_term_namespace``: whose long-term memory the
    memory shares, default the session id) is checked here, before any memory
    is opened (:class:`~aiden.errors.InvalidIdError`), and so is the pool's
    size (:class:`~aiden.errors.ConfigError` below
    :data:`~aiden.storage.postgres.schema.MIN_POOL_SIZE`; the store checks it
    again at open, as a pool can be resized). The layout and storage
    the runtime passes are not used: nothing of the session lives in files.
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

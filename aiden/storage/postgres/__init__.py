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

The recall index and long-term memory stay under ``root``: recall is a
per-worker cache that follows the store's change feed.
"""

from __future__ import annotations

from collections.abc import Callable

from aiden.config import Config
from aiden.events import validate_id
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres.schema import SCHEMA_VERSION, Pool, open_pool
from aiden.storage.postgres.store import DSN_ENV, PostgresSessionStore

__all__ = ["DSN_ENV", "SCHEMA_VERSION", "PostgresSessionStore", "open_pool", "postgres_store_factory"]


def postgres_store_factory(
    dsn: str | None = None,
    session_id: str = "default",
    *,
    pool: Pool | None = None,
    max_size: int = 4,
    timeout: float = 30.0,
) -> Callable[[Layout, Storage, Config], PostgresSessionStore]:
    """A ``store_factory`` for :func:`aiden.open_memory` building a :class:`PostgresSessionStore`.

    The session id is checked here, before any memory is opened
    (:class:`~aiden.errors.InvalidIdError`). The layout and storage the
    runtime passes are not used: nothing of the session lives in files.
    """
    validate_id(session_id, what="session id")

    def make(layout: Layout, storage: Storage, config: Config) -> PostgresSessionStore:
        return PostgresSessionStore(
            dsn, session_id, config=config, pool=pool, max_size=max_size, timeout=timeout
        )

    return make

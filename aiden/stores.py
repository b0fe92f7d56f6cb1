"""Which stores a memory runs on: the session store :func:`aiden.open_memory`'s ``store=`` (a DSN, a
store, a factory) or ``store_factory`` names, and the long-term and experience backends that follow it.

- ``store=None`` (the default): ``store_factory(layout, storage, config)``,
  the filesystem store unless a test swaps the seam;
- ``store="postgresql://..."`` (or ``postgres://``, or libpq's
  ``"host=... dbname=..."``): the PostgreSQL store of ``session_id``
  (default ``"default"``) in that database, checked by one connection first;
- ``store=<a SessionStore>``: that store (the memory closes it on exit);
- ``store=<a callable>``: called as a ``store_factory``.

Mistakes are :class:`~aiden.errors.ConfigError` (passwords masked). Long-term and
experience memory pick their own backends beside the session store
(:func:`aiden.longterm.service.select_long_term`,
:func:`aiden.experience.service.select_experience`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeAlias, cast

from aiden.config import Config
from aiden.errors import ConfigError
from aiden.events import validate_id
from aiden.policy.scrub import mask
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore
from aiden.storage.session import FileSessionStore

__all__ = [
    "DEFAULT_SESSION_ID",
    "STORES_GROUP",
    "StoreFactory",
    "StoreSpec",
    "looks_like_dsn",
    "select_store",
]

StoreFactory: TypeAlias = Callable[[Layout, Storage, Config], SessionStore]
"""What ``open_memory(store_factory=...)`` takes: the layout, storage and config in, a store out."""
StoreSpec: TypeAlias = str | SessionStore | StoreFactory
"""What ``open_memory(store=...)`` takes: a PostgreSQL DSN, a store object or a store factory."""

STORES_GROUP = "aiden.stores"
"""The entry point group of store extensions: ``postgresql`` names the PostgreSQL store's opener."""

DEFAULT_SESSION_ID = "default"
"""The session id of a DSN store when ``session_id`` is not given."""

_URI = re.compile(r"^postgres(ql)?://", re.IGNORECASE)
# libpq's keyword form starts with a keyword and "=" ("host=db dbname=aiden").
_KEYWORDS = re.compile(r"^\s*[A-Za-z_]+\s*=")


def looks_like_dsn(text: str) -> bool:
    """True for a ``postgresql://`` or ``postgres://`` URI or a libpq ``key=value`` string."""
    return bool(_URI.match(text) or _KEYWORDS.match(text))


def select_store(
    store: StoreSpec | None,
    session_id: str | None,
    store_factory: StoreFactory,
    layout: Layout,
    storage: Storage,
    config: Config,
) -> SessionStore:
    """The session store ``open_memory`` runs on (see the module doc); blocks for a DSN's first connection."""
    if store is not None and store_factory is not FileSessionStore:
        raise ConfigError("open_memory: give store= or store_factory=, not both")
    if session_id is not None and not isinstance(store, str):
        # A store object or factory already names its session: a second id would be ignored.
        raise ConfigError("open_memory: session_id= applies only to store='postgresql://...'")
    if store is None:
        return store_factory(layout, storage, config)
    if isinstance(store, str):
        return _from_dsn(store, session_id if session_id is not None else DEFAULT_SESSION_ID, config)
    # SessionStore is a static protocol: tell an instance from a factory (a class is one too) by shape.
    if not isinstance(store, type) and hasattr(store, "append") and hasattr(store, "recover"):
        return cast(SessionStore, store)
    if callable(store):
        return cast(StoreFactory, store)(layout, storage, config)
    raise ConfigError(
        f"open_memory: store= takes a DSN, a SessionStore or a factory, not {type(store).__name__}"
    )


def _from_dsn(dsn: str, session_id: str, config: Config) -> SessionStore:
    validate_id(session_id, what="session id")
    if not looks_like_dsn(dsn):
        raise ConfigError(
            f"open_memory: store={mask(dsn)!r} is not a PostgreSQL DSN (postgresql://user@host/db or"
            " 'host=... dbname=...'); the filesystem store needs no store= (its files live under root)"
        )
    return _store_opener("postgresql", dsn)(dsn, session_id, config)


def _store_opener(kind: str, dsn: str) -> Callable[[str, str, Config], SessionStore]:
    """The installed store extension ``kind`` (entry point group ``aiden.stores``): a DSN, a session id
    and the config in, a checked store out. The core names no backend module."""
    from importlib.metadata import entry_points  # loads zipfile, email...: only for a DSN

    found = entry_points(group=STORES_GROUP, name=kind)
    if not found:
        raise ConfigError(
            f"open_memory: store={mask(dsn)!r} needs the {kind} store, which is not installed"
            " (pip install 'aiden-memory[postgres]')"
        )
    try:
        opener = next(iter(found)).load()
    except ImportError as exc:
        raise ConfigError(
            f"open_memory: store={mask(dsn)!r} needs psycopg 3: pip install 'aiden-memory[postgres]' ({exc})"
        ) from exc
    return cast(Callable[[str, str, Config], SessionStore], opener)

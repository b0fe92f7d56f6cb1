"""The extension seam: how long-term memory, experience memory (and any later part) join an open memory.

An installed extension names its factory in the ``aiden.extensions`` entry point group; for each
open memory the runtime builds one :class:`Extension` from its :class:`MemoryParts`, runs its
actors and hooks with the core's, and gives :class:`~aiden.memory.Memory` its ports. The core
never imports an extension. Store extensions name their opener in ``aiden.stores``
(:func:`select_store`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

import anyio
from anyio.abc import TaskGroup, TaskStatus

from aiden.actors.mailbox import BACKGROUND, Doorbell, Link
from aiden.config import Config
from aiden.errors import ConfigError
from aiden.events import SessionEvent, validate_id
from aiden.policy.scrub import mask
from aiden.storage.chunks import ChunkEntry
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore
from aiden.storage.session import FileSessionStore
from aiden.summarizers.protocol import Summarizer

if TYPE_CHECKING:
    from aiden.memory_core import CoreMemory
    from aiden.recall.embedding import Embedder

__all__ = [
    "DEFAULT_SESSION_ID",
    "EXTENSIONS_GROUP",
    "STORES_GROUP",
    "Extension",
    "MemoryParts",
    "StoreFactory",
    "StoreSpec",
    "in_background",
    "installed",
    "looks_like_dsn",
    "select_store",
]

EXTENSIONS_GROUP = "aiden.extensions"
"""The entry point group of extensions: each names a factory ``(MemoryParts) -> Extension``."""


@dataclass(frozen=True)
class MemoryParts:
    """The parts of one open memory an extension is built from."""

    config: Config
    layout: Layout
    storage: Storage
    session_store: SessionStore
    summarizer: Summarizer
    """The memory's summarizer (an LLM summarizer's model may also word what an extension writes)."""
    summarize: Summarizer
    """The same, through the memory's summarizer actor (its deadline, its one call at a time)."""
    embedder: Embedder | None
    doorbell: Doorbell
    """For the extension's links: a request to its parked actors rings it."""
    queue_size: int
    """The inbox size of a control actor's link."""


class Extension(Protocol):
    """One extension of one open memory: its actors' links, its ports and its hooks.

    An extension subclasses this protocol to inherit its hooks' default: nothing to do.
    """

    @property
    def links(self) -> Sequence[Link[Any, Any, Any]]:
        """Its actors' links: parked, closed and bound again with the core's."""
        ...

    @property
    def ports(self) -> Mapping[str, Any]:
        """Keyword arguments of :class:`~aiden.memory.Memory` (its ports to the extension's actors)."""
        ...

    @property
    def idle(self) -> bool:
        """Nothing of its own in progress (the memory may park)."""
        ...

    async def start(self, tg: TaskGroup, memory: CoreMemory) -> None:
        """Start one run of its actors in ``tg`` (a run of the memory's actors)."""
        ...

    def stopped(self) -> None:
        """The run ended: close what its actors opened."""
        ...

    async def before_compaction(self, events: Sequence[SessionEvent]) -> None:
        """The events a pass is about to compact (before its summary)."""

    async def after_compaction(self, entry: ChunkEntry) -> None:
        """A pass committed ``entry``."""

    async def session_ended(self, events: Sequence[SessionEvent], reason: str, timeout_s: float | None) -> None:
        """The session ends (``rotation`` or ``completion``) with ``events`` in its hot window."""

    async def after_rotation(self) -> None:
        """A new session started."""

    async def closing(self, memory: CoreMemory) -> None:
        """The memory closes (its actors still run)."""


@functools.cache
def installed() -> tuple[Callable[[MemoryParts], Extension], ...]:
    """The installed extensions' factories, by name (their order: start, hooks, close)."""
    from importlib.metadata import entry_points  # loads zipfile, email...: at the first open only

    return tuple(ep.load() for ep in sorted(entry_points(group=EXTENSIONS_GROUP), key=lambda ep: ep.name))


def in_background(
    task: Callable[..., Coroutine[Any, Any, None]],
) -> Callable[..., Coroutine[Any, Any, None]]:
    """``task`` with its requests marked as aiden's own timed work (they keep no idle memory running)."""

    async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        BACKGROUND.set(True)
        await task(task_status=task_status)

    return run


# --- the session store a memory runs on -----------------------------------------------------------

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
    """The session store ``open_memory`` runs on; blocks for a DSN's first connection.

    ``store=None``: ``store_factory(layout, storage, config)``; a DSN (``postgresql://``,
    ``postgres://`` or libpq's ``"host=... dbname=..."``): the PostgreSQL store of ``session_id``
    (default ``"default"``), checked by one connection first; a :class:`SessionStore`: that store
    (closed on exit); a callable: called as a ``store_factory``. Mistakes are
    :class:`~aiden.errors.ConfigError` (passwords masked).
    """
    if store is not None and store_factory is not FileSessionStore:
        raise ConfigError("open_memory: give store= or store_factory=, not both")
    if session_id is not None and not isinstance(store, str):
        # A store object or factory already names its session: a second id would be ignored.
        raise ConfigError("open_memory: session_id= applies only to store='postgresql://...'")
    if store is None:
        if not callable(store_factory):
            raise ConfigError(f"open_memory: store_factory= takes a factory, not {type(store_factory).__name__}")
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
    """The store of ``dsn`` from the installed ``postgresql`` store extension (the core names no backend)."""
    validate_id(session_id, what="session id")
    try:
        dsn.encode("utf-8")  # psycopg would raise a UnicodeEncodeError parsing it
    except UnicodeEncodeError as exc:
        raise ConfigError(f"open_memory: store={mask(dsn)!r} is not valid Unicode: {exc.reason}") from None
    if not looks_like_dsn(dsn):
        raise ConfigError(
            f"open_memory: store={mask(dsn)!r} is not a PostgreSQL DSN (postgresql://user@host/db or"
            " 'host=... dbname=...'); the filesystem store needs no store= (its files live under root)"
        )
    from importlib.metadata import entry_points  # loads zipfile, email...: only for a DSN

    found = entry_points(group=STORES_GROUP, name="postgresql")
    if not found:
        raise ConfigError(
            f"open_memory: store={mask(dsn)!r} needs the postgresql store, which is not installed"
            " (pip install 'aiden-memory[postgres]')"
        )
    try:
        opener = next(iter(found)).load()
    except ImportError as exc:
        raise ConfigError(
            f"open_memory: store={mask(dsn)!r} needs psycopg 3: pip install 'aiden-memory[postgres]' ({exc})"
        ) from exc
    return cast(SessionStore, opener(dsn, session_id, config))

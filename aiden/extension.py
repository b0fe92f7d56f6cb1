"""The extension seam: how long-term memory, experience memory (and any later part) join an open memory.

An installed extension names its factory in the ``aiden.extensions`` entry point group. For each
open memory the runtime builds one :class:`Extension` per factory from the memory's
:class:`MemoryParts`, starts its actors with the core's, calls its hooks around compaction,
rotation and close, and gives :class:`~aiden.memory.Memory` its ports. The core never imports an
extension: it knows only this protocol.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus

from aiden.actors.mailbox import BACKGROUND, Doorbell, Link
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.storage.chunks import ChunkEntry
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore
from aiden.summarizers.protocol import Summarizer

if TYPE_CHECKING:
    from aiden.memory_core import CoreMemory
    from aiden.recall.embedding import Embedder

__all__ = ["EXTENSIONS_GROUP", "Extension", "MemoryParts", "in_background", "installed"]

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

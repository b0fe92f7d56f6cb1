"""Long-term memory as an extension of an open memory (entry point ``aiden.extensions: long_term``).

Its actor serves the project memory, the running summary, the session summaries and Dream; the
maintenance scheduler's hooks feed it (the running summary before a compaction, history after
it, a session summary when a session ends) and ``Memory`` reaches it through :class:`LongTermPort`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from anyio.abc import TaskGroup

from aiden.actors.longterm import LongTermActor
from aiden.actors.mailbox import Latest, Link, by_request_id
from aiden.events import SessionEvent
from aiden.extension import Extension, MemoryParts, in_background
from aiden.longterm.messages import LongTermInbox, LongTermLayer, LongTermOutbox, LongTermPort
from aiden.longterm.service import LongTermServices, select_long_term
from aiden.memory_core import CoreMemory
from aiden.storage.chunks import ChunkEntry

__all__ = ["LongTermExtension"]

# Workers: a long Dream run never holds up the running-summary merge a compaction waits for.
_WORKERS = 3


class LongTermExtension(Extension):
    """Long-term memory of one open memory (an :class:`~aiden.extension.Extension`)."""

    def __init__(self, parts: MemoryParts) -> None:
        self._parts = parts
        self._link: Link[LongTermInbox, LongTermOutbox, LongTermOutbox] = Link(
            "long-term memory", LongTermInbox, LongTermOutbox, parts.queue_size, doorbell=parts.doorbell
        )
        self._layer: Latest[LongTermLayer] = Latest(LongTermLayer())
        self._port = LongTermPort(self._link.client, self._layer)
        # Beside the session store: in its database for PostgreSQL, else under the root.
        self._backend = select_long_term(parts.session_store, parts.config, parts.summarize)
        self._actor: LongTermActor | None = None

    @property
    def links(self) -> Sequence[Link[Any, Any, Any]]:
        return (self._link,)

    @property
    def ports(self) -> Mapping[str, Any]:
        return {"long_term": self._port}

    @property
    def idle(self) -> bool:
        return self._actor is None or self._actor.idle

    async def start(self, tg: TaskGroup, memory: CoreMemory) -> None:
        p = self._parts
        self._actor = actor = LongTermActor(
            LongTermServices(p.layout, p.storage, p.config, p.summarize, backend_factory=self._backend),
            self._link.inbox,
            self._link.outbox,
            layer=self._layer,
        )
        await actor.prepare()
        for _ in range(_WORKERS):
            await tg.start(actor.run)
        await tg.start(self._link.route, by_request_id(self._link.client))
        for task in actor.background_tasks(memory):
            await tg.start(in_background(task))

    def stopped(self) -> None:
        # A parked memory keeps no actor (nor the streams and files it holds).
        actor, self._actor = self._actor, None
        if actor is not None:
            actor.close_streams()

    async def before_compaction(self, events: Sequence[SessionEvent]) -> None:
        await self._port.merge_running(events)

    async def after_compaction(self, entry: ChunkEntry) -> None:
        await self._port.record_chunk(entry, str(self._parts.layout.root))

    async def session_ended(self, events: Sequence[SessionEvent], reason: str, timeout_s: float | None) -> None:
        await self._port.end_session(events, reason, timeout_s)

    async def after_rotation(self) -> None:
        await self._port.refresh()


"""Long-term memory as an extension of an open memory (entry point ``aiden.extensions: long_term``).

Its actor serves the project memory, the running summary, the session summaries and Dream; the
maintenance scheduler's hooks feed it (the running summary before a compaction, history after
it, a session summary when a session ends) and ``Memory`` reaches it through :class:`LongTermPort`.

Its methods on :class:`~aiden.memory.Memory` are here too: :class:`LongTermMethods`, a base class
of ``Memory`` over :class:`~aiden.memory_core.CoreMemory` (prompt layer, checkpoint, Dream and its
versions), forwarding to the actor's port whichever backend (files under the root, or PostgreSQL)
holds the long-term state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from anyio.abc import TaskGroup

from aiden.actors.longterm import LongTermActor
from aiden.actors.mailbox import Latest, Link, by_request_id
from aiden.errors import ClosedError
from aiden.events import SessionEvent
from aiden.extension import Extension, MemoryParts, in_background
from aiden.longterm.dream_edits import check_target
from aiden.longterm.messages import LongTermInbox, LongTermLayer, LongTermOutbox, LongTermPort
from aiden.longterm.service import LongTermServices, select_long_term
from aiden.longterm.tools import LongTermTools
from aiden.memory_core import CoreMemory
from aiden.storage.chunks import ChunkEntry
from aiden.tools import ToolSet

if TYPE_CHECKING:
    from aiden.longterm.dream import DreamOutcome
    from aiden.longterm.dream_edits import Version

__all__ = ["LongTermExtension", "LongTermMethods"]

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

class LongTermMethods(CoreMemory):
    """Long-term memory operations of an open memory (a base class of :class:`~aiden.memory.Memory`)."""

    def __init__(self, *, long_term: LongTermPort | None = None, **core: Any) -> None:
        super().__init__(**core)
        self._long_term = long_term

    def _lt(self) -> LongTermPort:
        if self._long_term is None:
            raise ClosedError("long-term memory is not available")
        return self._long_term

    def _tool_sets(self) -> list[ToolSet]:
        # ``save_memory`` and ``forget_memory`` (the long-term actor's port is asked for at each call).
        return [*super()._tool_sets(), LongTermTools(self._lt)]

    @property
    def long_term_layer(self) -> str:
        """The PROJECT MEMORY block and profile, as placed in the system prompt."""
        return self._long_term.layer if self._long_term is not None else ""

    async def checkpoint(self) -> str | None:
        """Force a durable session summary now (seed 004's manual checkpoint); its path (None: nothing to write)."""
        self._check_open()
        return await self._lt().checkpoint(await self._reader.hot_window())

    async def dream(self) -> DreamOutcome:
        """Run Dream now: fold new history into SOUL.md / USER.md / MEMORY.md (git-versioned)."""
        self._check_open()
        return await self._lt().dream()

    async def request_dream(self) -> bool:
        """Ask the scheduled Dream task to run soon, without waiting; False if a run is already requested."""
        self._check_open()
        return await self._lt().request_dream()

    async def dream_log(self, limit: int = 20) -> list[Version]:
        """The newest ``limit`` versions of SOUL.md / USER.md / MEMORY.md, newest first."""
        self._check_open()
        return await self._lt().dream_log(limit)

    async def dream_restore(self, version: str | int) -> Version:
        """Bring back a version of SOUL.md / USER.md / MEMORY.md as a new version; returns the new one.

        ``version`` is a commit id or unique prefix (4+ hex digits, as
        :meth:`dream_log` lists them) or steps back from the newest (``1`` = the
        one before), as ``aiden restore`` takes it. Runs under Dream's lock (the
        file root's ``.dream.lock``, PostgreSQL's advisory lock): while another
        process runs Dream it raises :class:`~aiden.errors.DreamError`. An
        unknown version raises :class:`~aiden.errors.VersionNotFoundError`, with
        the same message on every backend. Hand edits of the files are first
        recorded as a version on the file backend, so a restore can be undone.
        """
        self._check_open()
        # A bad target (a float, a bool, not hex) fails here with the backends' message,
        # instead of as a message the actor cannot decode.
        check_target(version)
        return await self._lt().dream_restore(version)

"""Long-term memory as an extension of an open memory (entry point ``aiden.extensions: long_term``).

Its actor serves the project memory, the running summary, the session summaries and Dream; the
maintenance scheduler's hooks feed it (the running summary before a compaction, history after
it, a session summary when a session ends) and ``Memory`` reaches it through :class:`LongTermPort`.

Its methods on :class:`~aiden.memory.Memory` are here too: :class:`LongTermMethods`, a base class
of ``Memory`` over :class:`~aiden.memory_core.CoreMemory` (prompt layer, checkpoint, Dream and its
versions), forwarding to the actor's port whichever backend (files under the root, or PostgreSQL)
holds the long-term state.

The actor, :class:`LongTermActor`, owns :class:`~aiden.longterm.service.LongTermServices`.
Everything outside the long-term room reaches it by messages
(:mod:`aiden.longterm.messages`) through a
:class:`~aiden.longterm.messages.LongTermPort`: ``Memory`` for the tools,
checkpoint and Dream, the maintenance scheduler for the compaction hooks, the
runtime for the session summary at close. Several workers serve one inbox, so
a long Dream run never holds up the running-summary merge a compaction waits
for. The prompt layer is published as a frozen :class:`LongTermLayer`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, assert_never, cast

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Latest, Link, by_request_id, serve
from aiden.errors import ClosedError
from aiden.events import SessionEvent
from aiden.extension import Extension, MemoryParts, in_background
from aiden.longterm.autocompact import IdleTarget
from aiden.longterm.dream_edits import check_target
from aiden.longterm.messages import (
    Checkpoint,
    Checkpointed,
    Dreamed,
    DreamLog,
    DreamRequested,
    DreamRestore,
    EndSession,
    ForgetMemory,
    LongTermDone,
    LongTermInbox,
    LongTermLayer,
    LongTermOutbox,
    LongTermPort,
    MergeRunning,
    RecordChunk,
    Refresh,
    RequestDream,
    Restored,
    RunDream,
    SaveMemory,
    ToolAnswered,
    Versions,
)
from aiden.longterm.service import LongTermServices, select_long_term
from aiden.longterm.tools import LongTermTools, forget_memory, save_memory
from aiden.memory_core import CoreMemory
from aiden.messages import Codec, codec
from aiden.storage.chunks import ChunkEntry
from aiden.tools import ToolSet

if TYPE_CHECKING:
    from aiden.longterm.dream import DreamOutcome
    from aiden.longterm.dream_edits import Version
    from aiden.longterm.store import LongTermMemoryStore

__all__ = [
    "LongTermActor",
    "LongTermExtension",
    "LongTermMethods",
]

class LongTermActor:
    """Serves long-term requests; run :meth:`run` once per worker."""

    def __init__(
        self,
        services: LongTermServices,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
        *,
        layer: Latest[LongTermLayer] | None = None,
    ) -> None:
        self._lt = services
        self._inbox = inbox
        self._outbox = outbox
        self._in: Codec[LongTermInbox] = codec(LongTermInbox)
        self._out: Codec[LongTermOutbox] = codec(LongTermOutbox)
        self.layer: Latest[LongTermLayer] = layer or Latest(LongTermLayer())
        """The prompt layer as last loaded (published after open and every refresh)."""

    async def prepare(self) -> None:
        """Bring the profile up to date and publish the prompt layer (at open, before serving)."""
        await self._lt.prepare()
        self.layer.publish(LongTermLayer(self._lt.project_memory))

    def background_tasks(self, idle_target: IdleTarget) -> list[Callable[..., Coroutine[Any, Any, None]]]:
        """The room's timed tasks (profile debouncer, AutoCompact, Dream schedule) for the runtime to start."""
        return self._lt.background_tasks(idle_target)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until the inbox closes (each worker gets its own clones of both streams)."""
        inbox, outbox = self._inbox.clone(), self._outbox.clone()
        task_status.started()
        await serve("longterm", inbox, outbox, self._in, self._out, self._serve)

    async def _serve(self, msg: LongTermInbox) -> LongTermOutbox:
        lt = self._lt
        # The tools only call the EntryStore protocol's save/forget; their signature still names
        # the file store (aiden/longterm/tools.py), so any backend's store is passed as one.
        store = cast("LongTermMemoryStore", lt.store)
        match msg:
            case SaveMemory(request_id=rid, request=request):
                return ToolAnswered(rid, await save_memory(store, request, now=time.time()))
            case ForgetMemory(request_id=rid, memory_id=memory_id):
                return ToolAnswered(rid, await forget_memory(store, memory_id))
            case MergeRunning(request_id=rid, events=events):
                await lt.before_compaction(events)
                return LongTermDone(rid)
            case RecordChunk(request_id=rid, entry=entry, session_key=key):
                await lt.after_compaction(entry, session_key=key)
                return LongTermDone(rid)
            case EndSession(request_id=rid, events=events, reason=reason, summarizer_timeout_s=timeout):
                await lt.session_ended(events, reason, summarizer_timeout_s=timeout)
                return LongTermDone(rid)
            case Checkpoint(request_id=rid, events=events):
                write = await lt.writer.checkpoint(events, now=time.time())
                await self._refresh()
                return Checkpointed(rid, write.path)
            case RunDream(request_id=rid):
                return Dreamed(rid, await lt.run_dream())
            case RequestDream(request_id=rid):
                return DreamRequested(rid, lt.request_dream())
            case DreamLog(request_id=rid, limit=limit):
                return Versions(rid, await lt.dream.dream_log(limit))
            case DreamRestore(request_id=rid, target=target):
                return Restored(rid, await lt.dream.restore(target, now=time.time()))
            case Refresh(request_id=rid):
                await self._refresh()
                return LongTermDone(rid)
            case _:
                assert_never(msg)

    async def _refresh(self) -> None:
        await self._lt.refresh()
        self.layer.publish(LongTermLayer(self._lt.project_memory))

    @property
    def idle(self) -> bool:
        """No Dream run in progress or requested."""
        return self._lt.idle

    def close_streams(self) -> None:
        """Close the original stream ends (the workers hold clones) and the room's internal streams."""
        self._inbox.close()
        self._outbox.close()
        self._lt.close_streams()


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

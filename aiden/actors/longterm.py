"""The long-term memory actor: owns :class:`~aiden.longterm.service.LongTermServices`.

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
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, assert_never, cast

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Latest, serve
from aiden.longterm.autocompact import IdleTarget
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
from aiden.longterm.service import LongTermServices
from aiden.longterm.tools import forget_memory, save_memory
from aiden.messages import Codec, codec

if TYPE_CHECKING:
    from aiden.longterm.store import LongTermMemoryStore

__all__ = ["LongTermActor"]


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

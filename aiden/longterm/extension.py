"""Long-term memory as an extension of an open memory (entry point ``aiden.extensions: long_term``).

:class:`LongTermActor` owns the backend and the room's timed tasks; everything else reaches it
by messages through a :class:`~aiden.longterm.messages.LongTermPort`. Several workers serve one
inbox, so a long Dream run never holds up the running-summary merge a compaction waits for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, assert_never

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Latest, Link, by_request_id, serve
from aiden.config import Config
from aiden.errors import AidenError, ClosedError, DreamError
from aiden.events import SessionEvent, without_withdrawn
from aiden.extension import Extension, MemoryParts, in_background
from aiden.longterm.autocompact import AutoCompactor, IdleTarget, run_autocompact
from aiden.longterm.backend import BackendFactory, LongTermBackend
from aiden.longterm.dream_edits import check_target
from aiden.longterm.history import chunk_record_id
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
from aiden.longterm.service import FileLongTermBackend, select_long_term
from aiden.longterm.store import run_profile_debouncer
from aiden.longterm.tools import LongTermTools, forget_memory, save_memory
from aiden.memory_core import CoreMemory
from aiden.messages import Codec, codec
from aiden.observe import observed
from aiden.storage.chunks import ChunkEntry
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.summarizers.protocol import Summarizer
from aiden.tools import ToolSet

if TYPE_CHECKING:
    from aiden.longterm.dream import DreamOutcome
    from aiden.longterm.dream_edits import Version

__all__ = [
    "LongTermActor",
    "LongTermExtension",
    "LongTermMethods",
]

log = logging.getLogger("aiden.longterm")

_AUTOCOMPACT_TICK_S = 60.0
_PROFILE_DEBOUNCE_S = 2.0


class LongTermActor:
    """Serves long-term requests and owns the room's state; run :meth:`run` once per worker.

    ``backend_factory`` picks the storage (default: the files under ``layout``).
    """

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        config: Config,
        summarizer: Summarizer,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
        *,
        layer: Latest[LongTermLayer] | None = None,
        backend_factory: BackendFactory | None = None,
    ) -> None:
        self.config = config
        self._dirty_send, self._dirty_recv = anyio.create_memory_object_stream[None](1)
        self._dream_send, self._dream_recv = anyio.create_memory_object_stream[None](1)
        self._dreams_running = 0
        factory = backend_factory or partial(FileLongTermBackend, layout, storage, config, summarizer)
        self.backend: LongTermBackend = factory(self._dirty_send)
        # Chunks whose history record failed, oldest first (retried by the next compaction).
        self._unrecorded: list[tuple[ChunkEntry, str]] = []
        self._inbox = inbox
        self._outbox = outbox
        self._in: Codec[LongTermInbox] = codec(LongTermInbox)
        self._out: Codec[LongTermOutbox] = codec(LongTermOutbox)
        self.layer: Latest[LongTermLayer] = layer or Latest(LongTermLayer())
        """The prompt layer as last loaded (published after open and every refresh)."""

    async def prepare(self) -> None:
        """Bring the profile up to date and publish the prompt layer (at open, before serving)."""
        await self._refresh()

    def background_tasks(self, idle_target: IdleTarget) -> list[Callable[..., Coroutine[Any, Any, None]]]:
        """The room's timed tasks (profile debouncer, AutoCompact, Dream schedule), each for ``tg.start``."""
        tasks: list[Callable[..., Coroutine[Any, Any, None]]] = [
            partial(run_profile_debouncer, self.backend.entries, self._dirty_recv, _PROFILE_DEBOUNCE_S)
        ]
        if self.config.idle_compact_after_minutes > 0:
            compactor = AutoCompactor(idle_target, self.config.idle_compact_after_minutes)
            tasks.append(partial(run_autocompact, compactor.check, _AUTOCOMPACT_TICK_S))
        if self.config.dream_interval_hours > 0:
            from aiden.longterm.dream import run_dream_schedule

            hours = self.config.dream_interval_hours
            tasks.append(partial(run_dream_schedule, self.run_dream, hours * 3600, requests=self._dream_recv))
        return tasks

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until the inbox closes (each worker gets its own clones of both streams)."""
        inbox, outbox = self._inbox.clone(), self._outbox.clone()
        task_status.started()
        await serve("longterm", inbox, outbox, self._in, self._out, self._serve)

    async def _serve(self, msg: LongTermInbox) -> LongTermOutbox:
        backend = self.backend
        match msg:
            case SaveMemory(request_id=rid, request=request):
                return ToolAnswered(rid, await save_memory(backend.entries, request, now=time.time()))
            case ForgetMemory(request_id=rid, memory_id=memory_id):
                return ToolAnswered(rid, await forget_memory(backend.entries, memory_id))
            case MergeRunning(request_id=rid, events=events):
                await backend.summaries.merge_running_summary(events, now=time.time())
                return LongTermDone(rid)
            case RecordChunk(request_id=rid, entry=entry, session_key=key):
                await self._record_chunk(entry, key)
                return LongTermDone(rid)
            case EndSession(request_id=rid, events=events, reason=reason, summarizer_timeout_s=timeout):
                await self._end_session(events, reason, timeout)
                return LongTermDone(rid)
            case Checkpoint(request_id=rid, events=events):
                write = await backend.summaries.checkpoint(events, now=time.time())
                await self._refresh()
                return Checkpointed(rid, write.path)
            case RunDream(request_id=rid):
                return Dreamed(rid, await self.run_dream())
            case RequestDream(request_id=rid):
                return DreamRequested(rid, self._request_dream())
            case DreamLog(request_id=rid, limit=limit):
                return Versions(rid, await backend.dream().dream_log(limit))
            case DreamRestore(request_id=rid, target=target):
                return Restored(rid, await backend.dream().restore(target, now=time.time()))
            case Refresh(request_id=rid):
                await self._refresh()
                return LongTermDone(rid)
            case _:
                assert_never(msg)

    async def _refresh(self) -> None:
        """Rebuild the profile, then reload and publish the prompt layer (PROJECT MEMORY block + profile)."""
        # The layer is loaded once per session: a save or forget still waiting for the debounced
        # rebuild (or made by a process that exited before it), or an entry expired since the last
        # rebuild, would otherwise be wrong in the prompt for the whole session.
        store = self.backend.entries
        try:
            now = time.time()
            # Not for a store that never held a memory: an empty profile only adds a heading to prompts.
            if await anyio.to_thread.run_sync(self.backend.has_profile) or await store.entries(now=now):
                await store.rebuild_profile(now=now)
        except AidenError as exc:
            log.error("profile rebuild failed: %s", exc)
        text = await anyio.to_thread.run_sync(self.backend.load_layer, self.config)
        self.layer.publish(LongTermLayer(text.sections, None if text.compact is None else text.compact.sections))

    async def _record_chunk(self, entry: ChunkEntry, session_key: str) -> None:
        """Append the chunk summary to the history log, Dream's source material.

        A failed record is retried, in order, before the next one, or Dream would never see that chunk;
        its :func:`~aiden.longterm.history.chunk_record_id` makes a retry land once.
        """
        self._unrecorded.append((entry, session_key))
        while self._unrecorded:
            chunk, key = self._unrecorded[0]
            history = self.backend.history
            append = partial(history.append, session_key=key, now=time.time(), chunk_id=chunk_record_id(chunk))
            await anyio.to_thread.run_sync(append, chunk.summary)
            self._unrecorded.pop(0)

    async def _end_session(
        self, events: Sequence[SessionEvent], reason: str, timeout_s: float | None
    ) -> None:
        """Write the dated session summary; shielded so a cancelled caller cannot tear it."""
        with anyio.CancelScope(shield=True):
            if not events and not await anyio.to_thread.run_sync(self.backend.has_running_summary):
                return
            try:
                await self.backend.summaries.write_session_summary(
                    events, now=time.time(), reason=reason, summarizer_timeout_s=timeout_s
                )
            except AidenError as exc:
                log.error("session summary (%s) failed: %s", reason, exc)

    @observed("dream")
    async def run_dream(self) -> DreamOutcome:
        """One Dream run now."""
        self._dreams_running += 1
        try:
            return await self.backend.dream().run(now=time.time())
        finally:
            self._dreams_running -= 1

    def _request_dream(self) -> bool:
        """Ask the scheduled Dream task to run now (False if one is already requested).

        Raises DreamError without a schedule: a request nothing reads would never run Dream and
        would keep the memory from ever parking.
        """
        if self.config.dream_interval_hours <= 0:
            raise DreamError(
                "request_dream needs a Dream schedule (dream_interval_hours > 0); dream() runs Dream now"
            )
        try:
            self._dream_send.send_nowait(None)
        except anyio.WouldBlock:
            return False
        return True

    @property
    def idle(self) -> bool:
        """No Dream run in progress or requested (an idle session's actors may park)."""
        return not self._dreams_running and self._dream_send.statistics().current_buffer_used == 0

    def close_streams(self) -> None:
        """Close the original stream ends (the workers hold clones) and the room's internal streams."""
        self._inbox.close()
        self._outbox.close()
        for stream in (self._dirty_send, self._dirty_recv, self._dream_send, self._dream_recv):
            stream.close()


_WORKERS = 3  # so a long Dream run never holds up the merge a compaction waits for


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
            p.layout,
            p.storage,
            p.config,
            p.summarize,
            self._link.inbox,
            self._link.outbox,
            layer=self._layer,
            backend_factory=self._backend,
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
        # The root is the history's session key. A root that is not valid UTF-8 holds surrogate
        # escapes, which no message can encode: its invalid bytes become "\xff" text. Any other
        # root's key is its str() unchanged, so existing histories still match.
        root = str(self._parts.layout.root)
        key = root.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="backslashreplace")
        await self._port.record_chunk(entry, key)

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
        self._check_open()
        if self._long_term is None:
            raise ClosedError("long-term memory is not available")
        return self._long_term

    def _tool_sets(self) -> list[ToolSet]:
        # ``save_memory`` and ``forget_memory`` (the long-term actor's port is asked for at each call).
        return [*super()._tool_sets(), LongTermTools(self._lt)]

    @property
    def long_term_layer(self) -> str:
        """The PROJECT MEMORY block and profile, as placed in a new session's system prompt (its
        ``compact`` form, if any, once the session compacted or its log grew:
        :func:`~aiden.policy.triggers.fresh_block_fits`)."""
        return self._long_term.layer if self._long_term is not None else ""

    async def checkpoint(self) -> str | None:
        """Force a durable session summary now; its path (None: nothing to write)."""
        # Like the session summary at close, it feeds later prompts: nothing the user withdrew.
        return await self._lt().checkpoint(without_withdrawn(await self._reader.hot_window()))

    async def dream(self) -> DreamOutcome:
        """Run Dream now: fold new history into SOUL.md / USER.md / MEMORY.md (git-versioned)."""
        return await self._lt().dream()

    async def request_dream(self) -> bool:
        """Ask the scheduled Dream task to run soon, without waiting; False if a run is already requested.

        Raises :class:`~aiden.errors.DreamError` when no schedule is configured (``dream_interval_hours`` 0):
        call :meth:`dream` instead.
        """
        return await self._lt().request_dream()

    async def dream_log(self, limit: int = 20) -> list[Version]:
        """The newest ``limit`` versions of SOUL.md / USER.md / MEMORY.md, newest first."""
        return await self._lt().dream_log(limit)

    async def dream_restore(self, version: str | int) -> Version:
        """Bring back a version of SOUL.md / USER.md / MEMORY.md as a new version; returns the new one.

        ``version`` is a commit id or unique prefix (4+ hex digits) or steps back from the newest
        (``1`` = the one before). Raises :class:`~aiden.errors.DreamError` while another process runs
        Dream and :class:`~aiden.errors.VersionNotFoundError` for an unknown version. On the file
        backend, hand edits are first recorded as a version, so a restore can be undone.
        """
        port = self._lt()
        # A bad target (a float, a bool, not hex) fails here with the backends' message,
        # instead of as a message the actor cannot decode.
        check_target(version)
        return await port.dream_restore(version)

"""The runtime: one memory's actors, their streams, recovery and shutdown.

:func:`run_memory` recovers the session on disk, starts its actors in its host's task group,
yields the memory it makes (the runtime knows only its core,
:class:`~aiden.memory_core.CoreMemory`), and on exit drains the writer (everything queued is
committed) before stopping the other actors. A memory idle for ``evict_after_idle_minutes``
parks its actors (no task, no streams) until the next request rings its doorbell.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskStatus

from aiden.actors.mailbox import BACKGROUND, Doorbell, Latest, Link, by_request_id
from aiden.actors.recall import RecallActor, RecallSession
from aiden.actors.scheduler import MaintenanceScheduler, SchedulerActor, SchedulerSession
from aiden.actors.session import SessionReader, SessionWriter, WriterSession
from aiden.actors.summarizer import SummarizerActor, SummarizerProxy, SummarizerSession, prepare
from aiden.config import Config, ModelResolver
from aiden.errors import AidenError, ClosedError, ConfigError
from aiden.events import SessionEvent, without_withdrawn
from aiden.extension import Extension, MemoryParts, StoreFactory, StoreSpec, installed, select_store
from aiden.host import Host, HostLink, loop_host, unwrapped
from aiden.intake import check_text
from aiden.memory_core import CoreMemory
from aiden.messages import (
    CancelSummarize,
    ReaderInbox,
    ReaderOutbox,
    RecallInbox,
    RecallOutbox,
    SchedulerInbox,
    SchedulerOutbox,
    SessionClosed,
    SummarizerInbox,
    SummarizerOutbox,
    WriterInbox,
    codec,
)
from aiden.policy.tokens import BudgetCalibration, TokenCalibration
from aiden.policy.triggers import SchedulerCounters
from aiden.ports import ReaderPort, RecallPort, SchedulerPort, WriterPort
from aiden.recall.embedding import Embedder
from aiden.recall.tool import RecallStats
from aiden.storage.advisory import PromptCalibration, read_window, record_window
from aiden.storage.chunks import ChunkEntry
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore
from aiden.storage.session import FileSessionStore
from aiden.summarizers.protocol import Summarizer

__all__ = ["run_memory"]

log = logging.getLogger("aiden.runtime")

M = TypeVar("M", bound=CoreMemory)

# Small inboxes: the scheduler and summarizer see a handful of messages per turn.
_CONTROL_QUEUE = 64
# Reader workers: a slow chunk read does not hold up the prompt builder's hot-window read.
_READERS = 2
# At most this long between two checks whether an idle memory's actors may park.
_PARK_TICK_S = 60.0


@asynccontextmanager
async def run_memory(
    make: Callable[..., M],
    root: str | os.PathLike[str],
    *,
    config: Config | None = None,
    summarizer: Summarizer | None = None,
    model: str | None = None,
    context_window: int | None = None,
    storage: Storage | None = None,
    store_factory: StoreFactory = FileSessionStore,
    embedder: Embedder | None = None,
    store: StoreSpec | None = None,
    session_id: str | None = None,
    host: Host | None = None,
) -> AsyncIterator[M]:
    """Open (and recover) the memory under ``root`` and run its actors for the block's duration.

    ``make`` makes the memory from the core's keyword arguments and the installed extensions'
    ports (:attr:`aiden.extension.Extension.ports`); the other arguments are those of
    :func:`aiden.open_memory`, which says what each does. Without a ``host``, the memory runs in
    the host its event loop shares (:func:`aiden.host.loop_host`).
    """
    _check_arguments(root, config, summarizer, model, storage, embedder, host)
    config = config or Config()
    if context_window is None:
        context_window = ModelResolver().context_window(model, config.context_window)
    # Every token-sized default not set explicitly follows the active window once the store is
    # open (a bad window is refused here, before the store opens).
    windowed = config.with_window(context_window)
    storage = storage or Storage()
    layout = Layout(root)
    if host is not None:
        host.check_running()  # before the store opens
    async with (
        contextlib.nullcontext(host) if host is not None else loop_host() as host,
        _opened(partial(select_store, store, session_id, store_factory, layout, storage, config)) as session_store,
    ):
        config = windowed
        report = await anyio.to_thread.run_sync(session_store.recover)
        await anyio.to_thread.run_sync(record_window, storage, layout, context_window, model)
        recorded = await anyio.to_thread.run_sync(read_window, layout)
        # What the last close of this root learned from reported usage, for the same model and window.
        kept = recorded["calibration"] if recorded is not None else None

        # The doorbell: how a request to parked actors starts them again (rings go to the host's wake
        # loop; see on_ring). Unbounded: one answer per waiting ring.
        started, started_recv = anyio.create_memory_object_stream[None](math.inf)
        key, rings = host.attach()
        doorbell = Doorbell(rings, key, started_recv)

        writer = host.service(SessionWriter)
        writer_link: HostLink[WriterInbox, list[int]] = HostLink(writer, key, doorbell)
        writer_client = writer_link.client
        scheduler_actor = host.service(SchedulerActor)
        # Small messages carrying caller arguments (record_usage): checked in the caller.
        scheduler_link: HostLink[SchedulerInbox, SchedulerOutbox] = HostLink(
            scheduler_actor, key, doorbell, validate=True
        )
        summarizer_actor = host.service(SummarizerActor)
        summarizer_link: HostLink[SummarizerInbox, SummarizerOutbox] = HostLink(
            summarizer_actor, key, doorbell, on_abandon=lambda rid: CancelSummarize(key, rid)
        )
        summarize = SummarizerProxy(summarizer_link.client, key)
        recall_actor = host.service(RecallActor)
        recall_link: HostLink[RecallInbox, RecallOutbox] = HostLink(recall_actor, key, doorbell)
        host_links: tuple[HostLink[Any, Any], ...] = (writer_link, scheduler_link, summarizer_link, recall_link)
        reader_link: Link[ReaderInbox, ReaderOutbox, ReaderOutbox] = Link(
            "session reader", ReaderInbox, ReaderOutbox, _CONTROL_QUEUE, doorbell=doorbell
        )
        if summarizer is None:
            from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer

            # Fold output is ordered by importance; keep it inside the rolling-summary line cap.
            summarizer = ExtractiveSummarizer(
                fold_max_lines=max(1, min(60, config.max_rolling_summary_lines * 3 // 5))
            )
        # The installed extensions (long-term and experience memory): built from the memory's parts.
        parts = MemoryParts(
            config=config,
            layout=layout,
            storage=storage,
            session_store=session_store,
            summarizer=summarizer,
            summarize=summarize,
            embedder=embedder,
            doorbell=doorbell,
            queue_size=_CONTROL_QUEUE,
        )
        extensions: list[Extension] = [make(parts) for make in installed()]
        links: tuple[Link[Any, Any, Any], ...] = (
            reader_link,
            *(link for extension in extensions for link in extension.links),
        )
        # What the callers read without a request outlives the actors' runs (an idle session's are parked).
        counters: Latest[SchedulerCounters] = Latest(SchedulerCounters())
        recall_stats: Latest[RecallStats | None] = Latest(None)
        recall = RecallPort(recall_link.client, recall_stats, key)
        writer_port = WriterPort(writer_client, key, config.writer_queue_size)

        async def before_compaction(events: Sequence[SessionEvent]) -> None:
            for extension in extensions:
                await extension.before_compaction(events)

        async def after_compaction(entry: ChunkEntry) -> None:  # the recall index embeds the new chunk in the pass
            try:
                for extension in extensions:
                    await extension.after_compaction(entry)
            finally:
                # Closing: the index is derived and catches up at the next search.
                with contextlib.suppress(ClosedError):
                    await recall.sync()

        async def session_ended(reason: str, timeout_s: float | None = None) -> None:
            hot = await anyio.to_thread.run_sync(session_store.read_hot_window)
            # The session summary feeds later sessions' prompts: what the user withdrew (and the
            # retractions saying so, their targets perhaps compacted before) stays out of it.
            events = without_withdrawn(hot)
            for extension in extensions:
                await extension.session_ended(events, reason, timeout_s)

        async def after_rotation() -> None:
            for extension in extensions:
                await extension.after_rotation()

        # This memory's state in the host's scheduler (its trigger state lives on while it is parked).
        scheduler_port = SchedulerPort(scheduler_link.client, counters, key)
        scheduler = MaintenanceScheduler(
            session_store,
            config,
            context_window,
            key,
            summarize,
            model=model,
            calibration=TokenCalibration(factor=kept.token_factor, samples=1) if kept is not None else None,
            before_compaction=before_compaction,
            after_compaction=after_compaction,
            before_rotation=lambda: session_ended("rotation"),
            after_rotation=after_rotation,
            counters=counters,
        )
        evict_after_s = config.evict_after_idle_minutes * 60.0
        finished = False  # closed: the memory refuses its calls, rings start nothing any more
        # What reported usage taught the budget check, as the memory publishes it: saved at close.
        learned = Latest(
            BudgetCalibration(factor=kept.factor, spread=kept.spread, samples=kept.samples)
            if kept is not None
            else BudgetCalibration()
        )
        memory = make(
            root=str(layout.root),
            config=config,
            context_window=context_window,
            writer=writer_port,
            scheduler=scheduler_port,
            reader=ReaderPort(reader_link.client),
            recall=recall,
            recovery=report,
            token_profile=scheduler.token_profile,
            calibration=learned,
            closed=lambda: finished,
            **{name: port for extension in extensions for name, port in extension.ports.items()},
        )

        running: list[anyio.CancelScope] = []  # the actors' run now, if they run: what the close stops
        closing = False
        host_failure: list[BaseException] = []
        opened = False  # the scheduler was told the memory opened (at its actors' first run)

        def writer_failed(error: BaseException) -> None:
            """The store failed this memory in the host's writer: nothing more of it is stored."""
            writer.detach(key)
            writer_client.fail_all(ClosedError("session writer stopped"))
            host_failed(error)

        def host_failed(error: BaseException) -> None:
            """This memory failed in one of the host's actors (its store raised what no store should, a
            bug in a pass): its run ends with the error, and the close fails its callers; the host's
            other memories go on."""
            if running:  # its run raises the error, which ends the memory
                host_failure.append(error)
                running[0].cancel()
            elif not failure:
                failure.append(error)
                block.cancel()

        async def run_actors(answer: Callable[[], None]) -> None:
            """One run of the actors: start them on fresh streams, serve until idle (parked) or closed."""
            nonlocal opened
            for link in links:
                if link.client.parked:  # its streams were dropped when it parked
                    link.bind()
            for host_link in host_links:
                host_link.bind()
            reader = SessionReader(session_store, reader_link.inbox, reader_link.outbox)
            parked = False
            try:
                async with anyio.create_task_group() as tg:
                    for _ in range(_READERS):
                        await tg.start(reader.run)
                    reader.close_streams()  # the workers hold clones
                    await tg.start(reader_link.route, by_request_id(reader_link.client))
                    for extension in extensions:
                        await extension.start(tg, memory)
                    running.append(tg.cancel_scope)
                    if not opened:
                        # The open waits for the backlog check: the triggers see the session as opened.
                        opened = True
                        token = BACKGROUND.set(True)
                        try:
                            await scheduler_port.opened()
                        finally:
                            BACKGROUND.reset(token)
                    answer()
                    clients = [link.client for link in links]
                    # Idle since the callers' request count last changed (seen at the checks' pace).
                    seen, since = -1, 0.0

                    def parkable() -> bool:
                        nonlocal seen, since
                        uses = sum(c.uses for c in clients) + sum(h.client.uses for h in host_links)
                        now = anyio.current_time()
                        if uses != seen:
                            seen, since = uses, now
                        idle_s = now - since
                        return (
                            not closing
                            and idle_s >= evict_after_s
                            and scheduler.idle
                            and all(extension.idle for extension in extensions)
                            and all(c.quiet for c in clients)
                            and all(h.quiet for h in host_links)
                        )

                    while True:
                        await _until_parkable(parkable, evict_after_s)
                        # What the host's writer may still hold of this memory (an append its caller
                        # abandoned) is committed before the store is released, and its recall index
                        # closes (an idle memory keeps no connection); not a caller's use.
                        token = BACKGROUND.set(True)
                        try:
                            await writer_port.flush()
                            await recall.close_index()
                        finally:
                            BACKGROUND.reset(token)
                        if parkable():
                            break
                    # Idle, nothing in flight or queued (checked with no checkpoint since): the actors
                    # stop as at a close whose drain found nothing; a request rings to start them again.
                    running.clear()
                    for client in (*clients, *(h.client for h in host_links)):
                        client.park()
                    parked = True
                    tg.cancel_scope.cancel()
                if host_failure:
                    raise host_failure[0]
                if parked:
                    # Nothing uses the store now, and a next run takes back what it gives (an idle
                    # session keeps no descriptor). Not at a close: the host's writer may still be
                    # committing an append of this memory; the close drains it, then closes the store.
                    session_store.release()
            finally:
                running.clear()
                for host_link in host_links:
                    host_link.unbind()
                for link in links:
                    link.close()
                for extension in extensions:
                    extension.stopped()

        # The memory's runs, as the host's wake loop and the close see them.
        wanted = False  # a ring came since the actors last started
        waiting = 0  # ringers waiting for the actors to run
        stopped = anyio.Event()  # set while no task runs the actors (the first is started below)
        failure: list[BaseException] = []
        block = anyio.CancelScope()  # the caller's block: cancelled when an actor fails

        def answer() -> None:
            nonlocal wanted, waiting
            for _ in range(waiting):
                started.send_nowait(None)
            wanted, waiting = False, 0

        async def runs(first_answer: Callable[[], None], opening: bool) -> None:
            """The actors' runs until they park with no ring since: at most one such task per memory."""
            answered = False

            def answer_first() -> None:
                nonlocal answered
                answered = True
                first_answer()

            try:
                await run_actors(answer_first)
                while wanted and not finished:
                    await run_actors(answer)
            except Exception as exc:
                if opening and not answered:
                    raise  # the open fails with it
                # An actor failed: this memory ends (its caller's block is cancelled and gets the
                # error), the host's other memories go on.
                # The store's own error, not the ClosedError a parking flush got as the writer failed it.
                failure.append(host_failure[0] if host_failure else unwrapped(exc))
                block.cancel()
                started.close()  # ringers get ClosedError
            finally:
                stopped.set()

        def on_ring(wants: bool) -> Callable[[], Coroutine[Any, Any, None]] | None:
            """For the host's wake loop, at each ring of this memory: the task to start, if none runs."""
            nonlocal wanted, waiting, stopped
            if finished or failure:
                return None
            wanted, waiting = True, waiting + wants
            if not stopped.is_set():
                return None
            stopped = anyio.Event()
            return partial(runs, answer, False)

        async def first_runs(*, task_status: TaskStatus[None]) -> None:
            await prepare(summarizer)  # the open waits for it, not the first compaction
            await runs(task_status.started, True)

        # The host's actors serve this memory by its key from now until its close.
        writer.attach(key, WriterSession(session_store, config.max_batch_events, writer_port.dispatch, writer_failed))
        scheduler_actor.attach(key, SchedulerSession(scheduler, by_request_id(scheduler_link.client), host_failed))
        summarizer_actor.attach(key, SummarizerSession(summarizer, config, by_request_id(summarizer_link.client)))
        recall_actor.attach(
            key,
            RecallSession(
                layout, storage, config, embedder, session_store, recall_stats, by_request_id(recall_link.client)
            ),
        )
        try:
            await host.start(key, on_ring, first_runs)
            try:
                with block:
                    yield memory
            finally:
                with anyio.CancelScope(shield=True):
                    closing = True  # no parking now; a parked memory's close still starts the actors
                    try:
                        for extension in extensions:
                            await extension.closing(memory)
                        if config.session_summary_on_close:
                            # The caller is done: a hung summarizer gets close_timeout_s, not its
                            # whole deadline, before the extractive fallback writes the summary.
                            await session_ended("completion", config.close_timeout_s)
                    except ClosedError:
                        if not stopped.is_set():
                            await stopped.wait()
                        if not failure:
                            raise
                        # An actor failed: its error is raised below.
                    except AidenError as exc:
                        # What was appended is stored; a closing step that failed (the store down
                        # as the session summary reads the hot window) does not stop the shutdown.
                        log.error("closing %s: %s", layout.root, exc)
                    calibration = learned.value
                    if calibration.samples:
                        keep = PromptCalibration(
                            factor=calibration.factor,
                            spread=calibration.spread,
                            samples=calibration.samples,
                            token_factor=counters.value.token_calibration,
                        )
                        await anyio.to_thread.run_sync(record_window, storage, layout, context_window, model, keep)
                    finished = True  # the memory's calls raise ClosedError from now on
                    # A pass in flight is abandoned; its commit protocol makes that safe.
                    await scheduler.stop_passes()
                    if running:
                        running[0].cancel()
                    if not stopped.is_set():
                        await stopped.wait()
        finally:
            host.detach(key)
            with anyio.CancelScope(shield=True):
                # What the host's actors still hold of this memory is done before its store closes:
                # everything queued is committed and acknowledged, then its recall index closes.
                # Bounded: a host stopped under its memories answers nothing.
                with anyio.move_on_after(max(config.close_timeout_s, 1.0)) as drain:
                    for host_link in (writer_link, recall_link):
                        with contextlib.suppress(anyio.ClosedResourceError):
                            host_link.bind()
                    await scheduler.stop_passes()  # a run that failed may have left one
                    await scheduler_actor.drained(key)  # a rotation its caller abandoned
                    for done in (writer_port.flush, recall.close_index):
                        try:
                            await done()
                        except ClosedError:
                            pass  # the store failed this memory in the writer: its error is raised below
                        except AidenError as exc:
                            log.warning("closing %s: %s", layout.root, exc)
                if drain.cancelled_caught:
                    log.warning("closing %s: its host's actors did not answer within the close timeout", layout.root)
                for host_link in host_links:
                    host_link.unbind()
                    host_link.client.fail_all(ClosedError("memory is closed"))
                    host_link.actor.detach(key)
                with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError), summarizer_actor.sender() as send:
                    send.send_nowait(codec(SummarizerInbox).encode(SessionClosed(key)))
            # Actors cancelled mid-serve never reached their own `async with` exits; closing twice is a
            # no-op, so every end is closed here.
            for link in links:
                link.close()
            started.close()
            started_recv.close()
            if failure:
                # Not the ClosedError the caller's pending request got when the actors stopped.
                raise failure[0]


@asynccontextmanager
async def _opened(select: Callable[[], SessionStore]) -> AsyncIterator[SessionStore]:
    """The session store ``select()`` opens, closed on the way out however the block ends.

    The close is shielded: a cancelled open or block still gives back the store's descriptor (a
    database store: its pool and connections).
    """
    session_store = await anyio.to_thread.run_sync(select)
    try:
        yield session_store
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(session_store.close)


def _check_arguments(
    root: object, config: object, summarizer: object, model: object, storage: object, embedder: object, host: object
) -> None:
    """Refuse an argument of ``open_memory`` that would otherwise fail deep inside the open (or later)."""
    if not isinstance(root, str | os.PathLike) or not isinstance(os.fspath(root), str):
        raise ConfigError(f"open_memory: root must be a str or path, got {type(root).__name__}")
    try:
        encoded = os.fsencode(root)
    except UnicodeEncodeError:  # a lone surrogate, not an undecodable byte (those encode back)
        encoded = b"\0"
    if b"\0" in encoded:
        raise ConfigError(f"open_memory: root {os.fspath(root)!r} is not a path (a NUL byte or a lone surrogate)")
    inside = Layout(root).root
    for outer in map(Layout, inside.parents):
        # Its files would be another memory's: archived with its session, or in its way.
        if outer.contains(inside) and outer.lock_file.exists():
            raise ConfigError(f"open_memory: root {str(inside)!r} is inside the memory of {str(outer.root)!r}")
    kinds = (("config", config, Config), ("summarizer", summarizer, Summarizer), ("storage", storage, Storage))
    for name, value, kind in (*kinds, ("embedder", embedder, Embedder), ("host", host, Host)):
        if value is not None and not isinstance(value, kind):
            raise ConfigError(f"open_memory: {name} must be a {kind.__name__} or None, got {type(value).__name__}")
    if model is not None:
        check_text("open_memory: model", model, ConfigError)


async def _until_parkable(parkable: Callable[[], bool], evict_after_s: float) -> None:
    """Return at the first check that finds the actors parkable (never when ``evict_after_s`` is 0)."""
    if evict_after_s <= 0:
        await anyio.sleep_forever()
    tick = min(_PARK_TICK_S, max(evict_after_s / 4, 0.05))
    while True:
        await anyio.sleep(tick)
        if parkable():
            return

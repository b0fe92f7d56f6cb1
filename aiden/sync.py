"""A blocking facade over :func:`aiden.open_memory` for synchronous agent loops.

The async runtime runs on one blocking-portal thread shared by the sync memories open at the
same time (started with the first, stopped with the last). Callers own timeouts: nothing here
adds one. A :class:`SyncMemory` may be used from several threads, but not from inside its
own loop thread (e.g. from a summarizer callback): that raises an :class:`~aiden.errors.AidenError`.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from functools import partial
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from aiden.config import Config
from aiden.errors import AidenError, ClosedError
from aiden.extension import StoreSpec
from aiden.memory import Memory
from aiden.memory import open_memory as _open_async
from aiden.recall.embedding import Embedder
from aiden.summarizers.protocol import Summarizer

__all__ = ["SyncMemory", "open_memory"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


@contextmanager
def open_memory(
    root: str | os.PathLike[str],
    *,
    config: Config | None = None,
    summarizer: Summarizer | None = None,
    model: str | None = None,
    context_window: int | None = None,
    embedder: Embedder | None = None,
    store: StoreSpec | None = None,
    session_id: str | None = None,
) -> Iterator[SyncMemory]:
    """Open the memory under ``root`` on the loop thread; yields a :class:`SyncMemory`.

    The arguments are those of :func:`aiden.open_memory`. Leaving the block (or
    :meth:`SyncMemory.close`) closes the memory exactly as ``async with`` does.
    """
    with _loop_thread() as portal:
        async_cm = _open_async(
            root,
            config=config,
            summarizer=summarizer,
            model=model,
            context_window=context_window,
            embedder=embedder,
            store=store,
            session_id=session_id,
        )
        opened: Future[tuple[Memory, anyio.Event, int]] = Future()
        held = portal.start_task_soon(_hold_open, async_cm, opened)
        try:
            memory = SyncMemory(portal, held, *opened.result())
        except BaseException:
            # Interrupted (e.g. Ctrl-C) while opening: the open is cancelled (or the memory closed),
            # else the loop thread waits for it for ever and never stops.
            held.cancel()
            raise
        try:
            yield memory
        finally:
            memory.close()


async def _hold_open(async_cm: AbstractAsyncContextManager[Memory], opened: Future[tuple[Memory, anyio.Event, int]]) -> None:
    """Open the memory, hand ``opened`` it, the event that closes it and the loop thread; hold it open until then."""
    try:
        async with async_cm as memory:
            closing = anyio.Event()
            opened.set_result((memory, closing, threading.get_ident()))
            await closing.wait()
    except BaseException as exc:
        if not opened.done():  # the open failed: its caller gets why
            opened.set_exception(exc)
        raise


class _LoopThread:
    """The event-loop thread the open sync memories of a process share (and so their host): started
    with the first memory and stopped, its thread joined, with the last."""

    def __init__(self) -> None:
        self._reset()
        # A forked child has no loop thread (only its parent's state): its first open starts one.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._running: tuple[BlockingPortal, AbstractContextManager[BlockingPortal]] | None = None

    @contextmanager
    def __call__(self) -> Iterator[BlockingPortal]:
        pid = os.getpid()
        with self._lock:
            if self._running is None:
                cm = start_blocking_portal(name="aiden-memory-loop")
                self._running = (cm.__enter__(), cm)
            portal = self._running[0]
            self._users += 1
        failed: BaseException | None = None
        try:
            yield portal
        except BaseException as exc:
            failed = exc
            raise
        finally:
            # Left in a forked child: its parent's loop thread is not its to stop.
            if os.getpid() == pid:
                with self._lock:
                    self._users -= 1
                    if self._users == 0:
                        running, self._running = self._running, None
                        assert running is not None
                        # Under the lock: an open meanwhile waits, then starts a new thread. Left by an
                        # error (an interrupt landing before the open's task could be cancelled), the
                        # loop's tasks left are cancelled: waited for, one holding a memory open would
                        # never end.
                        if failed is None:
                            running[1].__exit__(None, None, None)
                        else:
                            running[1].__exit__(type(failed), failed, failed.__traceback__)


_loop_thread = _LoopThread()


def _blocking(method: Callable[Concatenate[Memory, _P], Awaitable[_T]]) -> Callable[Concatenate[SyncMemory, _P], _T]:
    """A :class:`Memory` method as a blocking method of :class:`SyncMemory`: same name, signature and docs."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: SyncMemory, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        result: _T = self._run(partial(getattr(self._memory, name), *args, **kwargs))
        return result

    return call


def _blocking_sync(method: Callable[Concatenate[Memory, _P], _T]) -> Callable[Concatenate[SyncMemory, _P], _T]:
    """A synchronous :class:`Memory` method, run on the loop thread too: the memory's state belongs to it."""
    return _blocking(method)  # type: ignore[arg-type]  # the portal returns a plain result as is


class SyncMemory:
    """Blocking twin of :class:`~aiden.memory.Memory` (same names and signatures); from :func:`aiden.sync.open_memory`."""

    def __init__(
        self, portal: BlockingPortal, held: Future[None], memory: Memory, closing: anyio.Event, loop_thread: int
    ) -> None:
        self._portal = portal
        self._held = held
        self._memory = memory
        self._closing = closing
        self._loop_thread = loop_thread
        self._pid = os.getpid()
        self._close_lock = threading.Lock()
        self._closed = False

    def _check_caller(self) -> None:
        """Refuse a caller that would wait for itself (on the loop thread) or for a thread a fork left behind."""
        if os.getpid() != self._pid:
            raise ClosedError("memory is closed in this process: it was opened before os.fork(); open it again here")
        if threading.get_ident() == self._loop_thread:
            # It would wait for itself.
            raise AidenError(
                "a SyncMemory cannot be used on its own loop thread (e.g. from a summarizer or a call() function): "
                "use the async Memory there"
            )

    def _run(self, func: Callable[[], Awaitable[_T]]) -> _T:
        """``func()`` on the loop thread (awaited when it returns an awaitable); its result."""
        self._check_caller()
        if self._closed:
            raise ClosedError("memory is closed")
        try:
            return self._portal.call(func)
        except RuntimeError as exc:
            if self._closed:  # closed since the check: its loop thread may be gone ("portal is not running")
                raise ClosedError("memory is closed") from exc
            raise

    def call(self, func: Callable[[Memory], Awaitable[_T]]) -> _T:
        """Run ``func(memory)`` on the loop thread and return its result, e.g. ``memory.call(lambda m: m.rehydrate(i))``."""
        return self._run(partial(func, self._memory))

    def close(self) -> None:
        """Close the memory now (idempotent): commit what was appended, stop the actors.

        A close while another thread closes waits for that close. In a process forked from the
        one that opened it, it does nothing: the memory belongs to the parent.
        """
        if os.getpid() != self._pid:
            return
        self._check_caller()
        with self._close_lock:
            if not self._closed:
                try:
                    self._portal.call(self._closing.set)
                    self._held.result()
                finally:
                    self._closed = True

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or the ``with`` block ended), and in a process forked after the open."""
        return self._closed or os.getpid() != self._pid

    # Properties read the memory's state directly: each is one attribute read, safe from any thread.

    @property
    def root(self) -> str:
        """The resolved memory root."""
        return self._memory.root

    @property
    def config(self) -> Config:
        """The configuration in force."""
        return self._memory.config

    @property
    def context_window(self) -> int:
        """The context window (tokens) the trigger uses."""
        return self._memory.context_window

    @property
    def run_active(self) -> bool:
        """True between ``begin_run`` and ``commit_run``."""
        return self._memory.run_active

    @property
    def episode_id(self) -> str | None:
        """The id of the episode being recorded (the current run's), None between runs."""
        return self._memory.episode_id

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Every agent tool aiden provides (see :attr:`Memory.tools`)."""
        return self._memory.tools

    @property
    def recall_tool(self) -> dict[str, Any]:
        """The ``recall_session_chunks`` function-tool schema."""
        return self._memory.recall_tool

    @property
    def long_term_layer(self) -> str:
        """The PROJECT MEMORY block and profile, as placed in the system prompt."""
        return self._memory.long_term_layer

    append = _blocking(Memory.append)
    append_many = _blocking(Memory.append_many)
    append_message = _blocking(Memory.append_message)
    append_response = _blocking(Memory.append_response)
    flush = _blocking(Memory.flush)
    record_usage = _blocking(Memory.record_usage)
    begin_run = _blocking(Memory.begin_run)
    commit_run = _blocking(Memory.commit_run)
    rotate = _blocking(Memory.rotate)
    build_messages = _blocking(Memory.build_messages)
    estimate_text = _blocking_sync(Memory.estimate_text)

    maintain = _blocking(Memory.maintain)
    request_maintenance = _blocking_sync(Memory.request_maintenance)
    checkpoint = _blocking(Memory.checkpoint)
    stats = _blocking_sync(Memory.stats)
    last_activity = _blocking(Memory.last_activity)

    hot_window = _blocking(Memory.hot_window)
    summary_md = _blocking(Memory.summary_md)
    chunk_index = _blocking(Memory.chunk_index)
    read_event = _blocking(Memory.read_event)
    read_events = _blocking(Memory.read_events)
    lookup_chunk = _blocking(Memory.lookup_chunk)
    rehydrate = _blocking(Memory.rehydrate)
    recall_session_chunks = _blocking(Memory.recall_session_chunks)
    recall_stats = _blocking_sync(Memory.recall_stats)
    handle_tool_call = _blocking(Memory.handle_tool_call)
    handle_recall_tool = _blocking(Memory.handle_recall_tool)

    dream = _blocking(Memory.dream)
    request_dream = _blocking(Memory.request_dream)
    dream_log = _blocking(Memory.dream_log)
    dream_restore = _blocking(Memory.dream_restore)

    observe = _blocking_sync(Memory.observe)
    commit_episode = _blocking(Memory.commit_episode)
    learn_experience = _blocking(Memory.learn_experience)
    experience_records = _blocking(Memory.experience_records)

"""Hosts: the task group that runs open memories' actors, its wake loop and its shared actors.

A memory's actors run in its host's task group while they are in use; parked (idle), the
memory keeps no task of its own, and the host's one wake loop starts its actors again at the
next request (a ring of its doorbell). The session writer is one actor per host, serving
every memory of it by key (:meth:`Host._service`). :func:`open_host` gives a host for a block; the
memories opened without one share their asyncio event loop's host, started with the first and
stopped with the last.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import math
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Generic, NoReturn, ParamSpec, Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import RunVar
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.errors import ClosedError

__all__ = ["Host", "async_only", "loop_host", "open_host", "unwrapped"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class _Service(Protocol):
    """An actor serving every memory of a host (e.g. the session writer)."""

    async def run(self) -> None:
        """Serve until the host's task group is cancelled."""


_S = TypeVar("_S", bound=_Service)

_SYNC_WITH = (
    "aiden.{name}() is an async context manager: use `async with aiden.{name}(...) as {what}:` "
    "inside a coroutine{facade}"
)
# The blocking facades (aiden.sync) of the async context managers that have one.
_SYNC_FACADE = {"open_memory": ", or `with aiden.sync.open_memory(...) as memory:` from synchronous code"}


class _AsyncOnly(Generic[_T]):
    """An async context manager whose sync ``with`` fails with a TypeError saying what to use."""

    def __init__(self, cm: AbstractAsyncContextManager[_T], message: str) -> None:
        self._cm = cm
        self._message = message

    async def __aenter__(self) -> _T:
        return await self._cm.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._cm.__aexit__(exc_type, exc, tb)

    def __enter__(self) -> NoReturn:
        raise TypeError(self._message)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


def async_only(func: Callable[_P, AbstractAsyncContextManager[_T]]) -> Callable[_P, _AsyncOnly[_T]]:
    """``func``'s context managers, whose plain ``with`` raises a TypeError naming ``async with``."""
    name = func.__name__
    message = _SYNC_WITH.format(
        name=name, what=name.removeprefix("open_"), facade=_SYNC_FACADE.get(name, "")
    )

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _AsyncOnly[_T]:
        return _AsyncOnly(func(*args, **kwargs), message)

    return wrapper


class Host:
    """Runs the memories opened with ``open_memory(root, host=host)`` in one task group.

    Obtain it from :func:`open_host`. A memory's actors run in the host's task group while
    they are in use; parked (idle, see ``evict_after_idle_minutes``) the memory keeps no task:
    the host's one wake loop starts its actors again at the next request. An actor failing
    ends its own memory only (its ``open_memory`` block is cancelled and raises the error).
    """

    def __init__(self, tg: TaskGroup, rings: MemoryObjectSendStream[tuple[int, bool]]) -> None:
        self._tg = tg
        self._rings = rings  # where the memories' doorbells ring: (memory key, whether the ringer waits)
        self._keys = itertools.count(1)
        self._on_ring: dict[int, Callable[[bool], Callable[[], Coroutine[Any, Any, None]] | None]] = {}
        self._services: dict[Callable[[], Any], Any] = {}

    def _service(self, make: Callable[[], _S]) -> _S:
        """The host's one actor that ``make`` makes: made and started by the first memory needing it.

        It serves every memory of the host by key and runs until the host stops.
        """
        actor: _S | None = self._services.get(make)
        if actor is None:
            actor = self._services[make] = make()
            self._tg.start_soon(actor.run)
        return actor

    def _key(self) -> int:
        """A fresh key for a memory of this host."""
        return next(self._keys)

    def _add(self, key: int, on_ring: Callable[[bool], Callable[[], Coroutine[Any, Any, None]] | None]) -> None:
        """Serve the rings of memory ``key``: ``on_ring(waits)`` gives the task to start, if any."""
        self._on_ring[key] = on_ring

    def _remove(self, key: int) -> None:
        """Memory ``key`` closed."""
        self._on_ring.pop(key, None)

    async def _wake_loop(self, rings: MemoryObjectReceiveStream[tuple[int, bool]]) -> None:
        """Start a memory's actors again when it rings (the host's one task of its own)."""
        async with rings:
            async for key, waits in rings:
                on_ring = self._on_ring.get(key)
                task = on_ring(waits) if on_ring is not None else None
                if task is not None:
                    self._tg.start_soon(task)


@async_only
@asynccontextmanager
async def open_host() -> AsyncIterator[Host]:
    """A :class:`Host` for the block's duration: pass it to every ``open_memory(root, host=host)``.

    Close the memories before the block ends: leaving it stops every actor of the host.
    """
    send, receive = anyio.create_memory_object_stream[tuple[int, bool]](math.inf)
    with send:
        async with anyio.create_task_group() as tg:
            host = Host(tg, send)
            tg.start_soon(host._wake_loop, receive)
            try:
                yield host
            finally:
                tg.cancel_scope.cancel()


class _LoopHost:
    """The host that the memories opened without one share in one asyncio event loop.

    Its task (a fresh context, not the first opener's) owns the host's task group and runs the
    wake loop itself: one task, started by the first such memory and ended by the last, whose
    leaving closes the rings. No caller's block owns the task group.
    """

    def __init__(self) -> None:
        self.users = 0
        self.stopping = False  # the last user left: a memory opened now starts another host
        self.rings, self._receive = anyio.create_memory_object_stream[tuple[int, bool]](math.inf)
        self.host: Host | None = None
        self.ready = anyio.Event()  # the host runs (or its task ended before it could)
        self.task: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self.host = Host(tg, self.rings)
                self.ready.set()
                await self.host._wake_loop(self._receive)  # until the last user closes the rings
                tg.cancel_scope.cancel()
        finally:
            self.host = None
            self.ready.set()


_LOOP_HOST: RunVar[_LoopHost] = RunVar("aiden_loop_host")


@asynccontextmanager
async def loop_host() -> AsyncIterator[Host]:
    """The event loop's shared host for the block's duration (a private one off asyncio)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio)
        loop = None
    if loop is None:
        try:
            async with open_host() as own:
                yield own
        except BaseExceptionGroup as group:
            # The caller's block runs inside the host's task group; give back the caller's
            # own exception, not a group wrapping it.
            error = unwrapped(group)
            if error is group:
                raise
            raise error from None
        return
    try:
        shared = _LOOP_HOST.get()
    except LookupError:
        shared = None
    if shared is None or shared.stopping:
        shared = _LoopHost()
        _LOOP_HOST.set(shared)
        shared.task = loop.create_task(
            shared.serve(), name="aiden host", context=contextvars.Context()
        )
    shared.users += 1
    try:
        await shared.ready.wait()
        if shared.host is None:
            raise ClosedError("the event loop's aiden host has stopped")
        yield shared.host
    finally:
        shared.users -= 1
        if shared.users == 0:
            shared.stopping = True
            shared.rings.close()
            assert shared.task is not None
            with anyio.CancelScope(shield=True):
                await asyncio.wait({shared.task})
            if not shared.task.cancelled() and (failed := shared.task.exception()) is not None:
                raise failed


def unwrapped(error: BaseException) -> BaseException:
    """The one exception inside nested one-exception groups (task groups wrap what they raise)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error

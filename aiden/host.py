"""Hosts: the task group that runs open memories' actors, its wake loop and its shared actors.

The shared actors (writer, summarizer, scheduler, recall index) are one :class:`HostActor` per
host each, serving every memory of it by key. :func:`open_host` gives a host for a block; the
memories opened without one share their asyncio event loop's host, started with the first and
stopped with the last.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Generic, NoReturn, ParamSpec, Protocol, TypeVar

import anyio
import msgspec
from anyio.abc import TaskGroup, TaskStatus
from anyio.lowlevel import RunVar
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Client, Doorbell, route_replies
from aiden.errors import ClosedError
from aiden.messages import Codec, ErrorInfo, Failed, codec

__all__ = ["Host", "HostActor", "HostLink", "Served", "async_only", "loop_host", "open_host", "unwrapped"]

_P = ParamSpec("_P")
_T = TypeVar("_T")
_S = TypeVar("_S", bound="HostActor[Any, Any, Any]")
# A memory's ring handler: at each ring (whether the ringer waits), the task to start, if any.
_OnRing = Callable[[bool], Callable[[], Coroutine[Any, Any, None]] | None]


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
    # open_memory has a blocking facade (aiden.sync).
    facade = ", or `with aiden.sync.open_memory(...) as memory:` from synchronous code" if name == "open_memory" else ""
    message = (
        f"aiden.{name}() is an async context manager: use `async with aiden.{name}(...) as "
        f"{name.removeprefix('open_')}:` inside a coroutine{facade}"
    )

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _AsyncOnly[_T]:
        return _AsyncOnly(func(*args, **kwargs), message)

    return wrapper


class Host:
    """Runs the memories opened with ``open_memory(root, host=host)`` in one task group.

    Obtain it from :func:`open_host`. Parked (idle, see ``evict_after_idle_minutes``) a memory
    keeps no task: the host's one wake loop starts its actors again at the next request. An actor
    failing ends its own memory only (its ``open_memory`` block is cancelled and raises the error).
    Its methods are what a memory's runtime asks of it; users only pass it to ``open_memory``.
    """

    def __init__(self, tg: TaskGroup, rings: MemoryObjectSendStream[tuple[int, bool]]) -> None:
        self._tg = tg
        self._rings = rings  # where the memories' doorbells ring: (memory key, whether the ringer waits)
        self._keys = itertools.count(1)  # a fresh key for each memory of this host
        self._on_ring: dict[int, _OnRing] = {}  # the started memories' ring handlers by key
        self._services: dict[Callable[[], Any], Any] = {}
        self._stopped = False  # its open_host block ended: it serves no new memory

    def check_running(self) -> None:
        """:class:`~aiden.errors.ClosedError` once the host has stopped (nothing can start in it)."""
        if self._stopped:
            raise ClosedError("the host is closed: open memories on a host whose open_host block is running")

    def service(self, make: Callable[[], _S]) -> _S:
        """The host's one actor that ``make`` makes: made and started by the first memory needing it."""
        actor: _S | None = self._services.get(make)
        if actor is None:
            self.check_running()
            actor = self._services[make] = make()
            self._tg.start_soon(actor.run)
        return actor

    def attach(self) -> tuple[int, MemoryObjectSendStream[tuple[int, bool]]]:
        """A new memory's key in this host, and where its doorbell rings: ``(key, whether the ringer
        waits)`` goes to the host's wake loop (see :meth:`start`)."""
        return next(self._keys), self._rings

    async def start(self, key: int, on_ring: _OnRing, run: Callable[..., Coroutine[Any, Any, None]]) -> None:
        """Start memory ``key``'s first ``run`` in the host's task group (returns once it reports
        started) and, until :meth:`detach`, start the task ``on_ring(waits)`` gives at each ring."""
        self._on_ring[key] = on_ring
        self.check_running()
        await self._tg.start(run)

    def detach(self, key: int) -> None:
        """Rings of memory ``key`` start nothing from now on (it is closing)."""
        self._on_ring.pop(key, None)

    async def _wake_loop(self, rings: MemoryObjectReceiveStream[tuple[int, bool]]) -> None:
        """Start a memory's actors again when it rings (the host's one task of its own)."""
        async with rings:
            async for key, waits in rings:
                on_ring = self._on_ring.get(key)
                task = on_ring(waits) if on_ring is not None else None
                if task is not None:
                    self._tg.start_soon(task)


class _Keyed(Protocol):
    """What every request and reply of a host's actor carries: its session's key in the host."""

    @property
    def session(self) -> int: ...


_Rep_contra = TypeVar("_Rep_contra", contravariant=True)


class Served(Protocol[_Rep_contra]):
    """What a host's actor needs of every session it serves: where the session's replies go."""

    def dispatch(self, reply: _Rep_contra, /) -> None:
        """Hand ``reply`` to the session's waiting caller."""


K = TypeVar("K", bound=_Keyed)
KR = TypeVar("KR", bound=_Keyed)
S = TypeVar("S", bound=Served[Any])
V = TypeVar("V")


class HostActor(Generic[K, KR, S]):
    """An actor serving every session of its host by key: the base of the host's actors.

    A session's requests are served in order (:meth:`serve_queued`) by one task that ends when its
    queue is empty, so an idle session costs nothing; sessions are served in parallel. A subclass
    may answer some requests at once, out of the queue (:meth:`at_once`).
    """

    def __init__(self, name: str, requests: Any, replies: Any, size: int = 1024) -> None:
        # ``size`` bounds the inbox and the outbox; the default fits a few requests a memory at a time.
        self.name = name
        self._send, self._inbox = anyio.create_memory_object_stream[bytes](size)
        self._outbox, self._replies = anyio.create_memory_object_stream[bytes](size)
        self._in: Codec[K] = codec(requests)
        self._out: Codec[KR] = codec(replies)
        self._sessions: dict[int, S] = {}  # the open sessions it serves, by key (see attach)
        self._queued: dict[int, deque[K]] = {}  # the sessions with requests, each its requests in order
        self._tg: TaskGroup | None = None  # the actor's own, while it runs
        self._emptied: dict[int, anyio.Event] = {}  # set when the session's queue empties

    def attach(self, key: int, session: S) -> None:
        """Serve session ``key`` from now on (its runtime attaches it before its first request)."""
        self._sessions[key] = session

    def detach(self, key: int) -> None:
        """Serve session ``key`` no more: its requests still queued are refused as closed."""
        self._sessions.pop(key, None)

    def sender(self) -> MemoryObjectSendStream[bytes]:
        """A send end of the inbox for one run of a session's client (closing it closes only the clone)."""
        return self._send.clone()

    def idle(self, key: int) -> bool:
        """Nothing of session ``key`` is queued or being served."""
        return key not in self._queued

    async def drained(self, key: int) -> None:
        """Return once nothing of session ``key`` is queued or being served (requests whose callers
        left included: a close waits for them before its store closes)."""
        if not self.idle(key):
            await self._emptied.setdefault(key, anyio.Event()).wait()

    async def run(self) -> None:
        """Serve every session until the host stops (its task group is cancelled)."""
        # The streams close after the task group: a request still in a worker thread when the
        # host stops replies into an open outbox (which nobody reads any more).
        async with self._send, self._inbox, self._outbox, anyio.create_task_group() as tg:
            self._tg = tg
            # The router ends when the host stops, after every session closed: nobody to tell.
            tg.start_soon(route_replies, self._replies, self._out, self._route, lambda: None)
            while (raw := await self._next()) is not None:
                try:
                    msg = self._in.decode(raw)
                except msgspec.ValidationError as exc:
                    # A value of the wrong type (encoding checks none): answered if its session and
                    # request id can be read, never the end of the actor serving every session.
                    await self._refuse(raw, exc)
                    continue
                if self.at_once(msg):
                    continue
                queue = self._queued.get(msg.session)
                if queue is None:
                    queue = self._queued[msg.session] = deque()
                    tg.start_soon(self._serve, msg.session, queue)
                queue.append(msg)

    async def _next(self) -> bytes | None:
        """The next request, None once the inbox is closed and drained.

        Taken without a checkpoint when one is already queued (common under load): an extra
        event loop pass per request is costly.
        """
        try:
            try:
                return self._inbox.receive_nowait()
            except anyio.WouldBlock:
                return await self._inbox.receive()
        except anyio.EndOfStream:
            return None

    async def _serve(self, key: int, queue: deque[K]) -> None:
        try:
            while queue:
                await self.serve_queued(key, queue)
        finally:
            del self._queued[key]
            emptied = self._emptied.pop(key, None)
            if emptied is not None:
                emptied.set()

    async def _refuse(self, raw: bytes, exc: msgspec.ValidationError) -> None:
        logging.getLogger(f"aiden.{self.name}").error("refused an undecodable request: %s", exc)
        try:
            fields = msgspec.msgpack.decode(raw)
        except msgspec.DecodeError:
            return
        key, rid = (fields.get("session"), fields.get("request_id")) if isinstance(fields, dict) else (None, None)
        if type(key) is int and type(rid) is int:
            info = ErrorInfo(kind="AidenError", message=f"invalid request to the {self.name}: {exc}")
            await self.reply(self.refused(key, rid, info))

    def refused(self, key: int, request_id: int, error: ErrorInfo) -> KR:
        """The reply refusing an undecodable request (a :class:`~aiden.messages.Failed` by default)."""
        return Failed(request_id, error, key)  # type: ignore[return-value]  # Failed is in every union but the writer's

    def spawn(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``work`` in the actor's task group (a session's work beside its requests: its passes)."""
        if self._tg is None:
            raise ClosedError(f"the {self.name} is not running")
        self._tg.start_soon(work)

    def at_once(self, request: K) -> bool:
        """Answer ``request`` now instead of queueing it; True if it was (none by default)."""
        return False

    async def serve_queued(self, key: int, queue: deque[K]) -> None:
        """Serve the next request of session ``key`` (or several: a batch) and reply."""
        raise NotImplementedError

    async def reply(self, message: KR) -> None:
        """Send a reply; without a checkpoint when the outbox has room (back-pressure when it is full)."""
        raw = self._out.encode(message)
        try:
            try:
                self._outbox.send_nowait(raw)
            except anyio.WouldBlock:
                await self._outbox.send(raw)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the host stopped: nobody waits for it

    def _route(self, reply: KR) -> None:
        session = self._sessions.get(reply.session)
        if session is not None:  # else closed since: nobody waits
            session.dispatch(reply)


class HostLink(Generic[K, V]):
    """A memory's wiring to one of its host's actors: the client its callers use, and its send end.

    The client sends on a fresh clone of the actor's inbox for each run of the memory's actors
    (:meth:`bind`); it parks with them, and a request to it then rings the memory's doorbell.
    """

    __slots__ = ("_send", "actor", "client", "key")

    def __init__(self, actor: HostActor[K, Any, Any], key: int, doorbell: Doorbell, **options: Any) -> None:
        """``options``: the client's (:class:`~aiden.actors.mailbox.Client`), named as its actor."""
        self.actor = actor
        self.key = key
        self.client: Client[K, V] = Client(actor.name, None, actor._in, doorbell=doorbell, **options)
        self._send: MemoryObjectSendStream[bytes] | None = None

    def bind(self) -> None:
        """Send to the actor from now on (a run of the memory's actors starts, or its close)."""
        self.unbind()
        self._send = self.actor.sender()
        self.client.bind(self._send)

    def unbind(self) -> None:
        """Close this run's send end (the run ended)."""
        if self._send is not None:
            self._send.close()
            self._send = None

    @property
    def quiet(self) -> bool:
        """No caller waits for a reply, and nothing of the memory is queued or served by the actor."""
        return self.client.answered and self.actor.idle(self.key)


@async_only
@asynccontextmanager
async def open_host() -> AsyncIterator[Host]:
    """A :class:`Host` for the block's duration: pass it to every ``open_memory(root, host=host)``.

    Close the memories before the block ends: leaving it stops every actor of the host.
    """
    rings, receive = anyio.create_memory_object_stream[tuple[int, bool]](math.inf)
    status = _Status()
    async with anyio.create_task_group() as tg:
        with rings:  # leaving the block closes the rings: the host stops
            # Not tg.start: a caller cancelled before the shielded host reported would wait for it
            # to end (trio keeps such a task in start()), and it ends only when the rings close.
            tg.start_soon(functools.partial(_serve, rings, receive, task_status=status))
            await status.ready.wait()
            if status.host is None:
                raise ClosedError("the host stopped as it started")
            yield status.host


class _Status:
    """A host's task status: its :class:`Host` once it runs."""

    def __init__(self) -> None:
        self.host: Host | None = None
        self.ready = anyio.Event()  # the host runs (or its task ended before it could)

    def started(self, value: Host | None = None) -> None:
        """The host runs (``_serve``'s task status)."""
        self.host = value
        self.ready.set()


async def _serve(
    rings: MemoryObjectSendStream[tuple[int, bool]],
    receive: MemoryObjectReceiveStream[tuple[int, bool]],
    *,
    task_status: TaskStatus[Host],
) -> None:
    """Run a host (its task group, its wake loop, so its actors) until its rings close."""
    # Shielded: a caller's cancellation reaches its memories' blocks, and their closes still go
    # through these actors (to write what a close writes); the actors stop when the host does.
    with anyio.CancelScope(shield=True):
        async with anyio.create_task_group() as tg:
            host = Host(tg, rings)
            task_status.started(host)
            try:
                await host._wake_loop(receive)  # until the rings close
            finally:
                host._stopped = True
            tg.cancel_scope.cancel()


class _LoopHost(_Status):
    """The host that the memories opened without one share in one asyncio event loop.

    Its task (a fresh context, not the first opener's) owns the host's task group and runs the
    wake loop: started by the first such memory, ended when the last closes the rings.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.users = 0
        self.stopping = False  # the last user left: a memory opened now starts another host
        self.rings, self._receive = anyio.create_memory_object_stream[tuple[int, bool]](math.inf)
        self.task = loop.create_task(self.serve(), name="aiden host", context=contextvars.Context())

    async def serve(self) -> None:
        try:
            await _serve(self.rings, self._receive, task_status=self)
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
    shared = _LOOP_HOST.get(None)
    if shared is None or shared.stopping:
        shared = _LoopHost(loop)
        _LOOP_HOST.set(shared)
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
            with anyio.CancelScope(shield=True):
                await asyncio.wait({shared.task})
            if not shared.task.cancelled() and (failed := shared.task.exception()) is not None:
                raise failed


def unwrapped(error: BaseException) -> BaseException:
    """The one exception inside nested one-exception groups (task groups wrap what they raise)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error

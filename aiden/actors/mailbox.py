"""Caller-side plumbing for actors: encoded sends and request/reply matching.

An actor reads encoded messages from a bounded inbox stream and writes encoded
replies to its outbox stream. On the caller side a :class:`Client` assigns
request ids, parks the caller on a :class:`Waiter`, and a reply router task
(started by the runtime) decodes replies and wakes the matching waiters.
:class:`Link` is the one way the runtime wires an actor: both streams, the
client and the router.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.errors import AidenError, ClosedError
from aiden.messages import Codec

__all__ = ["Client", "Latest", "Link", "Waiter", "by_request_id", "route_replies"]

Req = TypeVar("Req")
Rep = TypeVar("Rep")
V = TypeVar("V")


class Latest(Generic[V]):
    """The newest immutable snapshot an actor published (e.g. its counters).

    Only frozen msgspec Structs go in: what the caller's room reads can never
    be changed under it, and the actor never shares its own mutable state.
    """

    __slots__ = ("_value",)

    def __init__(self, value: V) -> None:
        self._value = self._check(value)

    @staticmethod
    def _check(value: V) -> V:
        if value is None:
            return value  # nothing published yet
        config = getattr(type(value), "__struct_config__", None)
        if config is None or not config.frozen:
            raise TypeError(f"only frozen msgspec Structs can be published, not {type(value).__name__}")
        return value

    def publish(self, value: V) -> None:
        """Replace the snapshot."""
        self._value = self._check(value)

    @property
    def value(self) -> V:
        """The newest snapshot."""
        return self._value


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop when the current anyio backend is asyncio; None under any other (trio).

    Asked of anyio (``current_token``, anyio >= 4.11), not of asyncio: under trio's
    guest mode an asyncio loop runs in the thread while the code is trio's.
    """
    current_token = getattr(anyio.lowlevel, "current_token", None)
    if current_token is None:
        return None  # an older anyio: every waiter is an anyio.Event
    native = current_token().native_token
    return native if isinstance(native, asyncio.AbstractEventLoop) else None


class Waiter(Generic[V]):
    """One caller parked until its reply (or an error) arrives.

    Given the running asyncio loop it parks on a bare future of that loop;
    otherwise (trio) on an :class:`anyio.Event`. One waiter is made per request:
    an ``anyio.Event`` under asyncio costs a backend lookup plus an
    ``asyncio.Event`` with its waiter deque (about 3 us a request, a
    measurable share of an append), a future about 0.6 us.
    """

    __slots__ = ("_error", "_event", "_future", "_value")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._future: asyncio.Future[None] | None = None
        self._event: anyio.Event | None = None
        if loop is not None:
            self._future = loop.create_future()
        else:
            self._event = anyio.Event()
        self._value: V | None = None
        self._error: BaseException | None = None

    def _wake(self) -> None:
        if self._future is not None:
            # A waiting task that was cancelled cancelled the future with it.
            if not self._future.done():
                self._future.set_result(None)
        else:
            assert self._event is not None
            self._event.set()

    def set(self, value: V) -> None:
        """Deliver the reply."""
        self._value = value
        self._wake()

    def fail(self, error: BaseException) -> None:
        """Deliver an error instead of a reply."""
        self._error = error
        self._wake()

    async def wait(self) -> V:
        """Wait for the reply; re-raises a delivered error."""
        if self._future is not None:
            await self._future
        else:
            assert self._event is not None
            await self._event.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class Client(Generic[Req, V]):
    """Sends encoded requests to one actor and matches replies to waiters by request id."""

    def __init__(
        self,
        name: str,
        send: MemoryObjectSendStream[bytes],
        codec: Codec[Req],
        *,
        on_abandon: Callable[[int], Req] | None = None,
        validate: bool = False,
    ) -> None:
        self.name = name
        self._validate = validate
        self._on_abandon = on_abandon
        self._send = send
        self._codec = codec
        self._ids = itertools.count(1)
        self._pending: dict[int, Waiter[V]] = {}
        self._closed = False
        # Whether the backend is asyncio, learned at the first call (a Client runs on
        # one loop only). A flag, not the loop: nothing of the loop is kept reachable.
        self._on_asyncio: bool | None = None

    def next_id(self) -> int:
        """A fresh request id."""
        return next(self._ids)

    def _encode(self, message: Req) -> bytes:
        """The message's bytes; what cannot be encoded (an int beyond 64 bits) is an AidenError.

        Encoding checks no field type (a str where an int goes encodes fine). With
        ``validate`` the message is also decoded here, so a caller's out-of-type
        argument is refused in the caller: for an actor whose own loop would end on
        it (the scheduler). Actors served by :func:`~aiden.actors.serve.serve`
        answer an undecodable request with ``Failed`` instead, and large messages
        built by aiden alone (events for the writer, the summarizer, long-term
        memory) are not decoded twice.
        """
        try:
            raw = self._codec.encode(message)
            if self._validate:
                self._codec.decode(raw)
        except (msgspec.MsgspecError, OverflowError, TypeError, ValueError) as exc:
            raise AidenError(f"invalid request to the {self.name}: {exc}") from None
        return raw

    async def cast(self, message: Req) -> None:
        """Send without waiting for a reply (the inbox bound still applies back-pressure)."""
        if self._closed:
            raise ClosedError(f"{self.name} is closed")
        try:
            await self._send.send(self._encode(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ClosedError(f"{self.name} is not running") from exc

    async def _send_request(self, message: Req) -> None:
        # Like cast, but without a checkpoint when the inbox has room (send()
        # always yields once first): the caller parks on its waiter right after,
        # and that extra event loop pass per request is a measurable share of an
        # append's CPU. Back-pressure still applies when the inbox is full.
        if self._closed:
            raise ClosedError(f"{self.name} is closed")
        raw = self._encode(message)
        try:
            try:
                self._send.send_nowait(raw)
            except anyio.WouldBlock:
                await self._send.send(raw)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ClosedError(f"{self.name} is not running") from exc

    def try_cast(self, message: Req) -> bool:
        """Send if the inbox has room; False when full (used for coalescable requests)."""
        if self._closed:
            raise ClosedError(f"{self.name} is closed")
        try:
            self._send.send_nowait(self._encode(message))
        except anyio.WouldBlock:
            return False
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ClosedError(f"{self.name} is not running") from exc
        return True

    async def call(self, build: Callable[[int], Req]) -> V:
        """Build a request with a fresh id, send it, and wait for the matching reply."""
        rid = self.next_id()
        if self._on_asyncio is None:
            self._on_asyncio = _running_asyncio_loop() is not None
        waiter: Waiter[V] = Waiter(asyncio.get_running_loop() if self._on_asyncio else None)
        self._pending[rid] = waiter
        try:
            await self._send_request(build(rid))
            return await waiter.wait()
        finally:
            if self._pending.pop(rid, None) is not None and self._on_abandon is not None and not self._closed:
                # The caller gave up (cancelled) before the reply: tell the actor.
                try:
                    self.try_cast(self._on_abandon(rid))
                except ClosedError:
                    pass

    def resolve(self, request_id: int, value: V) -> None:
        """Wake the caller waiting for ``request_id`` (a caller that gave up is ignored)."""
        waiter = self._pending.pop(request_id, None)
        if waiter is not None:
            waiter.set(value)

    def reject(self, request_id: int, error: BaseException) -> None:
        """Fail the caller waiting for ``request_id``."""
        waiter = self._pending.pop(request_id, None)
        if waiter is not None:
            waiter.fail(error)

    def fail_all(self, error: BaseException) -> None:
        """Fail every waiting caller and refuse every later one (the actor stopped).

        Called when the reply router ends: no reply can arrive any more, so a
        later request would wait forever (the runtime's shielded close, after an
        actor crashed, did).
        """
        self._closed = True
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.fail(error)

    async def aclose(self) -> None:
        """Close the inbox: the actor drains what was sent, then stops."""
        self._closed = True
        await self._send.aclose()


async def route_replies(
    name: str,
    receive: MemoryObjectReceiveStream[bytes],
    codec: Codec[Rep],
    dispatch: Callable[[Rep], None],
    on_end: Callable[[], None],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Decode replies from an actor's outbox and hand each to ``dispatch`` until the outbox closes.

    A queued reply is taken without a checkpoint (``receive()`` always yields
    once first): the router only runs when an actor replied, and an extra event
    loop pass per reply is a measurable share of an append's CPU.
    """
    task_status.started()
    try:
        async with receive:
            while True:
                try:
                    raw = receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        raw = await receive.receive()
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break
                dispatch(codec.decode(raw))
    finally:
        on_end()


class _Reply(Protocol):
    @property
    def request_id(self) -> int: ...


R = TypeVar("R", bound=_Reply)


class Link(Generic[Req, Rep, V]):
    """One actor's wiring: its inbox and outbox streams, the :class:`Client` callers use, its reply router.

    ``requests`` and ``replies`` are the actor's two message unions (``A | B``, as
    :class:`~aiden.messages.Codec` takes them; the annotation ``Link[Req, Rep, V]``
    names their types); the client's callers get ``V``.
    """

    def __init__(
        self,
        name: str,
        requests: Any,
        replies: Any,
        size: int,
        *,
        on_abandon: Callable[[int], Req] | None = None,
        validate: bool = False,
    ) -> None:
        send, self.inbox = anyio.create_memory_object_stream[bytes](size)
        self.outbox, self._replies = anyio.create_memory_object_stream[bytes](size)
        """The actor's ends: it reads ``inbox`` and writes ``outbox``."""
        self.name = name
        self.client: Client[Req, V] = Client(
            name, send, Codec(requests), on_abandon=on_abandon, validate=validate
        )
        self._codec: Codec[Rep] = Codec(replies)
        self._streams = (send, self.inbox, self.outbox, self._replies)

    async def route(
        self,
        dispatch: Callable[[Rep], None],
        on_end: Callable[[], None] | None = None,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The reply router: ``dispatch`` each reply; at the end, ``on_end`` (default: fail every waiter)."""
        await route_replies(
            self.name,
            self._replies,
            self._codec,
            dispatch,
            on_end if on_end is not None else self.stopped,
            task_status=task_status,
        )

    def stopped(self) -> None:
        """Fail every waiting and later caller: the actor's outbox ended."""
        self.client.fail_all(ClosedError(f"{self.name} stopped"))

    def close(self) -> None:
        """Close all four stream ends (an actor cancelled mid-serve never reached its own exits)."""
        for stream in self._streams:
            stream.close()


def by_request_id(client: Client[Req, R]) -> Callable[[R], None]:
    """The usual dispatch: wake the caller waiting for the reply's request id with the reply."""
    return lambda reply: client.resolve(reply.request_id, reply)

"""Actor plumbing: encoded sends and request/reply matching on the caller's side, the request loop on the actor's.

A :class:`Client` assigns request ids and parks each caller on a :class:`Waiter` that a reply
router task wakes; :class:`Link` wires one actor (both bounded streams, client, router);
:func:`serve` is the one request loop of every request/reply actor.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.errors import AidenError, ClosedError
from aiden.messages import Codec, ErrorInfo, Failed, codec, error_info

__all__ = [
    "BACKGROUND",
    "Client",
    "Doorbell",
    "Latest",
    "Link",
    "Waiter",
    "by_request_id",
    "failure",
    "route_replies",
    "serve",
]

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
        self.publish(value)

    def publish(self, value: V) -> None:
        """Replace the snapshot."""
        if value is not None:  # None: nothing published yet
            config = getattr(type(value), "__struct_config__", None)
            if config is None or not config.frozen:
                raise TypeError(f"only frozen msgspec Structs can be published, not {type(value).__name__}")
        self._value = value

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

    Given the running asyncio loop it parks on a bare future of that loop (one waiter is
    made per request, and a future is far cheaper than an ``anyio.Event``); otherwise
    (trio) on an :class:`anyio.Event`.
    """

    __slots__ = ("_error", "_event", "_value")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._event: asyncio.Future[None] | anyio.Event = (
            loop.create_future() if loop is not None else anyio.Event()
        )
        self._value: V | None = None
        self._error: BaseException | None = None

    def _wake(self) -> None:
        event = self._event
        if asyncio.isfuture(event):
            # A waiting task that was cancelled cancelled the future with it.
            if not event.done():
                event.set_result(None)
        else:
            event.set()

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
        event = self._event
        await (event if asyncio.isfuture(event) else event.wait())
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


# Casts a parked client holds (coalescable requests: the ones past it are reported as coalesced); fewer
# than any inbox holds, so all of them go in when the actor runs again.
_HELD = 8

# Set in the runtime's own timed tasks (AutoCompact, idle learning, Dream's schedule): their requests
# are not a caller's, and do not keep an idle session's actors running.
BACKGROUND: ContextVar[bool] = ContextVar("aiden_background", default=False)


class Doorbell:
    """How a caller starts a parked session's actors again: ring, then wait until they run.

    Rings go to the runtime's wake loop with the memory's key; it answers each waiting ring
    once the actors run again (an answer left by a cancelled ringer only makes a later
    ringer look again). Only streams cross from the runtime's room.
    """

    __slots__ = ("_key", "_rings", "_started")

    def __init__(
        self,
        rings: MemoryObjectSendStream[tuple[int, bool]],
        key: int,
        started: MemoryObjectReceiveStream[None],
    ) -> None:
        self._rings = rings
        self._key = key
        self._started = started

    async def ring(self) -> None:
        """Ask for the actors to start; return once a run has started since."""
        try:
            # The caller saw its client parked, with no checkpoint since: the runtime has not
            # started this run's actors yet, so it answers this ring once they run.
            self._rings.send_nowait((self._key, True))
            await self._started.receive()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise ClosedError("memory is closed") from None

    def ring_soon(self) -> None:
        """Start the actors without waiting (a ring already pending does)."""
        try:
            self._rings.send_nowait((self._key, False))
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


class Client(Generic[Req, V]):
    """Sends encoded requests to one actor and matches replies to waiters by request id.

    A client outlives its actor's runs: while the actor is parked (``send`` None, an
    idle session's actors stopped) a request first rings the ``doorbell`` to start it again.
    """

    # Every open memory holds seven: an idle session's footprint.
    __slots__ = (
        "_closed",
        "_codec",
        "_doorbell",
        "_held",
        "_ids",
        "_on_abandon",
        "_on_asyncio",
        "_pending",
        "_send",
        "_validate",
        "name",
        "uses",
    )

    def __init__(
        self,
        name: str,
        send: MemoryObjectSendStream[bytes] | None,
        codec: Codec[Req],
        *,
        on_abandon: Callable[[int], Req] | None = None,
        validate: bool = False,
        doorbell: Doorbell | None = None,
    ) -> None:
        self.name = name
        self._validate = validate
        self._on_abandon = on_abandon
        self._doorbell = doorbell
        self._send = send
        # Casts made while parked, sent when the actor runs again.
        self._held: list[bytes] = []
        self.uses = 0
        """Requests sent by callers (not by the runtime's timed tasks): the runtime sees idleness as no change."""
        self._codec = codec
        self._ids = itertools.count(1)
        self._pending: dict[int, Waiter[V]] = {}
        self._closed = False
        # Whether the backend is asyncio, learned at the first call (a Client runs on
        # one loop only). A flag, not the loop: nothing of the loop is kept reachable.
        self._on_asyncio: bool | None = None

    @property
    def parked(self) -> bool:
        """True while the actor is not running and a request would first start it."""
        return self._send is None

    @property
    def answered(self) -> bool:
        """No caller waits for a reply."""
        return not self._pending

    @property
    def quiet(self) -> bool:
        """No caller waits for a reply and nothing waits in the inbox (an inbox of this client's alone)."""
        send = self._send
        return not self._pending and (send is None or send.statistics().current_buffer_used == 0)

    def bind(self, send: MemoryObjectSendStream[bytes]) -> None:
        """Send to a (re)started actor's inbox from now on (first what was cast while it was parked)."""
        self._send = send
        held, self._held = self._held, []
        for raw in held:
            send.send_nowait(raw)

    def park(self) -> None:
        """The actor is about to stop while idle: the next request rings the doorbell first."""
        self._send = None

    def _use(self) -> None:
        if not BACKGROUND.get():
            self.uses += 1

    async def _ready(self) -> MemoryObjectSendStream[bytes]:
        # The hot path (a running actor) costs two attribute checks and a counter.
        send = self._send
        while send is None:
            if self._doorbell is None or self._closed:
                raise ClosedError(f"{self.name} is not running")
            await self._doorbell.ring()
            send = self._send
        if self._closed:
            raise ClosedError(f"{self.name} is closed")
        self._use()
        return send

    def _encode(self, message: Req) -> bytes:
        """The message's bytes; what cannot be encoded (an int beyond 64 bits) is an AidenError.

        Encoding checks no field type; with ``validate`` the message is also decoded here, so an
        out-of-type argument is refused in the caller, for an actor whose own loop would end on
        it (the scheduler). Actors run by :func:`serve` answer it with ``Failed`` instead.
        """
        try:
            raw = self._codec.encode(message)
            if self._validate:
                self._codec.decode(raw)
        except (msgspec.MsgspecError, OverflowError, TypeError, ValueError) as exc:
            raise AidenError(f"invalid request to the {self.name}: {exc}") from None
        return raw

    def check(self, message: Req) -> None:
        """Refuse ``message`` as sending it would (an AidenError), sending nothing."""
        self._encode(message)

    async def cast(self, message: Req) -> None:
        """Send without waiting for a reply (the inbox bound still applies back-pressure)."""
        send = await self._ready()
        try:
            await send.send(self._encode(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ClosedError(f"{self.name} is not running") from exc

    async def _send_request(self, message: Req) -> None:
        # Like cast, but without a checkpoint when the inbox has room (send() always yields
        # first): the caller parks on its waiter right after, and the extra loop pass is costly.
        send = await self._ready()
        raw = self._encode(message)
        try:
            try:
                send.send_nowait(raw)
            except anyio.WouldBlock:
                await send.send(raw)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ClosedError(f"{self.name} is not running") from exc

    def try_cast(self, message: Req) -> bool:
        """Send if the inbox has room; False when full (used for coalescable requests).

        To a parked actor it is held, and sent once the ring started the actor again (True).
        """
        send = self._send
        if send is None and self._doorbell is not None and not self._closed:
            if len(self._held) >= _HELD:
                return False
            self._held.append(self._encode(message))
            self._use()
            self._doorbell.ring_soon()
            return True
        if self._closed or send is None:
            raise ClosedError(f"{self.name} is closed")
        self._use()
        try:
            send.send_nowait(self._encode(message))
        except anyio.WouldBlock:
            return False
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ClosedError(f"{self.name} is not running") from exc
        return True

    async def call(self, build: Callable[[int], Req], sent: Callable[[int], None] | None = None) -> V:
        """Build a request with a fresh id, send it, and wait for the matching reply.

        ``sent(request_id)`` is called once the request is in the actor's inbox: from then on the
        actor answers it, even if this caller gives up.
        """
        rid = next(self._ids)
        if self._on_asyncio is None:
            self._on_asyncio = _running_asyncio_loop() is not None
        waiter: Waiter[V] = Waiter(asyncio.get_running_loop() if self._on_asyncio else None)
        self._pending[rid] = waiter
        try:
            await self._send_request(build(rid))
            if sent is not None:
                sent(rid)
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
        """Fail every waiting caller and refuse every later one: the reply router ended, no reply can arrive."""
        self._closed = True
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.fail(error)

    async def aclose(self) -> None:
        """Close the inbox: the actor drains what was sent, then stops."""
        self._closed = True
        if self._send is not None:
            await self._send.aclose()


async def route_replies(
    receive: MemoryObjectReceiveStream[bytes],
    codec: Codec[Rep],
    dispatch: Callable[[Rep], None],
    on_end: Callable[[], None],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Decode replies from an actor's outbox and hand each to ``dispatch`` until the outbox closes.

    A queued reply is taken without a checkpoint (``receive()`` always yields first): the
    router only runs when an actor replied, and an extra loop pass per reply is costly.
    """
    task_status.started()
    try:
        async with receive:
            while True:
                try:
                    raw = receive.receive_nowait()
                except anyio.WouldBlock:
                    raw = await receive.receive()
                dispatch(codec.decode(raw))
    except anyio.EndOfStream:
        pass
    finally:
        on_end()


class _Identified(Protocol):
    """What every request and reply carries: the id matching a reply (or :class:`Failed`) to its request."""

    @property
    def request_id(self) -> int: ...


R = TypeVar("R", bound=_Identified)


class _Ends(NamedTuple):
    send: MemoryObjectSendStream[bytes]
    inbox: MemoryObjectReceiveStream[bytes]
    outbox: MemoryObjectSendStream[bytes]
    replies: MemoryObjectReceiveStream[bytes]


class Link(Generic[Req, Rep, V]):
    """One actor's wiring: its inbox and outbox streams, the :class:`Client` callers use, its reply router.

    ``requests`` and ``replies`` are the actor's two message unions (``A | B``); callers get ``V``.
    """

    __slots__ = ("_codec", "_ends", "_size", "client", "name")

    def __init__(
        self,
        name: str,
        requests: Any,
        replies: Any,
        size: int,
        *,
        doorbell: Doorbell | None = None,
    ) -> None:
        self.name = name
        self._size = size
        self.client: Client[Req, V] = Client(name, None, codec(requests), doorbell=doorbell)
        self._codec: Codec[Rep] = codec(replies)
        self._ends: _Ends | None = None
        self.bind()

    def bind(self) -> None:
        """Fresh streams for a (re)started actor, and the client sending to them."""
        send, inbox = anyio.create_memory_object_stream[bytes](self._size)
        outbox, replies = anyio.create_memory_object_stream[bytes](self._size)
        self._ends = _Ends(send, inbox, outbox, replies)
        self.client.bind(send)

    def _bound(self) -> _Ends:
        if self._ends is None:
            raise ClosedError(f"{self.name} is not running")
        return self._ends

    @property
    def inbox(self) -> MemoryObjectReceiveStream[bytes]:
        """The actor's end it reads requests from."""
        return self._bound().inbox

    @property
    def outbox(self) -> MemoryObjectSendStream[bytes]:
        """The actor's end it writes replies to."""
        return self._bound().outbox

    async def route(
        self, dispatch: Callable[[Rep], None], *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The reply router: ``dispatch`` each reply; at the end, fail every waiter (see :meth:`_stopped`)."""
        await route_replies(
            self._bound().replies, self._codec, dispatch, self._stopped, task_status=task_status
        )

    def _stopped(self) -> None:
        """Fail every waiting and later caller: the actor's outbox ended (unless it was parked, idle)."""
        if not self.client.parked:
            self.client.fail_all(ClosedError(f"{self.name} stopped"))

    def close(self) -> None:
        """Close and drop all four stream ends (an actor cancelled mid-serve never reached its own exits)."""
        ends, self._ends = self._ends, None
        if ends is not None:
            for stream in ends:
                stream.close()


def by_request_id(client: Client[Req, R]) -> Callable[[R], None]:
    """The usual dispatch: wake the caller waiting for the reply's request id with the reply."""
    return lambda reply: client.resolve(reply.request_id, reply)


async def serve(
    name: str,
    inbox: MemoryObjectReceiveStream[bytes],
    outbox: MemoryObjectSendStream[bytes],
    requests: Codec[R],
    replies: Codec[Rep | Failed],
    handle: Callable[[R], Awaitable[Rep]],
) -> None:
    """Answer every request of ``inbox`` on ``outbox`` until the inbox closes; closes both ends.

    A request that raises is answered by :class:`~aiden.messages.Failed` (see :func:`failure`) and
    the loop goes on: only cancellation propagates, so no caller waits for a swallowed answer.
    Workers sharing one inbox each pass their own clones of both streams.
    """
    async with inbox, outbox:
        async for raw in inbox:
            reply: Rep | Failed
            try:
                request = requests.decode(raw)
            except msgspec.ValidationError as exc:
                # A caller's argument of the wrong type: answered if its request id can be read,
                # never the end of this actor (which would end the runtime's task group with it).
                logging.getLogger(f"aiden.{name}").error("refused an undecodable request: %s", exc)
                try:
                    fields = msgspec.msgpack.decode(raw)
                except msgspec.DecodeError:
                    continue
                rid = fields.get("request_id") if isinstance(fields, dict) else None
                if type(rid) is not int:  # a bool is no request id
                    continue
                info = ErrorInfo(kind="AidenError", message=f"invalid request to the {name}: {exc}")
                reply = Failed(rid, info)
            else:
                try:
                    reply = await handle(request)
                except Exception as exc:
                    reply = failure(name, request, exc)
            await outbox.send(replies.encode(reply))


def failure(name: str, request: _Identified, exc: Exception, session: int = 0) -> Failed:
    """The :class:`Failed` answering ``request`` of the actor ``name``, whose handler raised ``exc``.

    An aiden error or ``OSError`` travels via :func:`~aiden.messages.error_info`; any other
    exception is a bug: logged loudly, and answered so the caller is not left hanging.
    """
    log = logging.getLogger(f"aiden.{name}")
    if isinstance(exc, AidenError | OSError):
        log.warning("%s failed: %s", type(request).__name__, exc)
        return Failed(request.request_id, error_info(exc), session)
    log.exception("%s raised %s", type(request).__name__, type(exc).__name__, exc_info=exc)
    info = ErrorInfo(kind="AidenError", message=f"internal error in {name}: {type(exc).__name__}: {exc}")
    return Failed(request.request_id, info, session)

"""The one request loop every request/reply actor runs (reader, recall, long-term).

An actor supplies its codecs and a ``handle`` coroutine holding its one
``match``; the loop decodes, handles, encodes and replies until the inbox
closes. A request that raises is answered by :class:`~aiden.messages.Failed`
and the loop goes on: an aiden error travels as itself, an ``OSError`` as a
``StorageError`` with its errno, any other exception (a bug in a handler) as a
plain ``AidenError`` naming it, logged with its traceback. Only cancellation
propagates: a caller parked on a reply must never wait for an answer that an
exception swallowed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.errors import AidenError
from aiden.messages import Codec, ErrorInfo, Failed, error_info

__all__ = ["Request", "serve"]


class Request(Protocol):
    """What every request carries: the id its reply (or :class:`Failed`) answers."""

    @property
    def request_id(self) -> int: ...


Req = TypeVar("Req", bound=Request)
Rep = TypeVar("Rep")


async def serve(
    name: str,
    inbox: MemoryObjectReceiveStream[bytes],
    outbox: MemoryObjectSendStream[bytes],
    requests: Codec[Req],
    replies: Codec[Rep | Failed],
    handle: Callable[[Req], Awaitable[Rep]],
) -> None:
    """Answer every request of ``inbox`` on ``outbox`` until the inbox closes; closes both ends.

    Workers sharing one inbox each pass their own clones of both streams.
    """
    log = logging.getLogger(f"aiden.{name}")
    async with inbox, outbox:
        async for raw in inbox:
            try:
                request = requests.decode(raw)
            except msgspec.ValidationError as exc:
                # A caller's argument of the wrong type: answered, never the end of this actor
                # (which would end the runtime's task group with it).
                await _refuse(name, raw, exc, outbox, replies)
                continue
            reply: Rep | Failed
            try:
                reply = await handle(request)
            except (AidenError, OSError) as exc:
                # OSError travels as a StorageError with its errno (error_info's rule).
                log.warning("%s failed: %s", type(request).__name__, exc)
                reply = Failed(request.request_id, error_info(exc))
            except Exception as exc:
                # A bug, not a condition: logged loudly, and answered so the caller is not left hanging.
                log.exception("%s raised %s", type(request).__name__, type(exc).__name__)
                info = ErrorInfo(
                    kind="AidenError", message=f"internal error in {name}: {type(exc).__name__}: {exc}"
                )
                reply = Failed(request.request_id, info)
            await outbox.send(replies.encode(reply))


async def _refuse(
    name: str,
    raw: bytes,
    exc: msgspec.ValidationError,
    outbox: MemoryObjectSendStream[bytes],
    replies: Codec[Rep | Failed],
) -> None:
    """Answer an undecodable request with ``Failed`` if its request id can be read, else log it."""
    try:
        fields = msgspec.msgpack.decode(raw)
    except msgspec.DecodeError:
        fields = None
    rid = fields.get("request_id") if isinstance(fields, dict) else None
    logging.getLogger(f"aiden.{name}").error("refused an undecodable request: %s", exc)
    if isinstance(rid, int) and not isinstance(rid, bool):
        info = ErrorInfo(kind="AidenError", message=f"invalid request to the {name}: {exc}")
        await outbox.send(replies.encode(Failed(rid, info)))

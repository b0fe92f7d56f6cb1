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
            request = requests.decode(raw)
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

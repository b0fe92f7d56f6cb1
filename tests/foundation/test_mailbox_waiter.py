"""Client/Waiter request-reply matching on both anyio backends.

Under asyncio a waiter parks on a bare future of the loop, under trio on an
anyio.Event: the same behaviour is asserted for both (reply, error, a caller
cancelled before its reply, every caller failed at once).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import msgspec
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from aiden.actors.mailbox import Client, Waiter, _running_asyncio_loop
from aiden.errors import ClosedError, StorageError
from aiden.messages import Codec

pytestmark = pytest.mark.anyio


class Ping(msgspec.Struct, frozen=True, tag=True):
    request_id: int


class Abandoned(msgspec.Struct, frozen=True, tag=True):
    request_id: int


Inbox = Ping | Abandoned


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def _client() -> AsyncIterator[
    tuple[Client[Inbox, str], Codec[Inbox], MemoryObjectReceiveStream[bytes]]
]:
    send, recv = anyio.create_memory_object_stream[bytes](16)
    codec: Codec[Inbox] = Codec(Inbox)
    client: Client[Inbox, str] = Client("test actor", send, codec, on_abandon=Abandoned)
    async with recv:
        try:
            yield client, codec, recv
        finally:
            await client.aclose()


async def test_call_returns_the_matching_reply() -> None:
    async with _client() as (client, codec, recv), anyio.create_task_group() as tg:

        async def actor() -> None:
            for _ in range(2):
                msg = codec.decode(await recv.receive())
                client.resolve(msg.request_id, f"reply {msg.request_id}")

        tg.start_soon(actor)
        assert await client.call(Ping) == "reply 1"
        assert await client.call(Ping) == "reply 2"


async def test_rejected_call_raises_the_delivered_error() -> None:
    async with _client() as (client, codec, recv), anyio.create_task_group() as tg:

        async def actor() -> None:
            msg = codec.decode(await recv.receive())
            client.reject(msg.request_id, StorageError("disk full"))

        tg.start_soon(actor)
        with pytest.raises(StorageError, match=r"^disk full$"):
            await client.call(Ping)


async def test_cancelled_caller_is_abandoned_and_a_late_reply_is_ignored() -> None:
    async with _client() as (client, codec, recv):
        with anyio.move_on_after(0.05) as scope:
            await client.call(Ping)
        assert scope.cancelled_caught
        assert codec.decode(recv.receive_nowait()) == Ping(1)
        assert codec.decode(recv.receive_nowait()) == Abandoned(1)
        client.resolve(1, "too late")  # the caller is gone: nothing to wake, nothing raised
        # The client still serves the next caller.
        async with anyio.create_task_group() as tg:

            async def actor() -> None:
                msg = codec.decode(await recv.receive())
                client.resolve(msg.request_id, "next")

            tg.start_soon(actor)
            assert await client.call(Ping) == "next"


async def test_fail_all_wakes_every_waiting_caller() -> None:
    async with _client() as (client, _, _recv):
        errors: list[str] = []

        async def caller() -> None:
            try:
                await client.call(Ping)
            except ClosedError as exc:
                errors.append(str(exc))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(caller)
            await anyio.wait_all_tasks_blocked()
            client.fail_all(ClosedError("test actor stopped"))
        assert errors == ["test actor stopped"] * 3


async def test_waiter_woken_after_its_task_was_cancelled_does_not_raise() -> None:
    # The waiter's owner is cancelled while parked; a reply that is routed before
    # the owner's cleanup ran must not raise in the reply router.
    waiters: list[Waiter[str]] = []

    async def park() -> None:
        waiter: Waiter[str] = Waiter(_running_asyncio_loop())
        waiters.append(waiter)
        await waiter.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(park)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
        waiters[0].set("late")  # raised InvalidStateError on a cancelled future before the guard
    assert len(waiters) == 1


async def test_a_call_after_fail_all_is_refused_instead_of_waiting_forever() -> None:
    # fail_all runs when the reply router ends: no reply can come any more. A later call
    # (the runtime's shielded close after an actor crashed) waited forever before.
    async with _client() as (client, _, recv):
        client.fail_all(ClosedError("test actor stopped"))
        with anyio.fail_after(10):  # only a guard: the refusal needs no waiting
            with pytest.raises(ClosedError, match=r"^test actor is closed$"):
                await client.call(Ping)
        with pytest.raises(anyio.WouldBlock):
            recv.receive_nowait()  # nothing was sent to the stopped actor


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # its scheduling is FIFO: trio's is shuffled on purpose
@pytest.mark.parametrize("receiver_delay", range(4))
@pytest.mark.parametrize("caller_delay", range(4))
async def test_a_cast_waiting_on_a_full_inbox_keeps_its_place(receiver_delay: int, caller_delay: int) -> None:
    # A cast that finds the inbox full queues for it after the one checkpoint every send makes:
    # a request another task makes later does not overtake it, however the tasks interleave.
    send, recv = anyio.create_memory_object_stream[bytes](1)
    codec: Codec[Inbox] = Codec(Inbox)
    client: Client[Inbox, str] = Client("test actor", send, codec, on_abandon=Abandoned)
    send.send_nowait(codec.encode(Ping(0)))  # the inbox is full
    got: list[Inbox] = []
    async with send, recv, anyio.create_task_group() as tg:

        async def receiver() -> None:
            for _ in range(receiver_delay):
                await anyio.lowlevel.checkpoint()
            for _ in range(3):
                got.append(codec.decode(await recv.receive()))
            tg.cancel_scope.cancel()  # the later call waits for a reply nobody sends

        async def later_caller() -> None:
            for _ in range(caller_delay):
                await anyio.lowlevel.checkpoint()
            await client.call(Ping)

        tg.start_soon(client.cast, Abandoned(-1))
        tg.start_soon(receiver)
        tg.start_soon(later_caller)
    assert got == [Ping(0), Abandoned(-1), Ping(1)]
